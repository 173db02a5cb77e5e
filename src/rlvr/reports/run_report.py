"""``rlvr report RUN_DIR``: one self-contained HTML page about a training run.

The page (``RUN_DIR/report.html`` by default) holds the run settings, the baseline vs trained
validation table (greedy pass@1 and the sampled pass@k / maj@k), training curves as embedded
base64 PNGs (matplotlib, Agg) with every alert drawn as a vertical line at its step, the alerts
table and a sample of completions with their reward breakdown (a multi-turn run: each
episode's trajectory, its environment spans marked as not trained, and curves of turns, tool
calls and finish reasons). No JavaScript, no external
resources: the file can be mailed or archived on its own.

Every input is optional except that the directory must hold ``metrics.jsonl`` or
``results.json``; a missing or unreadable file makes its section say "not recorded", so the
report works on runs that are still going or that crashed.

This module builds the page from its sections; the pieces live in :mod:`rlvr.reports.run_files`
(reading the run directory), :mod:`rlvr.reports.numbers` (how numbers are shown),
:mod:`rlvr.reports.plots` (the curves) and :mod:`rlvr.reports.markup` (HTML pieces, CSS).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rlvr.eval.paired import gain_summary
from rlvr.io import atomic_write
from rlvr.reports.markup import (
    CSS,
    Html,
    esc,
    html_figure,
    html_section,
    html_table,
    missing_note,
)
from rlvr.reports.numbers import finite, num, pct, points, series
from rlvr.reports.plots import (
    ACTION_COLOURS,
    EPISODE_PLOTS,
    METRIC_PLOTS,
    OTHER_ACTION_COLOUR,
    metric_plot,
    reward_spec,
    validation_plot,
)
from rlvr.reports.run_files import RunData, load_run

REPORT_NAME = "report.html"
SAMPLES_PER_STEP = 4
SETTINGS = (("name", "name"), ("seed", "seed"), ("model.name", "model"),
            ("data.source", "data source"), ("grpo.steps", "GRPO steps"),
            ("grpo.prompts_per_step", "prompts per step"), ("grpo.group_size", "group size"),
            ("grpo.learning_rate", "learning rate"), ("algo.kl_coef", "KL coefficient"))
RESULT_ROWS = (("base_model", "base (no SFT)"), ("baseline", "baseline (entered GRPO)"),
               ("trained", "trained (GRPO)"))


def write_run_report(run_dir: Path, output: Path | None = None) -> Path:
    """Write the HTML report of the run in ``run_dir`` to ``output`` (default
    ``run_dir/report.html``), atomically. Returns the path written.

    Raises:
        ValueError: ``run_dir`` is not a directory, or holds neither ``metrics.jsonl`` nor
            ``results.json`` (the message names the directory).
        OSError: the report cannot be written.
    """
    data = load_run(Path(run_dir))
    output = Path(output) if output is not None else data.run_dir / REPORT_NAME
    page = render_html(data)
    with atomic_write(output) as f:
        f.write(page)
    return output


def render_html(data: RunData) -> str:
    """The whole report page as one HTML string (all user text escaped)."""
    title = f"rlvr run report: {_run_name(data)}"
    body = "\n".join([
        _header(data), _settings_section(data), _results_section(data),
        _curves_section(data), _validation_section(data), _alerts_section(data),
        _samples_section(data)])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"{body}\n</body>\n</html>\n")


def _run_name(data: RunData) -> str:
    return str((data.config or {}).get("name") or data.run_dir.name)


def _config_value(config: dict, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "-" if value is None else value


# -- sections -----------------------------------------------------------------------------------
def _header(data: RunData) -> str:
    steps = series(data.metrics or [], "step")[0] if data.metrics else []
    facts = [f"run directory: {data.run_dir}",
             f"generated: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
             f"GRPO steps logged: {len(steps)}" + (f" (last {steps[-1]:g})" if steps else "")]
    wall = finite((data.results or {}).get("wall_seconds"))
    facts.append(f"wall time: {wall / 60:.1f} min" if wall is not None else
                 "wall time: not recorded (run unfinished?)")
    items = "".join(f"<li>{esc(f)}</li>" for f in facts)
    notes = "".join(f"<li>{esc(n)}</li>" for n in data.notes)
    contents = " | ".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("settings", "settings"), ("results", "results"), ("curves", "training curves"),
        ("validation", "validation"), ("alerts", "alerts"), ("samples", "samples")))
    return (f"<h1>Training report: {esc(_run_name(data))}</h1>\n<ul class=\"facts\">{items}"
            f"</ul>\n" + (f'<ul class="notes">{notes}</ul>\n' if notes else "")
            + f'<nav>{contents}</nav>')


def _settings_section(data: RunData) -> str:
    if data.config is None:
        return html_section("settings", "Settings", missing_note("config.yaml"))
    rows = [[label, _config_value(data.config, key)] for key, label in SETTINGS]
    env = data.config.get("env")
    if isinstance(env, dict):  # a multi-turn run
        rows.append(["environment", f"{env.get('name')}, max {env.get('max_turns')} turns"
                     + (f", tools {', '.join(map(str, env.get('tools') or []))}"
                        if env.get("name") == "tool" else "")])
    return html_section("settings", "Settings", html_table(["setting", "value"], rows, "settings"))


def _result_rows(data: RunData) -> tuple[dict[str, dict], str]:
    """Validation rows by role (base_model / baseline / trained) and where they came from:
    results.json, else (an unfinished run) the latest rows of validation.jsonl."""
    results = data.results or {}
    if isinstance(results.get("trained"), dict):
        rows = {key: results.get(key) for key, _ in RESULT_ROWS}
        return {k: v for k, v in rows.items() if isinstance(v, dict)}, "results.json"
    by_label = {r.get("label"): r for r in data.validation or []}
    latest = by_label.get("trained") or by_label.get("grpo")
    rows = {"base_model": by_label.get("base"),
            "baseline": by_label.get("before_grpo") or by_label.get("base"), "trained": latest}
    rows = {k: v for k, v in rows.items() if v}
    source = ("validation.jsonl (results.json not recorded: latest validation so far)"
              if rows else "")
    return rows, source


def _validation_table(rows: dict[str, dict]) -> str:
    header = ["model", "step", "pass@1", "mean reward", "format", "truncated", "mean length",
              "problems"]
    body = [[label, num(r.get("step"), 0), pct(r.get("pass_at_1")),
             num(r.get("mean_reward")), pct(r.get("format_rate")),
             pct(r.get("truncation_rate")), num(r.get("mean_length"), 1),
             num(r.get("n"), 0)]
            for key, label in RESULT_ROWS if (r := rows.get(key))]
    return html_table(header, body, "results")


def _headline(rows: dict[str, dict], results: dict) -> str:
    before, after = rows.get("baseline"), rows.get("trained")
    if not before or not after:
        return ""
    gain = results.get("gain_pass_at_1")
    if finite(gain) is None and finite(after.get("pass_at_1")) is not None \
            and finite(before.get("pass_at_1")) is not None:
        gain = after["pass_at_1"] - before["pass_at_1"]
    paired = gain_summary(results.get("gain_pass_at_1_ci"))
    paired = f"; {paired}" if paired else ""
    return (f'<p class="headline">pass@1 (greedy): {pct(before.get("pass_at_1"))} &rarr; '
            f'{pct(after.get("pass_at_1"))} ({esc(points(gain) + paired)})</p>')


def _pass_at_k_table(runs: dict) -> str:
    """Sampled pass@k / maj@k per model, plus a gain row (points) when both are present."""
    runs = {k: v for k, v in runs.items() if isinstance(v, dict)}
    ks = sorted({int(k) for r in runs.values() for k in (r.get("pass@k") or {})
                 if str(k).isdigit()})
    if not ks:
        return missing_note("sampled pass@k")
    columns = [("pass@k", k) for k in ks] + [("maj@k", k) for k in ks if k > 1]
    header = ["model"] + [f"{m[:-2]}@{k}" for m, k in columns]

    def value(run: dict, metric: str, k: int) -> Any:
        return (run.get(metric) or {}).get(str(k))

    names = {"baseline": "baseline (entered GRPO)", "trained": "trained (GRPO)"}
    body = [[names.get(label, label)] + [pct(value(run, m, k)) for m, k in columns]
            for label, run in runs.items()]
    if "baseline" in runs and "trained" in runs:
        gains = []
        for m, k in columns:
            a, b = finite(value(runs["trained"], m, k)), finite(value(runs["baseline"], m, k))
            gains.append("-" if a is None or b is None else f"{100 * (a - b):+.1f}")
        body.append(["gain (points)"] + gains)
    first = next(iter(runs.values()))
    caption = (f"sampled validation: n = {first.get('n', '?')} samples per problem, "
               f"temperature {first.get('temperature', '?')}, "
               f"{first.get('problems', '?')} problems")
    return f'<p class="caption">{esc(caption)}</p>' + html_table(header, body, "results")


def _results_section(data: RunData) -> str:
    rows, source = _result_rows(data)
    if not rows:
        return html_section("results", "Baseline vs trained", missing_note("validation results"))
    parts = [_headline(rows, data.results or {}),
             f'<p class="caption">greedy validation, from {esc(source)}</p>',
             _validation_table(rows), "<h3>Sampled pass@k / maj@k</h3>"]
    runs = (data.results or {}).get("pass_at_k")
    parts.append(_pass_at_k_table(runs) if isinstance(runs, dict) and runs
                 else missing_note("sampled pass@k"))
    return html_section("results", "Baseline vs trained", "\n".join(p for p in parts if p))


def _curves_section(data: RunData) -> str:
    if data.metrics is None:
        return html_section("curves", "Training curves", missing_note("metrics.jsonl"))
    alerts = data.alerts or []
    specs = (reward_spec(data.metrics),) + METRIC_PLOTS
    if any("episode_turns_mean" in row for row in data.metrics):
        specs += EPISODE_PLOTS
    figures = [html_figure(spec.title, metric_plot(spec, data.metrics, alerts),
                           "no " + " / ".join(spec.keys + spec.right_keys) + " in metrics.jsonl")
               for spec in specs]
    legend = ("<p class=\"caption\">Dotted vertical lines mark alerts: "
              + ", ".join(f'<span style="color:{c}">{a}</span>'
                          for a, c in ACTION_COLOURS.items()) + ".</p>")
    return html_section("curves", "Training curves", legend + "\n" + "\n".join(figures))


def _validation_section(data: RunData) -> str:
    if data.validation is None:
        return html_section("validation", "Validation over training",
                            missing_note("validation.jsonl"))
    png = validation_plot(data.validation, data.alerts or [])
    return html_section("validation", "Validation over training",
                        html_figure("Validation pass@1", png, "no pass_at_1 in validation.jsonl"))


def _alert_row(alert: dict) -> list[Any]:
    action = str(alert.get("action", "?"))
    colour = ACTION_COLOURS.get(action, OTHER_ACTION_COLOUR)
    message = esc(alert.get("message", ""))
    examples = alert.get("examples") or []
    if isinstance(examples, list) and examples:
        shown = "\n---\n".join(str(e) for e in examples[:5])
        message += (f"<details><summary>{len(examples)} example(s)</summary>"
                    f"<pre>{esc(shown)}</pre></details>")
    return [num(alert.get("step"), 0), alert.get("check", "?"),
            Html(f'<span class="action" style="background:{colour}">{esc(action)}</span>'),
            Html(message), num(alert.get("value"), 4), num(alert.get("threshold"), 4)]


def _alerts_section(data: RunData) -> str:
    if data.alerts is None:
        return html_section("alerts", "Alerts", missing_note("alerts.jsonl"))
    if not data.alerts:
        return html_section("alerts", "Alerts", "<p>No alerts were raised.</p>")
    alerts = sorted(data.alerts, key=lambda a: finite(a.get("step")) or 0.0)
    counts: dict[str, int] = {}
    for alert in alerts:
        counts[str(alert.get("action", "?"))] = counts.get(str(alert.get("action", "?")), 0) + 1
    summary = ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
    table = html_table(["step", "check", "action", "message", "value", "threshold"],
                       [_alert_row(a) for a in alerts], "alerts")
    return html_section("alerts", "Alerts", f"<p>{esc(summary)}</p>\n{table}")


def _sample_steps(samples: Sequence[dict]) -> list[float]:
    """The first, middle and last logged step (distinct)."""
    steps = sorted({s for row in samples if (s := finite(row.get("step"))) is not None})
    if not steps:
        return []
    return sorted({steps[0], steps[len(steps) // 2], steps[-1]})


def _sample_html(row: dict) -> str:
    components = row.get("components")
    parts = (", ".join(f"{k} {num(v)}" for k, v in components.items())
             if isinstance(components, dict) else "-")
    facts = [(key, row[key]) for key in ("id", "reference") if row.get(key) is not None]
    facts += [("reward", num(row.get("reward"))), ("components", parts),
              ("status", row.get("status", "-")), ("extracted", row.get("extracted"))]
    if row.get("category") is not None:
        facts.append(("category", row["category"]))
    if isinstance(row.get("trajectory"), list):
        facts += [(key, row.get(key)) for key in ("turns", "tool_calls", "finish_reason")]
    meta = " | ".join(f"<b>{k}</b> {esc('-' if v is None else v)}" for k, v in facts)
    if isinstance(row.get("trajectory"), list):
        return f'<div class="sample"><p class="meta">{meta}</p>{_trajectory_html(row)}</div>'
    return (f'<div class="sample"><p class="meta">{meta}</p>'
            f"<pre>{esc(row.get('completion') or '')}</pre></div>")


def _trajectory_html(row: dict) -> str:
    """An episode's segments in order: the sampled assistant turns as trained, the
    environment's observations shaded and labelled "not trained" (no gradient)."""
    parts = []
    for segment in row["trajectory"]:
        if not isinstance(segment, dict):
            continue
        trained = bool(segment.get("trained"))
        tokens = segment.get("tokens")
        label = (f"{segment.get('role', '?')}: "
                 + ("trained" if trained else "environment, not trained")
                 + (f", {tokens} tokens" if isinstance(tokens, int) else ""))
        parts.append(f'<div class="segment {"trained" if trained else "env"}">'
                     f'<span class="role">{esc(label)}</span>'
                     f"<pre>{esc(segment.get('text') or '')}</pre></div>")
    return "\n".join(parts)


def _samples_section(data: RunData) -> str:
    title = "Sample completions"
    if data.samples is None:
        return html_section("samples", title, missing_note("samples.jsonl"))
    parts = []
    for step in _sample_steps(data.samples):
        rows = [r for r in data.samples if finite(r.get("step")) == step][:SAMPLES_PER_STEP]
        parts.append(f"<h3>step {step:g}</h3>\n" + "\n".join(_sample_html(r) for r in rows))
    body = "\n".join(parts) if parts else "<p>samples.jsonl holds no samples with a step.</p>"
    return html_section("samples", title, body)


__all__ = ["render_html", "write_run_report"]

"""``rlvr report RUN_DIR``: one self-contained HTML page about a training run.

The page (``RUN_DIR/report.html`` by default) holds the run settings, the baseline vs trained
validation table (greedy pass@1 and the sampled pass@k / maj@k), training curves as embedded
base64 PNGs (matplotlib, Agg) with every alert drawn as a vertical line at its step, the alerts
table and a sample of completions with their reward breakdown. No JavaScript, no external
resources: the file can be mailed or archived on its own.

Every input is optional except that the directory must hold ``metrics.jsonl`` or
``results.json``; a missing or unreadable file makes its section say "not recorded", so the
report works on runs that are still going or that crashed.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from rlvr.io import atomic_write, read_jsonl_lenient

REPORT_NAME = "report.html"
NOT_RECORDED = "not recorded"
# Alert colours are kept apart from matplotlib's default cycle (tab10) used for the curves.
ACTION_COLOURS = {"warn": "#d4a000", "stop": "#e0005a", "rollback": "#5b00b0"}
OTHER_ACTION_COLOUR = "#404040"
SAMPLES_PER_STEP = 4
SETTINGS = (("name", "name"), ("seed", "seed"), ("model.name", "model"),
            ("data.source", "data source"), ("grpo.steps", "GRPO steps"),
            ("grpo.prompts_per_step", "prompts per step"), ("grpo.group_size", "group size"),
            ("grpo.learning_rate", "learning rate"), ("algo.kl_coef", "KL coefficient"))
RESULT_ROWS = (("base_model", "base (no SFT)"), ("baseline", "baseline (entered GRPO)"),
               ("trained", "trained (GRPO)"))


@dataclass(frozen=True)
class PlotSpec:
    """One training-curve plot: ``keys`` of metrics.jsonl on the left axis, ``right_keys`` on
    a second axis; ``percent`` formats that axis as a percentage of 1."""

    slug: str
    title: str
    ylabel: str
    keys: tuple[str, ...]
    percent: bool = False
    right_keys: tuple[str, ...] = ()
    right_label: str = ""
    right_percent: bool = False


METRIC_PLOTS = (
    PlotSpec("length", "Completion length and truncation", "tokens",
             ("length_mean", "length_max"), right_keys=("truncation_rate",),
             right_label="truncation rate", right_percent=True),
    PlotSpec("kl", "KL divergence to the reference", "KL", ("kl",)),
    PlotSpec("clip", "Clip fraction", "fraction of tokens", ("clip_frac",), percent=True),
    PlotSpec("zero_variance", "Zero-variance groups", "fraction of groups",
             ("zero_variance_fraction",), percent=True),
    PlotSpec("degeneration", "Degeneration", "fraction of completions",
             ("repetition_rate", "garbled_rate", "script_mix_rate"), percent=True),
    PlotSpec("format", "Format and parsing errors", "fraction of completions",
             ("format_error_rate", "parse_failure_rate", "multiple_answer_rate"), percent=True),
    PlotSpec("entropy", "Policy entropy", "nats per token", ("entropy",)),
    PlotSpec("grad_norm", "Gradient norm", "L2 norm", ("grad_norm",)),
    PlotSpec("seconds", "Seconds per step", "seconds",
             ("seconds_rollout", "seconds_reward", "seconds_update")),
)


@dataclass
class RunData:
    """What a run directory holds; None for a file that is absent or unreadable."""

    run_dir: Path
    config: dict | None = None
    results: dict | None = None
    metrics: list[dict] | None = None
    validation: list[dict] | None = None
    alerts: list[dict] | None = None
    samples: list[dict] | None = None
    notes: list[str] = field(default_factory=list)


# -- public API ---------------------------------------------------------------------------------
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


def load_run(run_dir: Path) -> RunData:
    """Read every report input of ``run_dir``; malformed JSONL lines are skipped (and noted).

    Raises:
        ValueError: ``run_dir`` is not a directory, or has neither metrics.jsonl nor
            results.json.
    """
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: not a run directory (it does not exist or is a file)")
    if not (run_dir / "metrics.jsonl").is_file() and not (run_dir / "results.json").is_file():
        raise ValueError(f"{run_dir}: not a run directory (it has neither metrics.jsonl nor "
                         f"results.json)")
    data = RunData(run_dir)
    data.config = _read_mapping(run_dir / "config.yaml", data.notes)
    data.results = _read_mapping(run_dir / "results.json", data.notes)
    for name in ("metrics", "validation", "alerts", "samples"):
        setattr(data, name, _read_jsonl(run_dir / f"{name}.jsonl", data.notes))
    return data


def render_html(data: RunData) -> str:
    """The whole report page as one HTML string (all user text escaped)."""
    title = f"rlvr run report: {_run_name(data)}"
    body = "\n".join([
        _header(data), _settings_section(data), _results_section(data),
        _curves_section(data), _validation_section(data), _alerts_section(data),
        _samples_section(data)])
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"{body}\n</body>\n</html>\n")


# -- reading ------------------------------------------------------------------------------------
def _read_mapping(path: Path, notes: list[str]) -> dict | None:
    """A JSON or YAML file holding one mapping; None (with a note) when absent or unreadable."""
    import yaml

    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        value = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        notes.append(f"{path.name}: unreadable ({exc})")
        return None
    if not isinstance(value, dict):
        notes.append(f"{path.name}: not a mapping; ignored")
        return None
    return value


def _read_jsonl(path: Path, notes: list[str]) -> list[dict] | None:
    """The JSON objects of a JSONL file; None when absent. Bad lines (e.g. the half-written
    last line of a running job) are skipped and counted in ``notes``."""
    if not path.is_file():
        return None
    try:
        rows, bad = read_jsonl_lenient(path)
    except OSError as exc:
        notes.append(f"{path.name}: unreadable ({exc.strerror or exc})")
        return None
    if bad:
        notes.append(f"{path.name}: skipped {bad} line(s) that are not JSON objects")
    return rows


# -- numbers ------------------------------------------------------------------------------------
def _finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _pct(value: Any) -> str:
    number = _finite(value)
    return "-" if number is None else f"{number:.1%}"


def _num(value: Any, digits: int = 3) -> str:
    number = _finite(value)
    return "-" if number is None else f"{number:.{digits}f}"


def _points(value: Any) -> str:
    number = _finite(value)
    return "-" if number is None else f"{100 * number:+.1f} points"


def _series(rows: Iterable[dict], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of ``key``, sorted by step; rows without a finite step or value are
    skipped, and a step logged twice (a resumed run) keeps its last value."""
    by_step: dict[float, float] = {}
    for row in rows:
        step, value = _finite(row.get("step")), _finite(row.get(key))
        if step is not None and value is not None:
            by_step[step] = value
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


# -- plots --------------------------------------------------------------------------------------
def _png_base64(draw: Callable[[Any], None]) -> str:
    """Render ``draw(axes)`` on a fresh Agg figure; the PNG, base64-encoded (ASCII)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    draw(fig.add_subplot())
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _draw_lines(ax, rows: Sequence[dict], keys: Sequence[str], style: str = "-",
                first_colour: int = 0) -> int:
    """Plot each key that has data; returns how many lines were drawn."""
    drawn = 0
    for key in keys:
        xs, ys = _series(rows, key)
        if xs:
            marker = "o" if len(xs) <= 60 else None
            ax.plot(xs, ys, style, marker=marker, markersize=3,
                    label=key.replace("$", r"\$"),  # no mathtext from metric names
                    color=f"C{(first_colour + drawn) % 10}")
            drawn += 1
    return drawn


def _mark_alerts(ax, alerts: Sequence[dict]) -> None:
    """A vertical line at every alert's step, coloured by action (one legend entry each)."""
    labelled = set()
    for alert in alerts:
        step = _finite(alert.get("step"))
        if step is None:
            continue
        action = str(alert.get("action", "?"))
        ax.axvline(step, color=ACTION_COLOURS.get(action, OTHER_ACTION_COLOUR), linestyle=":",
                   linewidth=1.5, label=None if action in labelled else f"alert: {action}")
        labelled.add(action)


def _finish_axes(ax, title: str, ylabel: str, percent: bool, extra_handles=()) -> None:
    """Title, labels, integer step ticks, percent axis (from 0) and one legend outside the
    axes that also lists the lines of ``extra_handles`` (twin axes)."""
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    ax.set_title(title)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if percent:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    for axis in extra_handles:
        more_handles, more_labels = axis.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.08, 1.0))


def _metric_plot(spec: PlotSpec, rows: Sequence[dict], alerts: Sequence[dict]) -> str | None:
    """The PNG (base64) of one training-curve plot; None when none of its keys was logged."""
    if not any(_series(rows, key)[0] for key in spec.keys + spec.right_keys):
        return None

    def draw(ax) -> None:
        drawn = _draw_lines(ax, rows, spec.keys)
        twins = []
        if any(_series(rows, key)[0] for key in spec.right_keys):
            right = ax.twinx()
            _draw_lines(right, rows, spec.right_keys, style="--", first_colour=drawn)
            right.set_ylabel(spec.right_label)
            if spec.right_percent:
                from matplotlib.ticker import PercentFormatter

                right.yaxis.set_major_formatter(PercentFormatter(1.0))
                right.set_ylim(bottom=0)
            twins.append(right)
        _mark_alerts(ax, alerts)
        _finish_axes(ax, spec.title, spec.ylabel, spec.percent, twins)

    return _png_base64(draw)


def _reward_spec(rows: Sequence[dict]) -> PlotSpec:
    """Overall mean reward plus one line per ``reward_mean/<category>`` key."""
    categories = sorted({k for row in rows for k in row if k.startswith("reward_mean/")})
    return PlotSpec("reward", "Reward per step (mean over completions)", "reward",
                    ("reward_mean", *categories))


def _validation_plot(rows: Sequence[dict], alerts: Sequence[dict]) -> str | None:
    """Greedy validation pass@1 against the GRPO step; the base model (no SFT) as a marker."""
    trained = [r for r in rows if r.get("label") != "base"]
    base = [r for r in rows if r.get("label") == "base"]
    if not _series(trained, "pass_at_1")[0] and not _series(base, "pass_at_1")[0]:
        return None

    def draw(ax) -> None:
        xs, ys = _series(trained, "pass_at_1")
        if xs:
            ax.plot(xs, ys, "-o", markersize=4, color="C0", label="pass@1 (greedy)")
        xs, ys = _series(base, "pass_at_1")
        if xs:
            ax.plot(xs, ys, "s", markersize=6, color="C7", label="base model (no SFT)")
        _mark_alerts(ax, alerts)
        _finish_axes(ax, "Validation pass@1", "pass@1", True)

    return _png_base64(draw)


# -- HTML pieces --------------------------------------------------------------------------------
class _Html(str):
    """Markup built here, inserted into a table cell as is (everything else is escaped)."""


def _esc(value: Any) -> str:
    return value if isinstance(value, _Html) else html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], css: str = "") -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}">\n<h2>{_esc(title)}</h2>\n{body}\n</section>'


def _missing(what: str) -> str:
    return f'<p class="missing">{_esc(what)}: {NOT_RECORDED}.</p>'


def _figure(title: str, png: str | None, missing: str) -> str:
    if png is None:
        return _missing(f"{title} ({missing})")
    return f'<figure><img alt="{_esc(title)}" src="data:image/png;base64,{png}"></figure>'


def _run_name(data: RunData) -> str:
    return str((data.config or {}).get("name") or data.run_dir.name)


def _config_value(config: dict, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "-" if value is None else value


# -- sections -----------------------------------------------------------------------------------
def _header(data: RunData) -> str:
    steps = _series(data.metrics or [], "step")[0] if data.metrics else []
    facts = [f"run directory: {data.run_dir}",
             f"generated: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
             f"GRPO steps logged: {len(steps)}" + (f" (last {steps[-1]:g})" if steps else "")]
    wall = _finite((data.results or {}).get("wall_seconds"))
    facts.append(f"wall time: {wall / 60:.1f} min" if wall is not None else
                 "wall time: not recorded (run unfinished?)")
    items = "".join(f"<li>{_esc(f)}</li>" for f in facts)
    notes = "".join(f"<li>{_esc(n)}</li>" for n in data.notes)
    contents = " | ".join(f'<a href="#{a}">{t}</a>' for a, t in (
        ("settings", "settings"), ("results", "results"), ("curves", "training curves"),
        ("validation", "validation"), ("alerts", "alerts"), ("samples", "samples")))
    return (f"<h1>Training report: {_esc(_run_name(data))}</h1>\n<ul class=\"facts\">{items}"
            f"</ul>\n" + (f'<ul class="notes">{notes}</ul>\n' if notes else "")
            + f'<nav>{contents}</nav>')


def _settings_section(data: RunData) -> str:
    if data.config is None:
        return _section("settings", "Settings", _missing("config.yaml"))
    rows = [[label, _config_value(data.config, key)] for key, label in SETTINGS]
    return _section("settings", "Settings", _table(["setting", "value"], rows, "settings"))


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
    body = [[label, _num(r.get("step"), 0), _pct(r.get("pass_at_1")),
             _num(r.get("mean_reward")), _pct(r.get("format_rate")),
             _pct(r.get("truncation_rate")), _num(r.get("mean_length"), 1),
             _num(r.get("n"), 0)]
            for key, label in RESULT_ROWS if (r := rows.get(key))]
    return _table(header, body, "results")


def _headline(rows: dict[str, dict], results: dict) -> str:
    before, after = rows.get("baseline"), rows.get("trained")
    if not before or not after:
        return ""
    gain = results.get("gain_pass_at_1")
    if _finite(gain) is None and _finite(after.get("pass_at_1")) is not None \
            and _finite(before.get("pass_at_1")) is not None:
        gain = after["pass_at_1"] - before["pass_at_1"]
    return (f'<p class="headline">pass@1 (greedy): {_pct(before.get("pass_at_1"))} &rarr; '
            f'{_pct(after.get("pass_at_1"))} ({_esc(_points(gain))})</p>')


def _pass_at_k_table(runs: dict) -> str:
    """Sampled pass@k / maj@k per model, plus a gain row (points) when both are present."""
    runs = {k: v for k, v in runs.items() if isinstance(v, dict)}
    ks = sorted({int(k) for r in runs.values() for k in (r.get("pass@k") or {})
                 if str(k).isdigit()})
    if not ks:
        return _missing("sampled pass@k")
    columns = [("pass@k", k) for k in ks] + [("maj@k", k) for k in ks if k > 1]
    header = ["model"] + [f"{m[:-2]}@{k}" for m, k in columns]

    def value(run: dict, metric: str, k: int) -> Any:
        return (run.get(metric) or {}).get(str(k))

    names = {"baseline": "baseline (entered GRPO)", "trained": "trained (GRPO)"}
    body = [[names.get(label, label)] + [_pct(value(run, m, k)) for m, k in columns]
            for label, run in runs.items()]
    if "baseline" in runs and "trained" in runs:
        gains = []
        for m, k in columns:
            a, b = _finite(value(runs["trained"], m, k)), _finite(value(runs["baseline"], m, k))
            gains.append("-" if a is None or b is None else f"{100 * (a - b):+.1f}")
        body.append(["gain (points)"] + gains)
    first = next(iter(runs.values()))
    caption = (f"sampled validation: n = {first.get('n', '?')} samples per problem, "
               f"temperature {first.get('temperature', '?')}, "
               f"{first.get('problems', '?')} problems")
    return f'<p class="caption">{_esc(caption)}</p>' + _table(header, body, "results")


def _results_section(data: RunData) -> str:
    rows, source = _result_rows(data)
    if not rows:
        return _section("results", "Baseline vs trained", _missing("validation results"))
    parts = [_headline(rows, data.results or {}),
             f'<p class="caption">greedy validation, from {_esc(source)}</p>',
             _validation_table(rows), "<h3>Sampled pass@k / maj@k</h3>"]
    runs = (data.results or {}).get("pass_at_k")
    parts.append(_pass_at_k_table(runs) if isinstance(runs, dict) and runs
                 else _missing("sampled pass@k"))
    return _section("results", "Baseline vs trained", "\n".join(p for p in parts if p))


def _curves_section(data: RunData) -> str:
    if data.metrics is None:
        return _section("curves", "Training curves", _missing("metrics.jsonl"))
    alerts = data.alerts or []
    specs = (_reward_spec(data.metrics),) + METRIC_PLOTS
    figures = [_figure(spec.title, _metric_plot(spec, data.metrics, alerts),
                       "no " + " / ".join(spec.keys + spec.right_keys) + " in metrics.jsonl")
               for spec in specs]
    legend = ("<p class=\"caption\">Dotted vertical lines mark alerts: "
              + ", ".join(f'<span style="color:{c}">{a}</span>'
                          for a, c in ACTION_COLOURS.items()) + ".</p>")
    return _section("curves", "Training curves", legend + "\n" + "\n".join(figures))


def _validation_section(data: RunData) -> str:
    if data.validation is None:
        return _section("validation", "Validation over training", _missing("validation.jsonl"))
    png = _validation_plot(data.validation, data.alerts or [])
    return _section("validation", "Validation over training",
                    _figure("Validation pass@1", png, "no pass_at_1 in validation.jsonl"))


def _alert_row(alert: dict) -> list[Any]:
    action = str(alert.get("action", "?"))
    colour = ACTION_COLOURS.get(action, OTHER_ACTION_COLOUR)
    message = _esc(alert.get("message", ""))
    examples = alert.get("examples") or []
    if isinstance(examples, list) and examples:
        shown = "\n---\n".join(str(e) for e in examples[:5])
        message += (f"<details><summary>{len(examples)} example(s)</summary>"
                    f"<pre>{_esc(shown)}</pre></details>")
    return [_num(alert.get("step"), 0), alert.get("check", "?"),
            _Html(f'<span class="action" style="background:{colour}">{_esc(action)}</span>'),
            _Html(message), _num(alert.get("value"), 4), _num(alert.get("threshold"), 4)]


def _alerts_section(data: RunData) -> str:
    if data.alerts is None:
        return _section("alerts", "Alerts", _missing("alerts.jsonl"))
    if not data.alerts:
        return _section("alerts", "Alerts", "<p>No alerts were raised.</p>")
    alerts = sorted(data.alerts, key=lambda a: _finite(a.get("step")) or 0.0)
    counts: dict[str, int] = {}
    for alert in alerts:
        counts[str(alert.get("action", "?"))] = counts.get(str(alert.get("action", "?")), 0) + 1
    summary = ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
    table = _table(["step", "check", "action", "message", "value", "threshold"],
                   [_alert_row(a) for a in alerts], "alerts")
    return _section("alerts", "Alerts", f"<p>{_esc(summary)}</p>\n{table}")


def _sample_steps(samples: Sequence[dict]) -> list[float]:
    """The first, middle and last logged step (distinct)."""
    steps = sorted({s for row in samples if (s := _finite(row.get("step"))) is not None})
    if not steps:
        return []
    return sorted({steps[0], steps[len(steps) // 2], steps[-1]})


def _sample_html(row: dict) -> str:
    components = row.get("components")
    parts = (", ".join(f"{k} {_num(v)}" for k, v in components.items())
             if isinstance(components, dict) else "-")
    facts = [(key, row[key]) for key in ("id", "reference") if row.get(key) is not None]
    facts += [("reward", _num(row.get("reward"))), ("components", parts),
              ("status", row.get("status", "-")), ("extracted", row.get("extracted"))]
    if row.get("category") is not None:
        facts.append(("category", row["category"]))
    meta = " | ".join(f"<b>{k}</b> {_esc('-' if v is None else v)}" for k, v in facts)
    return (f'<div class="sample"><p class="meta">{meta}</p>'
            f"<pre>{_esc(row.get('completion') or '')}</pre></div>")


def _samples_section(data: RunData) -> str:
    title = "Sample completions"
    if data.samples is None:
        return _section("samples", title, _missing("samples.jsonl"))
    parts = []
    for step in _sample_steps(data.samples):
        rows = [r for r in data.samples if _finite(r.get("step")) == step][:SAMPLES_PER_STEP]
        parts.append(f"<h3>step {step:g}</h3>\n" + "\n".join(_sample_html(r) for r in rows))
    body = "\n".join(parts) if parts else "<p>samples.jsonl holds no samples with a step.</p>"
    return _section("samples", title, body)


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; background: #fff; line-height: 1.4; }
h1 { border-bottom: 2px solid #345; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
nav a { color: #2a5db0; }
table { border-collapse: collapse; margin: .6em 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #eef2f7; }
td:first-child, th:first-child { text-align: left; }
table.alerts td, table.alerts th, table.settings td, table.settings th { text-align: left; }
.headline { font-size: 20px; font-weight: bold; }
.caption { color: #555; font-size: 13px; }
.missing { color: #8a6d3b; background: #fcf8e3; padding: 4px 8px; border-radius: 3px; }
.notes { color: #8a6d3b; }
.action { color: #fff; padding: 1px 6px; border-radius: 3px; font-weight: bold; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.sample { border-left: 3px solid #9ab; margin: .8em 0; padding-left: .8em; }
.sample .meta { margin: 0; font-size: 13px; }
pre { background: #f6f8fa; padding: 6px; white-space: pre-wrap; word-break: break-word;
      margin: .3em 0; font-size: 13px; }
"""

__all__ = ["METRIC_PLOTS", "PlotSpec", "RunData", "load_run", "render_html",
           "write_run_report"]

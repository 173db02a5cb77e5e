"""Writing an evaluation: ``results.json``, ``results.md`` (markdown tables), and PNG plots
(accuracy vs k, accuracy vs generated tokens; matplotlib). Every file is written atomically.

``results.json`` holds the first model's summary (:func:`rlvr.eval.summary.summarize`) at the
top level - so ``pass@k``, ``maj@k`` and ``by_category`` are always there - plus ``models``
(every model's summary, by name, in the order given), ``settings`` and ``wall_seconds``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from rich.table import Table

from rlvr.io import OutputError, atomic_write, json_text, write_json
from rlvr.rewards.summary import is_measured
from rlvr.run_manifest import remove_written

PLOTS = ("accuracy_vs_k.png", "accuracy_vs_tokens.png")
#: Every file :func:`write_report` may write into an eval directory.
REPORT_FILES = ("results.json", "results.md", "completions.jsonl", *PLOTS)


def combine(summaries: dict[str, dict], settings: dict, wall_seconds: float) -> dict:
    """The results.json object: the first model's summary at the top level, all of them
    under ``models``.

    Raises:
        ValueError: no summaries.
    """
    if not summaries:
        raise ValueError("no model results to combine")
    first = next(iter(summaries))
    return {**summaries[first], "model": first, "models": summaries, "settings": settings,
            "wall_seconds": wall_seconds}


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _curve_rows(name: str, summary: dict, ks: Sequence[int]) -> list[list[str]]:
    rows = [[name, "pass@k"] + [_pct(summary["pass@k"].get(str(k))) for k in ks],
            [name, "maj@k"] + [_pct(summary["maj@k"].get(str(k))) for k in ks]]
    aggregators = sorted(set(summary["aggregators"].values()))
    if aggregators != ["majority"] and aggregators != ["any_passes"]:
        rows.append([name, f"aggregate@k ({', '.join(aggregators)})"]
                    + [_pct(summary["aggregate@k"].get(str(k))) for k in ks])
    for scorer, curve in summary.get("best_of@k", {}).items():
        label = "best-of-k oracle" if scorer == "oracle" else f"best-of-k {scorer}"
        rows.append([name, label] + [_pct(curve.get(str(k))) for k in ks])
    cost = summary["cost"]
    rows.append([name, "tokens / problem"]
                + [_num(cost.get(str(k), {}).get("tokens_per_problem"), 0) for k in ks])
    rows.append([name, "seconds / problem"]
                + [_num(cost.get(str(k), {}).get("seconds_per_problem"), 2) for k in ks])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def saturation_lines(name: str, summary: dict) -> list[str]:
    """One sentence per curve saying whether and where it saturates."""
    out = []
    for metric in ("pass@k", "maj@k"):
        sat = summary["saturation"][metric]
        k = sat["saturated_at"]
        if k is None:
            gains = ", ".join(f"{key}: {100 * g:+.1f}" for key, g in sat["gains"].items())
            out.append(f"- {name} {metric}: not saturated (gain in points {gains or 'n/a'}; "
                       f"threshold {100 * sat['threshold']:.1f})")
        else:
            gain = sat["gains"][f"{k}->{2 * k}"]
            out.append(f"- {name} {metric}: saturates at k={k} (k={k} -> {2 * k} adds "
                       f"{100 * gain:+.1f} points < {100 * sat['threshold']:.1f})")
    return out


def verifier_error_lines(models: dict[str, dict]) -> list[str]:
    """One line per model whose samples include verifier errors or timeouts (counted wrong
    in every curve; a model with at least half of them is marked NOT MEASURED,
    :func:`rlvr.rewards.summary.is_measured`), and one per model scored by a verifiers
    rubric: its share at the environment's pass_threshold (``rubric_pass@1``)."""
    lines = []
    for name, s in models.items():
        errors, n = s.get("verifier_errors", 0), s.get("samples", 0)
        if not errors:
            continue
        if is_measured(errors, n):
            lines.append(f"{name}: {errors} of {n} samples are verifier errors or timeouts, "
                         f"counted wrong in every curve.")
        else:
            lines.append(f"**{name}: NOT MEASURED: {errors} of {n} samples are verifier errors "
                         f"or timeouts** (its curves count them wrong; see status_counts).")
    for name, s in models.items():
        if s.get("rubric_pass@1") is not None:
            lines.append(f"{name}: pass@1 counts a verifiers rubric's full score only; "
                         f"{_pct(s['rubric_pass@1'])} of samples reach the environment's own "
                         f"pass_threshold (rubric_pass@1).")
    return lines


def markdown(results: dict) -> str:
    """The markdown report: the curves side by side, saturation, budget fallbacks, the
    sycophancy probe, and the per-category table."""
    settings, models = results["settings"], results["models"]
    ks = results["ks"]
    title = (f"# rlvr eval: {settings.get('tasks', 'completions')} - {results['problems']} "
             f"problems, n = {results['samples_per_problem']}")
    if settings.get("temperature") is not None:
        title += f", temperature {settings['temperature']}"
    parts = [title, "",
             _table(["model", "metric"] + [f"k={k}" for k in ks],
                    [row for name, s in models.items() for row in _curve_rows(name, s, ks)]),
             "", "best-of-k oracle picks by the verifier reward (it sees the reference): an "
             "upper bound, not a deployable aggregator." if any(
                 "oracle" in s.get("best_of@k", {}) for s in models.values()) else "",
             "", "## Saturation", ""]
    errors = verifier_error_lines(models)
    if errors:
        parts[2:2] = errors + [""]
    for name, s in models.items():
        parts += saturation_lines(name, s)
    for name, s in models.items():
        if s.get("timed_out_problems"):
            parts += ["", f"Online budget ({settings.get('timeout_s')} s per problem): {name}: "
                      f"{s['timed_out_problems']} problems fell back to the samples finished "
                      f"in time ({s['late_samples']} late samples dropped); problems with "
                      f"fewer than k samples: " + ", ".join(
                          f"k={k}: {c}" for k, c in s["fallback@k"].items())]
    probes = {name: s["sycophancy"] for name, s in models.items() if s.get("sycophancy")}
    if probes:
        parts += ["", f"## Sycophancy probe ({next(iter(probes.values()))['template']!r})", "",
                  _table(["model", "accuracy", "accuracy with wrong hint", "follows hint",
                          "hint answer without hint"],
                         [[name, _pct(p["accuracy_plain"]), _pct(p["accuracy_hinted"]),
                           _pct(p["follows_hint_rate"]), _pct(p["hint_answer_rate_plain"])]
                          for name, p in probes.items()])]
    top = max(ks)
    # at k = 1 pass@1 is pass@top: one column, not two with the same header
    extra = [] if top == 1 else [top]
    category_rows = [[name, label, str(c["problems"]), _pct(c["pass@k"]["1"]),
                      *[_pct(c["pass@k"][str(k)]) for k in extra], _pct(c["maj@k"][str(top)])]
                     for name, s in models.items() for label, c in s["by_category"].items()
                     if "1" in c["pass@k"]]
    parts += ["", "## By category", "",
              _table(["model", "category", "problems", "pass@1",
                      *[f"pass@{k}" for k in extra], f"maj@{top}"], category_rows)]
    return "\n".join(parts) + "\n"


def _save_png(fig, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    with atomic_write(path, "wb") as f:
        f.write(buffer.getvalue())


def _name_parts(name: str) -> list[str]:
    """A model name's path components, ``checkpoints/step-000040`` collapsed to
    ``step-40`` (a name that is no path is one part)."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("/", ".")]
    out: list[str] = []
    for part in parts:
        step = re.fullmatch(r"step-0*(\d+)", part)
        if step and out and out[-1] == "checkpoints":
            out[-1] = f"step-{step.group(1)}"
        else:
            out.append(part)
    return out or [name]


def short_names(names: Sequence[str]) -> dict[str, str]:
    """Legend names for models named by checkpoint paths: the run directory's name and the
    checkpoint (``runs/x/checkpoints/step-000040`` -> ``x/step-40``, ``runs/x/sft_model`` ->
    ``x/sft_model``), a bare name (``tiny-random``) as it is; more of the path where two would
    read the same, the full name where even that does not tell them apart."""
    parts = {name: _name_parts(name) for name in names}
    depth = dict.fromkeys(names, 2)
    while True:
        short = {name: "/".join(parts[name][-depth[name]:]) for name in names}
        clash = [n for n in names if list(short.values()).count(short[n]) > 1]
        grow = [n for n in clash if depth[n] < len(parts[n])]
        if not grow:
            break
        for name in grow:
            depth[name] += 1
    return {name: short[name] if list(short.values()).count(short[name]) == 1 else name
            for name in names}


def figures(results: dict) -> dict[str, object]:
    """The plots as matplotlib figures, by file name: accuracy_vs_k.png (pass@k solid, maj@k
    dashed, one colour per model, log2 k axis) and accuracy_vs_tokens.png (the same against
    generated tokens per problem, when known), each curve with its 95% confidence interval
    over problems (``ci95``) as a shaded band (gid ``ci95 <model> <metric>``). Legends name
    the models by :func:`short_names`. The caller closes the figures."""
    # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
    import matplotlib

    matplotlib.use("Agg")
    # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
    import matplotlib.pyplot as plt

    out = {}
    models = results["models"]
    legend = short_names(list(models))
    labels = ("samples per problem (k)", "generated tokens per problem")
    for filename, x_label in zip(PLOTS, labels):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        drawn = False
        for i, (name, s) in enumerate(models.items()):
            ks = s["ks"]
            if filename == PLOTS[0]:
                xs = ks
            else:
                xs = [s["cost"][str(k)]["tokens_per_problem"] for k in ks]
                if any(x is None or x <= 0 for x in xs):  # unknown cost, or nothing finished
                    continue
            colour = f"C{i}"
            for metric, style, alpha in (("pass@k", "-o", 0.18), ("maj@k", "--s", 0.09)):
                ax.plot(xs, [s[metric][str(k)] for k in ks], style, color=colour,
                        label=f"{legend[name]} {metric}")
                ci = (s.get("ci95") or {}).get(metric) or {}
                if all(str(k) in ci for k in ks):
                    band = ax.fill_between(xs, [ci[str(k)][0] for k in ks],
                                           [ci[str(k)][1] for k in ks], color=colour,
                                           alpha=alpha, linewidth=0)
                    band.set_gid(f"ci95 {legend[name]} {metric}")
            drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xscale("log", base=2)
        ax.set_xlabel(x_label)
        ax.set_ylabel("accuracy (shaded: 95% CI over problems)")
        ax.set_ylim(0, 1)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{results['settings'].get('tasks', 'completions')}: "
                     f"{results['problems']} problems")
        out[filename] = fig
    return out


def plot(results: dict, out_dir: Path) -> list[Path]:
    """Write :func:`figures` as PNG files into ``out_dir``. Returns the paths written."""
    # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
    import matplotlib.pyplot as plt

    written = []
    for filename, fig in figures(results).items():
        _save_png(fig, out_dir / filename)
        plt.close(fig)
        written.append(out_dir / filename)
    return written


def write_report(results: dict, out_dir: Path, completion_rows: Sequence[dict] = ()) -> list[Path]:
    """Write ``results.json``, ``results.md``, ``completions.jsonl`` (when rows are given) and
    the plots into ``out_dir``, each atomically. Returns the paths written.

    Raises:
        rlvr.io.OutputError: a file cannot be written (disk full); the files
            written before keep their content.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out_dir, exc) from exc
    with atomic_write(out_dir / "results.json") as f:
        write_json(f, results)
    with atomic_write(out_dir / "results.md") as f:
        f.write(markdown(results))
    written = [out_dir / "results.json", out_dir / "results.md"]
    if completion_rows:
        with atomic_write(out_dir / "completions.jsonl") as f:
            for row in completion_rows:
                f.write(json_text(row) + "\n")
        written.append(out_dir / "completions.jsonl")
    written += plot(results, out_dir)
    # An earlier eval into the same directory may have written files this one does not (a
    # plot a --completions eval cannot draw, completions of a model run): left there they
    # would be read as this eval's. Only this report's own kinds of files are removed, only
    # those the directory's manifest says rlvr wrote (a user's file of the same name is
    # kept), and only once every new one is written.
    for name in REPORT_FILES:
        stale = out_dir / name
        if stale not in written and stale.is_file():
            try:
                remove_written(stale)
            except OSError as exc:
                raise OutputError(stale, exc) from exc
    return written


def pass_at_k_table(results: dict):
    """A rich table of the trainer's sampled pass@k / maj@k, baseline vs trained (None when the
    run has none: ``eval.pass_at_k_samples: 0``)."""
    runs = results.get("pass_at_k") or {}
    if not runs:
        return None
    first = next(iter(runs.values()))
    ks = sorted(int(k) for k in first["pass@k"])
    table = Table(title=f"sampled validation ({first['problems']} problems, n = {first['n']}, "
                        f"temperature {first['temperature']})")
    table.add_column("model")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    for k in ks:
        if k > 1:
            table.add_column(f"maj@{k}", justify="right")
    names = {"baseline": "baseline (entered GRPO)", "trained": "trained (GRPO)"}
    for label, row in runs.items():
        table.add_row(names.get(label, label), *[_pct(row["pass@k"][str(k)]) for k in ks],
                      *[_pct(row["maj@k"][str(k)]) for k in ks if k > 1])
    return table


__all__ = ["PLOTS", "REPORT_FILES", "combine", "figures", "markdown", "pass_at_k_table", "plot",
           "short_names", "write_report"]

"""A sweep's comparison: one summary per variant (:func:`summarize_variant`), the table
(rich, and ``sweep.md``), the curves (``sweep.png``) and ``sweep.json``
(:func:`write_sweep_outputs`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from rlvr.io import atomic_write, write_json
from rlvr.reports.numbers import finite, num, pct, points, series
from rlvr.reports.run_files import read_jsonl_rows
from rlvr.train.sweep.spec import variant_name

SMOOTH_STEPS = 5  # trailing moving average of the per-step curves in sweep.png
SWEEP_JSON, SWEEP_PNG, SWEEP_MD = "sweep.json", "sweep.png", "sweep.md"
_LINE_STYLES = ("-", "--", ":", "-.")


def _lookup(data: Any, dotted: str) -> Any:
    """The value at a dotted key of a config dump (numeric parts index lists), or None."""
    for part in dotted.split("."):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def summarize_variant(variant: dict[str, str], config, run_dir: Path, results: dict,
                      reused: bool = False) -> dict:
    """One variant's summary, from its results and its run directory's ``metrics.jsonl``.

    Returns a dict with ``name``, ``run_dir``, ``overrides`` (the variant's ``--set``
    values as typed), ``params`` (each swept key's validated value), ``kl_coef``,
    ``steps`` (last GRPO step logged), ``baseline_pass_at_1``, ``final_pass_at_1``,
    ``gain_pass_at_1``, ``final_val_reward`` (validation mean reward), ``final_reward`` /
    ``mean_reward`` (per-step ``reward_mean``: last / mean), ``final_kl`` / ``mean_kl``
    (per-step ``kl``), ``final_length`` (last ``length_mean``), ``wall_seconds`` (from
    results.json: a resumed run counts its last invocation only),
    ``stopped`` (the alert that stopped the run, or None) and ``reused`` (results read back
    from an earlier invocation). Numbers missing from the files are None.
    """
    dump = config.model_dump(mode="json")
    metrics = read_jsonl_rows(run_dir / "metrics.jsonl", []) or []

    def last_and_mean(key: str) -> tuple[float | None, float | None]:
        _, values = series(metrics, key)
        return (values[-1], sum(values) / len(values)) if values else (None, None)

    final_reward, mean_reward = last_and_mean("reward_mean")
    final_kl, mean_kl = last_and_mean("kl")
    steps = series(metrics, "step")[0]
    trained, baseline = results.get("trained") or {}, results.get("baseline") or {}
    return {
        "name": variant_name(variant), "run_dir": str(run_dir), "overrides": dict(variant),
        "params": {k: _lookup(dump, k) for k in variant},
        "kl_coef": dump["algo"]["kl_coef"],
        "steps": int(steps[-1]) if steps else 0,
        "baseline_pass_at_1": finite(baseline.get("pass_at_1")),
        "final_pass_at_1": finite(trained.get("pass_at_1")),
        "gain_pass_at_1": finite(results.get("gain_pass_at_1")),
        "final_val_reward": finite(trained.get("mean_reward")),
        "final_reward": final_reward, "mean_reward": mean_reward,
        "final_kl": final_kl, "mean_kl": mean_kl,
        "final_length": last_and_mean("length_mean")[0],
        "wall_seconds": finite(results.get("wall_seconds")),
        "stopped": results.get("stopped"), "reused": reused,
    }


def sort_summaries(summaries: Sequence[dict]) -> list[dict]:
    """Best final pass@1 first (ties: larger gain first, then run order); missing last."""
    def key(item: tuple[int, dict]) -> tuple:
        i, s = item
        p, g = s.get("final_pass_at_1"), s.get("gain_pass_at_1")
        return (p is None, -(p or 0.0), -(g or 0.0), i)

    return [s for _, s in sorted(enumerate(summaries), key=key)]


def _stopped_text(stopped: Any) -> str:
    if not isinstance(stopped, dict):
        return "-"
    return f"{stopped.get('check', '?')} at step {stopped.get('step', '?')}"


_COLUMNS = ("variant", "pass@1", "baseline", "gain", "val reward", "final reward",
            "final KL", "mean KL", "length", "steps", "wall", "stopped")


def _row(s: dict) -> list[str]:
    wall = finite(s.get("wall_seconds"))
    return [s["name"], pct(s.get("final_pass_at_1")), pct(s.get("baseline_pass_at_1")),
            points(s.get("gain_pass_at_1")), num(s.get("final_val_reward")),
            num(s.get("final_reward")), num(s.get("final_kl"), 4), num(s.get("mean_kl"), 4),
            num(s.get("final_length"), 1), str(s.get("steps", "-")),
            "-" if wall is None else f"{wall:.0f} s", _stopped_text(s.get("stopped"))]


def summary_table(summaries: Sequence[dict], title: str = "sweep (best final pass@1 first)"):
    """The summaries as a rich Table, sorted as :func:`sort_summaries`."""
    table = Table(title=title)
    for col in _COLUMNS:
        table.add_column(col, justify="left" if col in ("variant", "stopped") else "right")
    for s in sort_summaries(summaries):
        table.add_row(*_row(s))
    return table


def sweep_markdown(summaries: Sequence[dict], meta: dict) -> str:
    """``sweep.md``: the sweep's settings and a table of the summaries, best final pass@1
    first (pass@1: greedy validation at the end; baseline: the model that entered GRPO;
    KL and reward: the per-step training values), then the curves image."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    fixed = ", ".join(f"`{f}`" for f in meta.get("fixed") or []) or "none"
    axes = "; ".join(f"`{k}` = {', '.join(v)}" for k, v in (meta.get("axes") or {}).items())
    lines = [f"# Sweep: {meta.get('config') or 'default config'}", "",
             f"- swept: {axes or 'nothing (one variant)'}",
             f"- fixed overrides: {fixed}",
             f"- GRPO steps: {meta.get('steps') or 'as configured'}",
             f"- variants: {len(summaries)} of {meta.get('n_variants', len(summaries))}"
             + ("" if meta.get("complete", True) else " (sweep unfinished)"), "",
             "pass@1 and baseline: greedy validation after GRPO and before it; gain in points. "
             "Final/mean reward and KL: the per-step training values (last step / mean over "
             "steps).", "",
             "| " + " | ".join(_COLUMNS) + " |",
             "|" + "|".join(":---" if c in ("variant", "stopped") else "---:"
                            for c in _COLUMNS) + "|"]
    for s in sort_summaries(summaries):
        lines.append("| " + " | ".join(cell(c) for c in _row(s)) + " |")
    lines += ["", f"![reward, KL, validation and length curves]({SWEEP_PNG})", ""]
    return "\n".join(lines)


# -- plot --------------------------------------------------------------------------------------
def moving_average(values: Sequence[float], window: int = SMOOTH_STEPS) -> list[float]:
    """Trailing moving average (the first points average what is there so far)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_sweep(summaries: Sequence[dict], path: str | Path) -> Path:
    """Write ``path`` (PNG, matplotlib Agg): one row of four panels, reward_mean, KL and
    completion length per GRPO step (a ``SMOOTH_STEPS``-step trailing moving average drawn
    over the faint raw values) and greedy validation pass@1, one line per variant (read from
    each summary's ``run_dir``), with a shared legend; a panel names the variants that
    logged none of its metric (``kl`` when ``algo.kl_coef`` is 0). Returns ``path``.

    Raises:
        OSError: ``path`` cannot be written."""
    # deferred: matplotlib costs ~1 s to import; only the plot at the sweep's end needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    smooth = f" ({SMOOTH_STEPS}-step moving avg)"
    panels = (("reward_mean", "Training reward", "reward_mean" + smooth),
              ("kl", "KL to the reference", "KL" + smooth),
              ("pass_at_1", "Validation pass@1 (greedy)", "pass@1"),
              ("length_mean", "Completion length", "tokens" + smooth))
    fig = Figure(figsize=(18.0, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels))
    handles, labels = [], []
    missing: dict[str, list[str]] = {key: [] for key, _, _ in panels}
    for i, s in enumerate(summaries):
        run_dir = Path(s["run_dir"])
        metrics = read_jsonl_rows(run_dir / "metrics.jsonl", []) or []
        validation = [r for r in read_jsonl_rows(run_dir / "validation.jsonl", []) or []
                      if r.get("label") != "base"]
        colour, style = f"C{i % 10}", _LINE_STYLES[(i // 10) % len(_LINE_STYLES)]
        line = None
        for ax, (key, _, _) in zip(axes, panels):
            if key == "pass_at_1":
                xs, ys = series(validation, key)
                if xs:
                    line, = ax.plot(xs, ys, style, marker="o", markersize=4, color=colour)
                else:
                    missing[key].append(s["name"])
                continue
            xs, ys = series(metrics, key)
            if not xs:
                missing[key].append(s["name"])
                continue
            ax.plot(xs, ys, "-", color=colour, alpha=0.2, linewidth=0.8)
            line, = ax.plot(xs, moving_average(ys), style, color=colour, linewidth=1.6,
                            marker="o" if len(xs) <= 12 else None, markersize=3)
        if line is not None:
            handles.append(line)
            labels.append(s["name"].replace("$", r"\$"))
    for ax, (key, title, ylabel) in zip(axes, panels):
        ax.set_title(title)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        if missing[key]:  # e.g. no KL is logged by a run without a KL term
            ax.text(0.02, 0.98, "not logged: " + ", ".join(missing[key]).replace("$", r"\$"),
                    transform=ax.transAxes, fontsize=7, color="#555", va="top", wrap=True)
        if key == "pass_at_1":
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            ax.set_ylim(bottom=0)
    fig.tight_layout()
    if handles:  # below the panels; bbox_inches="tight" grows the image to hold it
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(handles), 4), fontsize=9, frameon=False)
    path = Path(path)
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", bbox_inches="tight")
    return path


def write_sweep_outputs(out_dir: str | Path, summaries: Sequence[dict], meta: dict) -> list[Path]:
    """Write ``sweep.json`` (``meta`` plus ``"summaries"``, run order), ``sweep.png``
    (:func:`plot_sweep`) and ``sweep.md`` (:func:`sweep_markdown`) into ``out_dir``, each
    atomically. Returns the three paths."""
    out_dir = Path(out_dir)
    data = {**meta, "summaries": list(summaries), "plot": SWEEP_PNG}
    with atomic_write(out_dir / SWEEP_JSON) as f:
        write_json(f, data, default=str, ensure_ascii=True)
    png = plot_sweep(summaries, out_dir / SWEEP_PNG)
    with atomic_write(out_dir / SWEEP_MD) as f:
        f.write(sweep_markdown(summaries, meta))
    return [out_dir / SWEEP_JSON, png, out_dir / SWEEP_MD]


__all__ = ["SWEEP_JSON", "SWEEP_MD", "SWEEP_PNG", "moving_average", "plot_sweep",
           "sort_summaries", "summarize_variant", "summary_table", "sweep_markdown",
           "write_sweep_outputs"]

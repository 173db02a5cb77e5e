"""``rlvr sweep``: run the same job under several settings, one after another, and compare
them side by side (R15).

A sweep is written as ordinary ``--set`` overrides where a value with a *top-level* comma is a
swept axis::

    rlvr sweep -c configs/arithmetic.yaml --set algo.kl_coef=0.001,0.003,0.01,0.03 --steps 100

Every variant is a normal run (``Run(config, OUT/<variant name>).train()``: config.yaml,
metrics.jsonl, validation.jsonl, checkpoints/, results.json ...). All variants share the seed,
data and every other setting, so only the swept values differ. When they are done the sweep
writes, in ``OUT``:

- ``sweep.json``: the settings of the sweep and one summary per variant (run order);
- ``sweep.png``: a row of panels (reward, KL, validation pass@1, completion length against the
  GRPO step), one line per variant;
- ``sweep.md``: a markdown table of the summaries, best final pass@1 first.

Variants whose ``results.json`` already exists are not run again, so re-running an
interrupted sweep's command finishes it (a variant cut off mid-run resumes from its latest
checkpoint).
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from rlvr.models.precision import resolve_precision
from rlvr.configio import ConfigError, load_config, parse_override
from rlvr.reports.numbers import finite as _finite, num as _num, pct as _pct
from rlvr.reports.numbers import points as _points, series as _series
from rlvr.reports.run_files import read_jsonl_rows as _read_jsonl
from rlvr.io import atomic_write, write_json

MAX_VARIANTS = 32
SMOOTH_STEPS = 5  # trailing moving average of the per-step curves in sweep.png
NAME_MAX = 120  # longer variant names are shortened and made unique with a hash
SWEEP_JSON, SWEEP_PNG, SWEEP_MD = "sweep.json", "sweep.png", "sweep.md"
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")
_LINE_STYLES = ("-", "--", ":", "-.")


class SweepError(ConfigError):
    """A sweep that cannot run as given: a malformed or conflicting axis, too many variants,
    a variant whose config does not validate, or an output directory holding other runs.
    The CLI exits 2 with the message."""


# -- parsing -----------------------------------------------------------------------------------
def split_top_level(value: str) -> list[str]:
    """``value`` split at the commas outside brackets, braces, parentheses and quotes:
    ``"0.1,0.2"`` -> ``["0.1", "0.2"]``; ``"[a,b]"``, ``"{x: 1, y: 2}"`` and ``"'a,b'"`` stay
    whole; ``"[a,b],[c]"`` -> ``["[a,b]", "[c]"]``. Parts are not stripped."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(value):
        ch = value[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1  # skip the escaped character
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
        i += 1
    parts.append(value[start:])
    return parts


def parse_sweep(overrides: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Split ``--set`` overrides into fixed ones and the sweep's variants.

    An override ``KEY=V1,V2,...`` whose value has a comma at the top level is a swept axis
    (each ``Vi`` stripped, parsed as YAML later, like any ``--set`` value). A comma inside a
    YAML flow list or mapping (``reward.plugins=[a,b]``, ``reward.weights={outcome: 1.0,
    format: 0.1}``) or inside quotes (``data.instruction="Think, then answer"``) does not
    sweep; ``KEY=[a,b],[c]`` sweeps over two lists. So a plain string value containing a comma
    must be quoted to be kept whole.

    Several axes give their cartesian product, in command-line order with the last axis
    varying fastest: ``a=1,2 b=x,y`` -> ``{a:1,b:x}, {a:1,b:y}, {a:2,b:x}, {a:2,b:y}``.
    Without any axis there is one variant, ``{}``.

    Args:
        overrides: the ``--set`` strings as given (``KEY=VALUE``).

    Returns:
        ``(fixed, variants)``: the overrides that are not axes (order kept), and one
        ``{key: value text}`` dict per variant, keys in axis order.

    Raises:
        SweepError: a malformed override (no ``=``), an empty or repeated value in an axis,
            a key swept twice or both swept and fixed, more than ``MAX_VARIANTS`` variants,
            or two variants whose directory names (:func:`variant_name`) coincide.
    """
    fixed: list[str] = []
    axes: dict[str, list[str]] = {}
    for text in overrides:
        try:
            path, _ = parse_override(text)
        except ConfigError as exc:
            raise SweepError(str(exc)) from None
        key = ".".join(path)
        raw = text.partition("=")[2]
        parts = [p.strip() for p in split_top_level(raw)]
        if len(parts) == 1:
            fixed.append(text)
            continue
        if any(not p for p in parts):
            raise SweepError(f"--set {text!r}: empty value in a swept list (a value with a "
                             f"comma is swept: {key}=A,B,...)")
        repeated = sorted({p for p in parts if parts.count(p) > 1})
        if repeated:
            raise SweepError(f"--set {text!r}: {', '.join(map(repr, repeated))} given more "
                             "than once")
        if key in axes:
            raise SweepError(f"--set {key}: swept twice; give all its values in one --set")
        axes[key] = parts
    fixed_keys = {".".join(parse_override(t)[0]) for t in fixed}
    both = [k for k in axes if k in fixed_keys]
    if both:
        raise SweepError(f"--set {both[0]}: both swept and fixed; give it once")
    count = math.prod(len(v) for v in axes.values())
    if count > MAX_VARIANTS:
        sizes = " x ".join(str(len(v)) for v in axes.values())
        raise SweepError(f"{sizes} = {count} variants; a sweep runs at most {MAX_VARIANTS} "
                         "(they run one after another): split it into smaller sweeps")
    variants = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    names: dict[str, dict] = {}
    for variant in variants:
        name = variant_name(variant)
        if name in names:
            raise SweepError(f"variants {names[name]} and {variant} would share the directory "
                             f"name {name!r}; make their values differ in letters or digits")
        names[name] = variant
    return fixed, variants


def variant_name(variant: dict[str, str]) -> str:
    """A filesystem-safe directory name for a variant: ``key=value`` per axis joined with
    ``,`` (``algo.kl_coef=0.001,grpo.learning_rate=1e-6``); characters other than letters,
    digits and ``. _ = , + -`` become ``_``; a name over ``NAME_MAX`` characters is cut and
    suffixed with a short hash so it stays unique. ``{}`` (no axis) -> ``"default"``."""
    if not variant:
        return "default"
    name = _UNSAFE.sub("_", ",".join(f"{k}={v}" for k, v in variant.items()))
    if len(name) > NAME_MAX:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
        name = f"{name[:NAME_MAX - 11]}-{digest}"
    return name


def variant_overrides(fixed: list[str], variant: dict[str, str], steps: int | None) -> list[str]:
    """The ``--set`` list of one variant: the fixed overrides, then the variant's values,
    then ``grpo.steps=<steps>`` when ``steps`` is given (so ``--steps`` wins)."""
    sets = list(fixed) + [f"{k}={v}" for k, v in variant.items()]
    if steps is not None:
        sets.append(f"grpo.steps={steps}")
    return sets


def build_configs(config_path: str | Path | None, fixed: list[str],
                  variants: list[dict[str, str]], steps: int | None,
                  out_dir: str | Path | None = None) -> list:
    """Validate every variant's config (all of them, before anything runs).

    Args:
        config_path: the run config YAML (``None``: RunConfig defaults).
        fixed, variants: from :func:`parse_sweep`.
        steps: ``grpo.steps`` for every variant, or ``None`` to keep the config's.
        out_dir: when given, each config's ``output_dir`` is set to
            ``out_dir/<variant name>``.

    Returns:
        One validated :class:`rlvr.train.config.RunConfig` per variant, in order.

    Raises:
        SweepError: ``grpo.steps`` is swept while ``steps`` is given, or some variants do
            not validate; the message names each failing variant (index and name) and the
            field, e.g. ``variant 3/4 (algo.kl_coef=-1): cfg.yaml: algo.kl_coef: ...``.
    """
    from rlvr.train.config import RunConfig

    if steps is not None and any("grpo.steps" in v for v in variants):
        raise SweepError("--steps: grpo.steps is swept; drop --steps or the grpo.steps axis")
    configs, errors = [], []
    for i, variant in enumerate(variants, 1):
        name = variant_name(variant)
        try:
            config = load_config(RunConfig, config_path, variant_overrides(fixed, variant, steps))
        except ConfigError as exc:
            errors.append((f"variant {i}/{len(variants)} ({name})", str(exc)))
            continue
        if out_dir is not None:
            config.output_dir = str(Path(out_dir) / name)
        configs.append(config)
    if errors:
        if len(errors) == len(variants) > 1 and len({m for _, m in errors}) == 1:
            raise SweepError(f"every variant: {errors[0][1]}")
        raise SweepError("\n".join(f"{where}: {message}" for where, message in errors))
    return configs


# -- running -----------------------------------------------------------------------------------
def run_sweep(config_path: str | Path | None, fixed: list[str], variants: list[dict[str, str]],
              steps: int | None, out_dir: str | Path,
              log: Callable[[str], None] | None = None) -> list[dict]:
    """Run every variant, one after another, into ``out_dir/<variant name>``, then write the
    sweep's comparison files.

    All configs are validated, and existing variant directories checked, before the first
    run starts. A variant whose ``results.json`` exists is skipped (its results are read
    back), so re-running an interrupted sweep finishes it; a variant directory with a
    checkpoint but no results.json resumes from that checkpoint; one cut off before its
    first checkpoint starts over (its partial logs are removed). A health check that stops
    one variant does not stop the sweep: the summary records the alert.

    Args:
        config_path: run config YAML (``None``: RunConfig defaults).
        fixed, variants: from :func:`parse_sweep`.
        steps: ``grpo.steps`` for every variant (``None`` keeps the config's).
        out_dir: the sweep directory (created).
        log: called with progress lines (default: printed to stderr).

    Returns:
        One summary dict per variant, in run order (see :func:`summarize_variant`).

    Files written:
        ``out_dir/<variant name>/`` (a normal run directory each), ``out_dir/sweep.json``
        (atomically), ``out_dir/sweep.png`` and ``out_dir/sweep.md``. When a run fails or
        is interrupted, these three are still written for the variants done so far
        (``"complete": false`` in sweep.json) before the error propagates.

    Raises:
        SweepError: a variant's config does not validate, or a variant directory holds a
            run with other settings (a different sweep, or changed fixed overrides / steps).
        rlvr.train.run.RunInputError: a variant's data or model cannot be loaded (raised
            with the variant's name prepended; earlier variants are kept).
    """
    from rlvr.train.run import RunInputError

    if log is None:
        from rich.console import Console

        log = Console(stderr=True).print
    out_dir = Path(out_dir)
    configs = build_configs(config_path, fixed, variants, steps, out_dir)
    for variant, config in zip(variants, configs):
        _check_existing(out_dir / variant_name(variant), config)
    meta = {"config": None if config_path is None else str(config_path), "fixed": list(fixed),
            "axes": _axes(variants), "steps": steps, "n_variants": len(variants)}
    summaries: list[dict] = []
    complete = False
    try:
        for i, (variant, config) in enumerate(zip(variants, configs), 1):
            name = variant_name(variant)
            run_dir = out_dir / name
            started = time.perf_counter()
            try:
                results, reused = _run_variant(config, run_dir, f"{i}/{len(variants)} {name}",
                                               log)
            except RunInputError as exc:
                raise RunInputError(f"variant {i}/{len(variants)} ({name}): {exc}") from exc
            summaries.append(summarize_variant(variant, config, run_dir, results, reused))
            if not reused:
                log(f"sweep: variant {i}/{len(variants)} {name} done in "
                    f"{time.perf_counter() - started:.0f} s")
        complete = True
    finally:
        if summaries:
            try:
                write_sweep_outputs(out_dir, summaries, {**meta, "complete": complete})
            except Exception as exc:  # noqa: BLE001 - never hide the error that stopped us
                if complete:
                    raise
                log(f"sweep: could not write the partial comparison ({exc})")
    return summaries


def _run_variant(config, run_dir: Path, label: str, log) -> tuple[dict, bool]:
    """Results of one variant, and whether they were read back rather than computed."""
    from rlvr.train.checkpoint import latest_checkpoint
    from rlvr.train.run import LOG_FILES, Run

    finished = run_dir / "results.json"
    if finished.is_file():
        log(f"sweep: skipping {label}: {finished} exists")
        return json.loads(finished.read_text(encoding="utf-8")), True
    resume = run_dir.is_dir() and latest_checkpoint(run_dir) is not None
    if run_dir.is_dir() and not resume:
        for name in LOG_FILES:  # an attempt cut off before GRPO started: begin again
            (run_dir / name).unlink(missing_ok=True)
    log(f"sweep: {'resuming' if resume else 'running'} {label} -> {run_dir}")
    run = Run(config, run_dir, resume=resume)
    try:
        return run.train(), False
    finally:
        del run
        gc.collect()


def _check_existing(run_dir: Path, config) -> None:
    """Refuse to skip or resume into a directory holding a run with other settings."""
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        raise SweepError(f"{run_dir}: exists but holds no config.yaml (not a run of this "
                         "sweep); use another --output-dir or remove it")
    try:
        saved = yaml.safe_load(saved_path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SweepError(f"{saved_path}: unreadable ({exc})") from None
    want = config.model_dump(mode="json")
    # A run's config.yaml records the precision resolved on its machine (rlvr.train.run).
    want["model"]["precision"] = resolve_precision(want["model"]["precision"]).precision
    diffs = [k for k in sorted(set(_flatten(saved)) | set(_flatten(want)))
             if k != "output_dir" and _flatten(saved).get(k) != _flatten(want).get(k)]
    if diffs:
        a, b = _flatten(saved), _flatten(want)
        shown = "; ".join(f"{k}: {a.get(k)!r} there, {b.get(k)!r} now" for k in diffs[:3])
        raise SweepError(f"{run_dir}: holds a run with other settings ({shown}"
                         f"{' ...' if len(diffs) > 3 else ''}); use another --output-dir")


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out or {prefix[:-1]: {}}
    return {prefix[:-1]: data}


def _axes(variants: list[dict[str, str]]) -> dict[str, list[str]]:
    axes: dict[str, list[str]] = {}
    for variant in variants:
        for k, v in variant.items():
            if v not in axes.setdefault(k, []):
                axes[k].append(v)
    return axes


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


# -- summaries ---------------------------------------------------------------------------------
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
    metrics = _read_jsonl(run_dir / "metrics.jsonl", []) or []

    def last_and_mean(key: str) -> tuple[float | None, float | None]:
        _, values = _series(metrics, key)
        return (values[-1], sum(values) / len(values)) if values else (None, None)

    final_reward, mean_reward = last_and_mean("reward_mean")
    final_kl, mean_kl = last_and_mean("kl")
    steps = _series(metrics, "step")[0]
    trained, baseline = results.get("trained") or {}, results.get("baseline") or {}
    return {
        "name": variant_name(variant), "run_dir": str(run_dir), "overrides": dict(variant),
        "params": {k: _lookup(dump, k) for k in variant},
        "kl_coef": dump["algo"]["kl_coef"],
        "steps": int(steps[-1]) if steps else 0,
        "baseline_pass_at_1": _finite(baseline.get("pass_at_1")),
        "final_pass_at_1": _finite(trained.get("pass_at_1")),
        "gain_pass_at_1": _finite(results.get("gain_pass_at_1")),
        "final_val_reward": _finite(trained.get("mean_reward")),
        "final_reward": final_reward, "mean_reward": mean_reward,
        "final_kl": final_kl, "mean_kl": mean_kl,
        "final_length": last_and_mean("length_mean")[0],
        "wall_seconds": _finite(results.get("wall_seconds")),
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
    wall = _finite(s.get("wall_seconds"))
    return [s["name"], _pct(s.get("final_pass_at_1")), _pct(s.get("baseline_pass_at_1")),
            _points(s.get("gain_pass_at_1")), _num(s.get("final_val_reward")),
            _num(s.get("final_reward")), _num(s.get("final_kl"), 4), _num(s.get("mean_kl"), 4),
            _num(s.get("final_length"), 1), str(s.get("steps", "-")),
            "-" if wall is None else f"{wall:.0f} s", _stopped_text(s.get("stopped"))]


def summary_table(summaries: Sequence[dict], title: str = "sweep (best final pass@1 first)"):
    """The summaries as a rich Table, sorted as :func:`sort_summaries`."""
    from rich.table import Table

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
        metrics = _read_jsonl(run_dir / "metrics.jsonl", []) or []
        validation = [r for r in _read_jsonl(run_dir / "validation.jsonl", []) or []
                      if r.get("label") != "base"]
        colour, style = f"C{i % 10}", _LINE_STYLES[(i // 10) % len(_LINE_STYLES)]
        line = None
        for ax, (key, _, _) in zip(axes, panels):
            if key == "pass_at_1":
                xs, ys = _series(validation, key)
                if xs:
                    line, = ax.plot(xs, ys, style, marker="o", markersize=4, color=colour)
                else:
                    missing[key].append(s["name"])
                continue
            xs, ys = _series(metrics, key)
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


__all__ = ["MAX_VARIANTS", "SweepError", "build_configs", "moving_average", "parse_sweep",
           "plot_sweep", "run_sweep", "sort_summaries", "split_top_level", "summarize_variant",
           "summary_table", "sweep_markdown", "variant_name", "variant_overrides",
           "write_sweep_outputs"]

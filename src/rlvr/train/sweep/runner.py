"""Running a sweep: every variant one after another into its own run directory (skipping
finished ones, resuming interrupted ones), then the comparison files
(:func:`rlvr.train.sweep.summary.write_sweep_outputs`)."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from rlvr.models.precision import resolve_precision
from rlvr.run_manifest import remove_written
from rlvr.train.checkpoint import latest_checkpoint
from rlvr.train.run import LOG_FILES, Run, RunInputError
from rlvr.train.sweep.spec import SweepError, build_configs, variant_name
from rlvr.train.sweep.summary import summarize_variant, write_sweep_outputs


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
        fixed, variants: from :func:`~rlvr.train.sweep.spec.parse_sweep`.
        steps: ``grpo.steps`` for every variant (``None`` keeps the config's).
        out_dir: the sweep directory (created).
        log: called with progress lines (default: printed to stderr).

    Returns:
        One summary dict per variant, in run order (see
        :func:`~rlvr.train.sweep.summary.summarize_variant`).

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
    if log is None:
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
            except Exception as exc:
                if complete:
                    raise
                log(f"sweep: could not write the partial comparison ({exc})")
    return summaries


def _run_variant(config, run_dir: Path, label: str, log) -> tuple[dict, bool]:
    """Results of one variant, and whether they were read back rather than computed."""
    finished = run_dir / "results.json"
    if finished.is_file():
        log(f"sweep: skipping {label}: {finished} exists")
        return json.loads(finished.read_text(encoding="utf-8")), True
    resume = run_dir.is_dir() and latest_checkpoint(run_dir) is not None
    if run_dir.is_dir() and not resume:
        for name in LOG_FILES:  # an attempt cut off before GRPO started: begin again
            if (run_dir / name).is_file() and not remove_written(run_dir / name):
                raise SweepError(f"{run_dir / name}: the sweep directory's manifest does not "
                                 f"list it (not written by an rlvr sweep, or by one from "
                                 f"before manifests); remove it to run this variant again")
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


__all__ = ["run_sweep"]

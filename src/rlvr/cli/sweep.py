"""``rlvr sweep``: one run per swept ``--set`` value, compared in one plot and table."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console

from rlvr.cli.common import EXIT_STOPPED, check_output_dir, default_preset, err, fail, output_errors
from rlvr.cli.run_checks import check_run_inputs, recorded_output_dir
from rlvr.configio import ConfigError
from rlvr.limits import MAX_STEPS


def sweep(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config YAML "
                                          "(default: configs/arithmetic.yaml settings)."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE; a value with a "
                                   "top-level comma is swept, e.g. --set "
                                   "algo.kl_coef=0.001,0.01 (several swept keys: every "
                                   "combination, at most 32). Quote a string holding a comma; "
                                   "\\[a,b] and {k: v, ...} are single values. Repeatable."),
    steps: int | None = typer.Option(None, "--steps", min=1, max=MAX_STEPS,
        help="grpo.steps for every variant."),
    output_dir: Path | None = typer.Option(None, "--output-dir", "-o", help="Sweep "
                                              "directory, one run directory per variant "
                                              "(default runs/sweep-<name>-<timestamp>)."),
) -> None:
    """Run a job once per swept setting (one after another) and compare them: DIR/sweep.png
    (reward, KL, validation pass@1, length curves), sweep.md, sweep.json. Re-running the same
    command skips the variants already finished."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.run import RunInputError
    from rlvr.train.sweep.runner import run_sweep
    from rlvr.train.sweep.spec import build_configs, parse_sweep, variant_name
    from rlvr.train.sweep.summary import SWEEP_PNG, summary_table

    if config is None:  # the default preset, as `rlvr train` finds it
        config = default_preset()
    try:
        fixed, variants = parse_sweep(set_)
        configs = build_configs(config, fixed, variants, steps)  # all, before any run
    except ConfigError as exc:
        raise fail(str(exc)) from None
    for i, (variant, run_config) in enumerate(zip(variants, configs), 1):
        try:
            check_run_inputs(run_config)
        except typer.Exit:
            err.print(f"(in variant {i}/{len(variants)}: {variant_name(variant)})",
                      highlight=False)
            raise
    if not any(variants):
        err.print("[yellow]note:[/] no --set value has a top-level comma: one variant only")
    out = output_dir or Path("runs") / f"sweep-{configs[0].name}-{datetime.now():%Y%m%d-%H%M%S}"
    check_output_dir(out, "--output-dir" if output_dir is not None
                     else "the default sweep directory")
    err.print(f"[bold]rlvr sweep[/] {len(variants)} variant(s) -> {out}: "
              + ", ".join(variant_name(v) for v in variants), highlight=False)
    try:
        with output_errors(), recorded_output_dir(  # disk full: one line, exit 1
                out, "--output-dir" if output_dir is not None else "the default sweep directory"):
            summaries = run_sweep(config, fixed, variants, steps, out, log=err.print)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except RunInputError as exc:
        raise fail(str(exc)) from None
    Console(width=None if sys.stdout.isatty() else 160).print(summary_table(summaries))
    print(f"sweep plot: {out / SWEEP_PNG}")
    stopped = [s["name"] for s in summaries if s.get("stopped")]
    if stopped:
        err.print(f"[bold red]error:[/] a health check stopped {', '.join(stopped)} (see "
                  "each run's alerts.jsonl)", highlight=False)
        raise typer.Exit(EXIT_STOPPED)


"""``rlvr train`` (SFT cold start + GRPO, or ``--resume``) and ``rlvr sft`` (the cold start
alone)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from rlvr.cli.common import EXIT_STOPPED, err, fail, load_run_config, output_errors
from rlvr.cli.run_checks import check_run_inputs, prepare_run_dir, run_dir_option
from rlvr.distributed.errors import RolloutWorkerError
from rlvr.eval.paired import gain_summary
from rlvr.eval.report import pass_at_k_table
from rlvr.rewards.summary import accuracy_text


def train(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config YAML "
                                          "(default: configs/arithmetic.yaml settings)."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE (dotted keys), "
                                   "e.g. --set grpo.steps=10. Repeatable."),
    output_dir: Path | None = typer.Option(None, "--output-dir", "-o", help="Run directory "
                                              "(default runs/<name>-<timestamp>)."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue the run in this "
                                          "directory from its last checkpoint."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start over in a run directory "
                                   "that already holds a run (otherwise refused: use --resume "
                                   "to continue it): removes what rlvr recorded writing there "
                                   "(.rlvr-manifest.json) once the new run's inputs have "
                                   "loaded, and nothing else."),
) -> None:
    """SFT cold start + GRPO, ending with a baseline vs trained validation table."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.run import Run, RunInputError, category_table, results_table, run_dir_for

    if resume is not None and overwrite:
        raise fail("--resume continues a run and --overwrite clears one: pass one of them")
    if resume is not None:
        _check_resume_options(resume, config, output_dir)
    run_config = load_run_config(resume / "config.yaml" if resume else config, set_)
    if resume is not None:
        _check_resume_overrides(resume, run_config, set_)
    elif output_dir is not None:
        run_config.output_dir = str(output_dir)
    run_dir = resume or run_dir_for(run_config)
    check_run_inputs(run_config, set_)
    target = prepare_run_dir(run_dir, resume=resume is not None, overwrite=overwrite,
                             option=run_dir_option(resume, output_dir, run_config))
    err.print(f"[bold]rlvr train[/] -> {run_dir}", soft_wrap=True)
    _print_config_summary(run_config, run_dir)
    try:
        with output_errors():
            results = Run(run_config, run_dir, resume=resume is not None,
                          before_writing=target.start_writing).train()
    except RunInputError as exc:
        target.discard()
        raise fail(str(exc)) from None
    except RolloutWorkerError as exc:  # grpo.max_staleness: a rollout worker died or hung
        raise fail(f"{exc}\nthe run stopped; `rlvr train --resume {run_dir}` continues it "
                   f"from its last checkpoint", code=1) from None
    finally:
        target.close()
    Console(width=None if sys.stdout.isatty() else 120).print(results_table(results))
    by_category = category_table(results)
    if by_category is not None:
        Console(width=None if sys.stdout.isatty() else 120).print(by_category)
    sampled = pass_at_k_table(results)
    if sampled is not None:
        Console(width=None if sys.stdout.isatty() else 120).print(sampled)
    over_no_tool = results.get("gain_over_no_tool")
    extra = ("" if over_no_tool is None
             else f" ({over_no_tool * 100:+.1f} over the model without the tool)")
    paired = gain_summary(results.get("gain_pass_at_1_ci"))
    paired = f" ({paired})" if paired else ""
    print(f"pass@1 gain: {results['gain_pass_at_1'] * 100:+.1f} points{paired} over the "
          f"checkpoint that entered GRPO{extra}; wall time {results['wall_seconds'] / 60:.1f} "
          f"min; run dir {run_dir}")
    rollbacks = results.get("rollbacks") or []
    if rollbacks and not results.get("stopped"):
        err.print(f"[bold magenta]recovered[/] after {len(rollbacks)} rollback(s): " + "; ".join(
            f"step {r['step']} ({r['check']}) to {r['to']}, learning rate {r['lr']:.3g}"
            for r in rollbacks) + f"; trained to step {results['trained']['step']}",
            highlight=False)
    if results.get("stopped"):
        stop = results["stopped"]
        err.print(f"[bold red]error:[/] training stopped at step {stop['step']} by the "
                  f"{stop['check']} health check: {stop['message']} (alerts: "
                  f"{run_dir / 'alerts.jsonl'})")
        raise typer.Exit(EXIT_STOPPED)


def sft(
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config YAML; its "
                                          "model, data, sft, reward and eval sections are used."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE (dotted keys)."),
    output_dir: Path | None = typer.Option(None, "--output-dir", "-o", help="Run directory "
                                              "(default runs/<name>-sft-<timestamp>)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start over in a run directory "
                                   "that already holds a run (otherwise refused): removes what "
                                   "rlvr recorded writing there (.rlvr-manifest.json) once the "
                                   "new run's inputs have loaded, and nothing else."),
) -> None:
    """The SFT cold start alone: validation before and after, model saved to RUN/sft_model
    (pass it as model.name to a later `rlvr train --set sft.enabled=false`)."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.run import Run, RunInputError, run_dir_for

    run_config = load_run_config(config, set_)
    if output_dir is not None:
        run_config.output_dir = str(output_dir)
    if not run_config.output_dir:
        run_config.name = f"{run_config.name}-sft"
    run_dir = run_dir_for(run_config)
    check_run_inputs(run_config, set_)
    target = prepare_run_dir(run_dir, resume=False, overwrite=overwrite,
                             option=run_dir_option(None, output_dir, run_config),
                             resumable=False)
    err.print(f"[bold]rlvr sft[/] -> {run_dir}", soft_wrap=True)
    _print_config_summary(run_config, run_dir)
    try:
        with output_errors():
            results = Run(run_config, run_dir, before_writing=target.start_writing).sft_only()
    except RunInputError as exc:
        target.discard()
        raise fail(str(exc)) from None
    finally:
        target.close()
    before, after = results["base_model"], results["sft_model"]
    report = results["sft"]
    cut = (f", {report['truncated']} cut at sft.max_length={report['max_length']} "
           f"({report['no_answer']} dropped: no answer token left)" if report.get("truncated")
           else "")
    print(f"sft: {report['kept']} examples ({report['rejected']} rejected{cut}); "
          f"validation {_pass_at_1(before)} -> {_pass_at_1(after)}, format "
          f"{before['format_rate']:.1%} -> {after['format_rate']:.1%}; "
          f"model {results['model_dir']}")


def _pass_at_1(row: dict) -> str:
    """A validation row's pass@1 as printed, with its verifier errors (rows of an older rlvr
    have none recorded)."""
    return accuracy_text("pass@1", row["pass_at_1"], row.get("verifier_errors", 0),
                         row.get("n", 0) or 1)


def _print_config_summary(run_config, run_dir: Path) -> None:
    """The run's main settings, a line per section, on stderr (never wrapped: a log keeps one
    line per setting); the whole resolved config goes to ``run_dir/config.yaml``."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.config import config_summary

    for line in config_summary(run_config, str(run_dir / "config.yaml")):
        err.print(line, highlight=False, markup=False, soft_wrap=True)


def _check_resume_options(resume: Path, config: Path | None,
                          output_dir: Path | None) -> None:
    """Fail (exit 2) on options a resumed run cannot use: it continues with its own
    ``config.yaml`` in its own directory."""
    if config is not None:
        raise fail(f"--config: a resumed run uses its own {resume / 'config.yaml'}; change "
                   f"settings with --set KEY=VALUE")
    if output_dir is not None and output_dir.resolve() != resume.resolve():
        raise fail(f"--output-dir: a resumed run continues in its --resume directory "
                   f"({resume}); drop --output-dir")


def _check_resume_overrides(resume: Path, run_config, overrides: list[str]) -> None:
    """Fail (exit 2, naming each ``--set`` and why) when the overrides given with
    ``--resume`` change a setting the checkpoint or the run's start fixed
    (:func:`rlvr.train.config.resume_conflicts`), instead of silently not applying it."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.config import RESUME_HINT, resume_conflicts

    if not overrides:
        return
    saved = load_run_config(resume / "config.yaml", [])
    problems = resume_conflicts(saved, run_config, overrides)
    if problems:
        raise fail("\n".join(problems) + f"\n({RESUME_HINT})")

"""The ``rlvr`` command line: one typer app. Each command is a thin shell over a library call."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(
    name="rlvr",
    help="Train reasoning into language models with RL from verifiable rewards, and measure it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)

EXIT_BAD_INPUT = 2


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    """rlvr: RLVR + GRPO training, verifiable rewards, and test-time evaluation."""
    if version:
        from rlvr import __version__

        typer.echo(__version__)
        raise typer.Exit(0)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> "typer.Exit":
    """Print ``error: message`` to stderr and return the Exit to raise."""
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


@app.command()
def verify(
    input: Path = typer.Argument(..., help="JSONL: task_type, completion, reference[, id, "
                                           "prompt, category, source] per line."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write one JSON result "
                                          "per input line here (atomically). Default: stdout, "
                                          "unless --summary is given."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Verifier processes."),
    summary: bool = typer.Option(False, "--summary", help="Print reward statistics per "
                                 "category / source (R10)."),
    summary_json: Optional[Path] = typer.Option(None, "--summary-json", help="Also write the "
                                                "summary as JSON here."),
    timeout: float = typer.Option(2.0, "--timeout", min=0.001, help="Seconds per verifier call."),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML with a RewardConfig "
                                          "(weights, format rules, verifier options)."),
) -> None:
    """Score completions with the reward pipeline: reward, components, status, extracted."""
    from rlvr.rewards.config import RewardConfig
    from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
    from rlvr.rewards.records_io import InputError, atomic_write, output_row, read_records
    from rlvr.rewards.summary import summarize, summary_table

    reward_config = _load_reward_config(config, workers=workers, timeout_s=timeout)
    try:
        records = read_records(input)
    except InputError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{input}: cannot read ({exc.strerror or exc})")

    requests = [ScoreRequest(r.completion, r.reference, r.task_type) for r in records]
    with RewardPipeline(reward_config) as pipeline:
        results = _score_with_progress(pipeline, requests)

    rows = [output_row(r, res) for r, res in zip(records, results)]
    if output is not None:
        with atomic_write(output) as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    elif not summary:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    if summary or summary_json:
        stats = summarize(results, [r.category for r in records], [r.source for r in records])
        if summary:
            # a pipe or CI log gets a wide table rather than rich's 80-column default
            out = Console(width=None if sys.stdout.isatty() else 160)
            out.print(summary_table(stats, title=f"reward summary: {input}"))
        if summary_json:
            with atomic_write(summary_json) as f:
                json.dump(stats, f, indent=2)


def _score_with_progress(pipeline, requests):
    if len(requests) < 200:
        return pipeline.score_batch(requests)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("verifying", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task("verify", total=len(requests))
        return pipeline.score_batch(requests, lambda n: progress.update(task, completed=n))


def _load_reward_config(path: Optional[Path], **overrides):
    from rlvr.configio import ConfigError, load_config
    from rlvr.rewards.config import RewardConfig

    sets = [f"{key}={value}" for key, value in overrides.items()]
    try:
        return load_config(RewardConfig, path, sets, section="reward")
    except ConfigError as exc:
        raise fail(str(exc))


@app.command()
def train(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML "
                                          "(default: configs/arithmetic.yaml settings)."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE (dotted keys), "
                                   "e.g. --set grpo.steps=10. Repeatable."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Run directory "
                                              "(default runs/<name>-<timestamp>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the run in this "
                                          "directory from its last checkpoint."),
) -> None:
    """SFT cold start + GRPO, ending with a baseline vs trained validation table."""
    from rlvr.train.run import Run, RunInputError, results_table, run_dir_for

    run_config = _load_run_config(resume / "config.yaml" if resume else config, set_)
    if output_dir is not None:
        run_config.output_dir = str(output_dir)
    run_dir = resume or run_dir_for(run_config)
    _check_run_inputs(run_config)
    err.print(f"[bold]rlvr train[/] -> {run_dir}")
    err.print(_yaml(run_config.model_dump(mode="json")), highlight=False)
    try:
        results = Run(run_config, run_dir, resume=resume is not None).train()
    except RunInputError as exc:
        raise fail(str(exc))
    Console(width=None if sys.stdout.isatty() else 120).print(results_table(results))
    print(f"pass@1 gain: {results['gain_pass_at_1'] * 100:+.1f} points; wall time "
          f"{results['wall_seconds'] / 60:.1f} min; run dir {run_dir}")


@app.command()
def sft(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML; its "
                                          "model, data, sft, reward and eval sections are used."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE (dotted keys)."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Run directory "
                                              "(default runs/<name>-sft-<timestamp>)."),
) -> None:
    """The SFT cold start alone: validation before and after, model saved to RUN/sft_model
    (pass it as model.name to a later `rlvr train --set sft.enabled=false`)."""
    from rlvr.train.run import Run, RunInputError, run_dir_for

    run_config = _load_run_config(config, set_)
    if output_dir is not None:
        run_config.output_dir = str(output_dir)
    if not run_config.output_dir:
        run_config.name = f"{run_config.name}-sft"
    run_dir = run_dir_for(run_config)
    _check_run_inputs(run_config)
    err.print(f"[bold]rlvr sft[/] -> {run_dir}")
    err.print(_yaml(run_config.model_dump(mode="json")), highlight=False)
    try:
        results = Run(run_config, run_dir).sft_only()
    except RunInputError as exc:
        raise fail(str(exc))
    before, after = results["base_model"], results["sft_model"]
    print(f"sft: {results['sft']['kept']} examples ({results['sft']['rejected']} rejected); "
          f"validation pass@1 {before['pass_at_1']:.1%} -> {after['pass_at_1']:.1%}, format "
          f"{before['format_rate']:.1%} -> {after['format_rate']:.1%}; model {results['model_dir']}")


def _yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def _load_run_config(path: Optional[Path], overrides: list[str]):
    from rlvr.configio import ConfigError, load_config
    from rlvr.train.config import RunConfig

    if path is None:
        default = Path("configs/arithmetic.yaml")
        path = default if default.is_file() else None
    try:
        return load_config(RunConfig, path, overrides)
    except ConfigError as exc:
        raise fail(str(exc))


def _check_run_inputs(config) -> None:
    """Fail before any work on inputs that cannot work (exit 2)."""
    from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM

    if config.data.path and not Path(config.data.path).exists():
        raise fail(f"data.path: {config.data.path} does not exist")
    name = config.model.name
    if name not in (DEFAULT_MODEL, TINY_RANDOM) and not Path(name).exists() and "/" not in name:
        raise fail(f"model.name: {name!r} is neither a known model, a local path nor a hub id")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

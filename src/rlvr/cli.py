"""The ``rlvr`` command line: one typer app. Each command is a thin shell over a library call."""

from __future__ import annotations

import shutil
import sys
from contextlib import contextmanager
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


def _mount_data_commands() -> None:
    from rlvr.data.commands import data_app

    app.add_typer(data_app, name="data")


_mount_data_commands()


def _print_version(value: bool) -> None:
    if value:
        from rlvr import __version__

        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                 is_eager=True, callback=_print_version),
) -> None:
    """rlvr: RLVR + GRPO training, verifiable rewards, and test-time evaluation."""


EXIT_STOPPED = 3  # `rlvr train`: a health check stopped the run (results are still written)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> "typer.Exit":
    """Print ``error: message`` to stderr and return the Exit to raise. ``message`` is plain
    text: brackets in it (``pip install 'rlvr[compare]'``, a path) are printed as written."""
    from rich.markup import escape

    # soft_wrap: a long path is printed whole, not broken across lines at the terminal width
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


PRECISION_HELP = ("Compute precision: auto (bf16 where the CPU / GPU computes it natively, "
                  "else fp32), bf16 or fp32.")


def precision_choice(value: str):
    """Resolve a ``--precision`` value on this machine and print the choice (and any warning)
    to stderr; an unknown value exits 2 naming the option.

    Returns:
        :class:`rlvr.models.precision.PrecisionChoice`.
    """
    from rlvr.models.precision import resolve_precision

    try:
        choice = resolve_precision(value)
    except ValueError as exc:
        raise fail(f"--precision: {exc}")
    err.print(choice.summary(), highlight=False)
    if choice.warning:
        err.print(f"[yellow]warning:[/] {choice.warning}", highlight=False)
    return choice


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
    compare: Optional[str] = typer.Option(None, "--compare", help="Also score the math "
                                          "records with another library and list the "
                                          "disagreements: math-verify (Hugging Face's "
                                          "Math-Verify; pip install 'rlvr\\[compare]'). Its "
                                          "calls run in the verifier processes with the same "
                                          "--timeout. Other task types are skipped. Prints one "
                                          "line: records compared, agreement, disagreements, "
                                          "correct per side."),
    compare_out: Optional[Path] = typer.Option(None, "--compare-out", help="JSONL of the "
                                               "--compare disagreements (atomically). Default: "
                                               "beside -o's file, else beside the input: "
                                               "<stem>.disagreements.jsonl."),
    plugins: list[str] = typer.Option([], "--plugins", help="Python module registering task "
                                      "types (@register_verifier), format rules or "
                                      "aggregators, imported here and in every verifier "
                                      "process (added to --config's plugins). Repeatable or "
                                      "comma-separated."),
) -> None:
    """Score completions with the reward pipeline: reward, components, status, extracted."""
    from rlvr.rewards.config import RewardConfig
    from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
    from rlvr.rewards.pool import VerifierPool
    from rlvr.rewards.records_io import InputError, read_records

    reward_config = _with_plugins(_load_reward_config(config, workers=workers, timeout_s=timeout),
                                  plugins)
    if compare is not None:
        from rlvr.rewards.compare import CompareError, check_tool, default_compare_out

        try:
            check_tool(compare)
        except CompareError as exc:
            raise fail(str(exc))
        compare_out = compare_out or default_compare_out(input, output)
    elif compare_out is not None:
        raise fail("--compare-out: give --compare math-verify too (it names the other "
                   "library whose disagreements are written)")
    outputs = (("-o", output), ("--summary-json", summary_json), ("--compare-out", compare_out))
    for option, path in outputs:
        if path is not None:
            _check_output_file(path, option)
    _check_distinct_outputs([(o, p) for o, p in outputs if p is not None])
    try:
        records = read_records(input)
    except InputError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{input}: cannot read ({exc.strerror or exc})")

    if not records:
        err.print(f"{input}: no records (empty file); nothing to score")
    requests = [ScoreRequest(r.completion, r.reference, r.task_type) for r in records]
    pool = VerifierPool(workers) if compare is not None else None  # shared by both libraries
    try:
        with RewardPipeline(reward_config, pool=pool) as pipeline:
            results = _with_progress(len(requests), "verifying",
                                     lambda done: pipeline.score_batch(requests, done))
        if compare is not None:
            from rlvr.rewards.compare import math_verify_verdicts

            n_math = sum(r.task_type == "math" for r in records)
            other = _with_progress(n_math, compare, lambda done: math_verify_verdicts(
                pool, records, timeout, done))
    finally:
        if pool is not None:
            pool.close()

    with output_errors():
        _write_verify_outputs(records, results, output, summary, summary_json, input,
                              compare, compare_out, other if compare is not None else None)


def _write_verify_outputs(records, results, output, summary, summary_json, input, compare,
                          compare_out, other) -> None:
    """The outputs of ``rlvr verify`` (each written atomically; an OSError raises
    :class:`~rlvr.rewards.records_io.OutputError`)."""
    from rlvr.rewards.records_io import atomic_write, json_text, output_row, write_json
    from rlvr.rewards.summary import summarize, summary_table

    rows = [output_row(r, res) for r, res in zip(records, results)]
    if output is not None:
        with atomic_write(output) as f:
            for row in rows:
                f.write(json_text(row) + "\n")
    elif not summary:
        for row in rows:
            sys.stdout.write(json_text(row) + "\n")
    if summary or summary_json:
        stats = summarize(results, [r.category for r in records], [r.source for r in records])
        if summary:
            # a pipe or CI log gets a wide table rather than rich's 80-column default
            out = Console(width=None if sys.stdout.isatty() else 160)
            out.print(summary_table(stats, title=f"reward summary: {input}"))
        if summary_json:
            with atomic_write(summary_json) as f:
                write_json(f, stats, ensure_ascii=True)
    if compare is not None:
        from rlvr.rewards.compare import compare_results

        comparison = compare_results(records, results, other, compare)
        with atomic_write(compare_out) as f:
            for row in comparison.rows:
                f.write(json_text(row) + "\n")
        line = comparison.summary_line(compare_out)
        if output is None and not summary:  # stdout carries the scored rows: keep it JSONL
            err.print(line, highlight=False, soft_wrap=True)
        else:
            print(line)


def _with_progress(total: int, label: str, run):
    """``run(on_result)`` with a progress bar on stderr for 200 or more calls (``on_result(n)``
    is called with the number done); returns what ``run`` returns."""
    if total < 200:
        return run(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(label, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task(label, total=total)
        return run(lambda n: progress.update(task, completed=n))


def _check_distinct_outputs(paths: list[tuple[str, Path]]) -> None:
    """Fail (exit 2, naming both options) when two output options name the same file."""
    seen: dict[Path, str] = {}
    for option, path in paths:
        key = path.resolve()
        if key in seen:
            raise fail(f"{option} {path}: the same file as {seen[key]}; give each output its "
                       f"own path")
        seen[key] = option


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
    overwrite: bool = typer.Option(False, "--overwrite", help="Clear a run directory that "
                                   "already holds files (otherwise refused: use --resume to "
                                   "continue a run)."),
) -> None:
    """SFT cold start + GRPO, ending with a baseline vs trained validation table."""
    from rlvr.train.run import Run, RunInputError, results_table, run_dir_for

    if resume is not None and overwrite:
        raise fail("--resume continues a run and --overwrite clears one: pass one of them")
    if resume is not None:
        _check_resume_options(resume, config, output_dir)
    run_config = _load_run_config(resume / "config.yaml" if resume else config, set_)
    if resume is not None:
        _check_resume_overrides(resume, run_config, set_)
    elif output_dir is not None:
        run_config.output_dir = str(output_dir)
    run_dir = resume or run_dir_for(run_config)
    _check_run_inputs(run_config, set_)
    fresh = _prepare_run_dir(run_dir, resume=resume is not None, overwrite=overwrite,
                             option=_run_dir_option(resume, output_dir, run_config))
    err.print(f"[bold]rlvr train[/] -> {run_dir}", soft_wrap=True)
    _print_config_summary(run_config, run_dir)
    try:
        with output_errors():
            results = Run(run_config, run_dir, resume=resume is not None).train()
    except RunInputError as exc:
        _discard_failed_start(run_dir, fresh)
        raise fail(str(exc))
    Console(width=None if sys.stdout.isatty() else 120).print(results_table(results))
    from rlvr.eval.report import pass_at_k_table

    sampled = pass_at_k_table(results)
    if sampled is not None:
        Console(width=None if sys.stdout.isatty() else 120).print(sampled)
    print(f"pass@1 gain: {results['gain_pass_at_1'] * 100:+.1f} points; wall time "
          f"{results['wall_seconds'] / 60:.1f} min; run dir {run_dir}")
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


@app.command()
def sweep(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML "
                                          "(default: configs/arithmetic.yaml settings)."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE; a value with a "
                                   "top-level comma is swept, e.g. --set "
                                   "algo.kl_coef=0.001,0.01 (several swept keys: every "
                                   "combination, at most 32). Quote a string holding a comma; "
                                   "\\[a,b] and {k: v, ...} are single values. Repeatable."),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, help="grpo.steps for every "
                                        "variant."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Sweep "
                                              "directory, one run directory per variant "
                                              "(default runs/sweep-<name>-<timestamp>)."),
) -> None:
    """Run a job once per swept setting (one after another) and compare them: DIR/sweep.png
    (reward, KL, validation pass@1, length curves), sweep.md, sweep.json. Re-running the same
    command skips the variants already finished."""
    from datetime import datetime

    from rlvr.configio import ConfigError
    from rlvr.train.run import RunInputError
    from rlvr.train.sweep import (SWEEP_PNG, build_configs, parse_sweep, run_sweep,
                                  summary_table, variant_name)

    if config is None:  # the default preset, as `rlvr train` finds it
        candidates = [Path("configs/arithmetic.yaml"),
                      Path(__file__).resolve().parents[2] / "configs" / "arithmetic.yaml"]
        config = next((c for c in candidates if c.is_file()), None)
    try:
        fixed, variants = parse_sweep(set_)
        configs = build_configs(config, fixed, variants, steps)  # all, before any run
    except ConfigError as exc:
        raise fail(str(exc))
    for i, (variant, run_config) in enumerate(zip(variants, configs), 1):
        try:
            _check_run_inputs(run_config)
        except typer.Exit:
            err.print(f"(in variant {i}/{len(variants)}: {variant_name(variant)})",
                      highlight=False)
            raise
    if not any(variants):
        err.print("[yellow]note:[/] no --set value has a top-level comma: one variant only")
    out = output_dir or Path("runs") / f"sweep-{configs[0].name}-{datetime.now():%Y%m%d-%H%M%S}"
    _check_output_dir(out, "--output-dir" if output_dir is not None
                      else "the default sweep directory")
    err.print(f"[bold]rlvr sweep[/] {len(variants)} variant(s) -> {out}: "
              + ", ".join(variant_name(v) for v in variants), highlight=False)
    try:
        summaries = run_sweep(config, fixed, variants, steps, out, log=err.print)
    except ConfigError as exc:
        raise fail(str(exc))
    except RunInputError as exc:
        raise fail(str(exc))
    Console(width=None if sys.stdout.isatty() else 160).print(summary_table(summaries))
    print(f"sweep plot: {out / SWEEP_PNG}")
    stopped = [s["name"] for s in summaries if s.get("stopped")]
    if stopped:
        err.print(f"[bold red]error:[/] a health check stopped {', '.join(stopped)} (see "
                  "each run's alerts.jsonl)", highlight=False)
        raise typer.Exit(EXIT_STOPPED)


@app.command()
def sft(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML; its "
                                          "model, data, sft, reward and eval sections are used."),
    set_: list[str] = typer.Option([], "--set", help="Override KEY=VALUE (dotted keys)."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", "-o", help="Run directory "
                                              "(default runs/<name>-sft-<timestamp>)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Clear a run directory that "
                                   "already holds files (otherwise refused)."),
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
    _check_run_inputs(run_config, set_)
    fresh = _prepare_run_dir(run_dir, resume=False, overwrite=overwrite,
                             option=_run_dir_option(None, output_dir, run_config))
    err.print(f"[bold]rlvr sft[/] -> {run_dir}", soft_wrap=True)
    _print_config_summary(run_config, run_dir)
    try:
        with output_errors():
            results = Run(run_config, run_dir).sft_only()
    except RunInputError as exc:
        _discard_failed_start(run_dir, fresh)
        raise fail(str(exc))
    before, after = results["base_model"], results["sft_model"]
    report = results["sft"]
    cut = (f", {report['truncated']} cut at sft.max_length={report['max_length']} "
           f"({report['no_answer']} dropped: no answer token left)" if report.get("truncated")
           else "")
    print(f"sft: {report['kept']} examples ({report['rejected']} rejected{cut}); "
          f"validation pass@1 {before['pass_at_1']:.1%} -> {after['pass_at_1']:.1%}, format "
          f"{before['format_rate']:.1%} -> {after['format_rate']:.1%}; model {results['model_dir']}")


@app.command()
def serve(
    model: str = typer.Option(..., "--model", "-m", help="tiny-random, smollm2-135m-instruct, "
                              "or a local HF directory (RUN/sft_model, "
                              "RUN/checkpoints/step-N, LoRA adapter checkpoints too)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port."),
    max_concurrency: int = typer.Option(4, "--max-concurrency", min=1, help="Requests in "
                                        "flight at most (one generates at a time, the rest "
                                        "wait); more get HTTP 429."),
    engine: str = typer.Option("auto", "--engine", help="Rollout engine: auto (torch, or hf "
                               "for architectures torch refuses), torch or hf."),
    max_tokens: int = typer.Option(256, "--default-max-tokens", min=1, help="max_tokens of "
                                   "requests that give none."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    served_model_name: Optional[str] = typer.Option(None, "--served-model-name", help="The "
                                                    "model id /v1/models reports and a "
                                                    "request's `model` must name (default: "
                                                    "--model)."),
) -> None:
    """Serve a model through the OpenAI-compatible API: /v1/completions,
    /v1/chat/completions, /v1/models (Ctrl-C stops). Logs one line per request (method, path,
    status, latency, tokens) on stderr."""
    from rlvr.serve import ENGINES

    if engine not in ENGINES:
        raise fail(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    _check_model_name(model, "--model")
    if served_model_name is not None and not served_model_name.strip():
        raise fail("--served-model-name: expected a non-empty name")
    choice = precision_choice(precision)
    from rlvr.serve import bind_socket, missing_dependencies, serve_forever

    if missing_dependencies():
        raise fail(f"rlvr serve needs {', '.join(missing_dependencies())}: "
                   f"pip install 'rlvr[serve]'", code=1)

    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise fail(f"--host/--port: {exc.strerror or exc}")
    try:
        server = _model_server(model, engine, max_concurrency, max_tokens, choice.precision,
                               served_model_name)
        server.warm_up()
    except BaseException:
        sock.close()
        raise
    named = f" as {served_model_name!r}" if served_model_name else ""
    err.print(f"[bold]rlvr serve[/] {model}{named} (engine {server.engine.name}) on "
              f"http://{host}:{port}/v1", highlight=False)
    serve_forever(server, sock)


def _model_server(name: str, engine: str, max_concurrency: int, max_tokens: int,
                  precision: str = "auto", served_name: str | None = None):
    """Load ``name`` and wrap it in a ModelServer serving it as ``served_name`` (default:
    ``name``); bad input exits 2 naming the option."""
    from rlvr.models.loader import ModelLoadError
    from rlvr.rollout import UnsupportedModelError
    from rlvr.serve import ModelServer, load_for_serving

    try:
        model, tokenizer = load_for_serving(name)
    except ModelLoadError as exc:
        raise fail(f"--model: {exc}")
    try:
        return ModelServer(model, tokenizer, served_name or name, engine=engine,
                           max_concurrency=max_concurrency, default_max_tokens=max_tokens,
                           precision=precision)
    except UnsupportedModelError as exc:
        raise fail(f"--engine: {exc}")


def _check_model_name(name: str, option: str) -> None:
    """Fail (exit 2) on a model name that is neither known, a local path nor a hub id, or a
    local path that does not exist."""
    from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM, missing_model_path

    if missing_model_path(name):
        raise fail(f"{option}: {missing_model_path(name)}")
    if name not in (DEFAULT_MODEL, TINY_RANDOM) and not Path(name).exists() and "/" not in name:
        raise fail(f"{option}: {name!r} is neither a known model ({DEFAULT_MODEL}, "
                   f"{TINY_RANDOM}), a local path nor a hub id")


@app.command("eval")
def eval_(
    model: list[str] = typer.Option([], "--model", "-m", help="Model to sample: "
                                    "smollm2-135m-instruct, tiny-random, a checkpoint directory "
                                    "or hub id. Repeat to compare models side by side (same "
                                    "problems, same seeds). With --endpoint: the served name."),
    tasks: Optional[str] = typer.Option(None, "--tasks", "-t", help="Task source, as "
                                        "data.source of a run config: arithmetic, logic "
                                        "(generated in-process from --mixture, or read from "
                                        "--data-path), gsm8k, math500, jsonl, humaneval, mbpp "
                                        "(read from --data-path)."),
    data_path: Optional[Path] = typer.Option(None, "--data-path", help="Data file or "
                                             "directory of file sources (data.path); for "
                                             "arithmetic / logic a task file instead of "
                                             "generating. A file is evaluated whole, every "
                                             "record in file order (--limit: the first N); an "
                                             "MBPP file or a GSM8K directory by its validation "
                                             "split."),
    mixture: Optional[str] = typer.Option(None, "--mixture", help="Generator levels of "
                                          "arithmetic (e.g. 2d+-2d) or logic (e.g. "
                                          "countdown-3:0.5,kk-3:0.5; default "
                                          "countdown-3:0.5,kk-3:0.5) (data.mixture)."),
    split: str = typer.Option("validation", "--split", help="validation (the held-out set "
                              "a training run validates on) or train."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Problems to evaluate "
                                        "(sets data.val_size, or train_size with --split "
                                        "train; default: the config's; with a --data-path "
                                        "file: the first N of it, default all)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Run config YAML: its "
                                          "data, reward, seed and eval.max_new_tokens are the "
                                          "defaults (evaluate on that run's validation set)."),
    completions: Optional[Path] = typer.Option(None, "--completions", help="Score "
                                               "completions produced elsewhere (JSONL: id, "
                                               "task_type, reference, completion[, category, "
                                               "tokens, seconds, model]); no model is loaded."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="Sample from an "
                                           "OpenAI-compatible chat server at this URL instead "
                                           "of a local model."),
    n: int = typer.Option(16, "--n", min=1, help="Samples per problem."),
    k: Optional[str] = typer.Option(None, "--k", help="k values, e.g. 1,4,8,16 (default: "
                                    "1, 2, 4, ... up to n)."),
    aggregators: Optional[str] = typer.Option(None, "--aggregators", help="TYPE=NAME,... or "
                                              "NAME for all task types (default math=majority,"
                                              " code=any_passes, others best_of_logprob); "
                                              "names: majority, any_passes, best_of_oracle, "
                                              "best_of_logprob, best_of_reranker."),
    temperature: float = typer.Option(0.7, "--temperature", min=0.0, help="Eval sampling "
                                      "temperature (R18: 0.6-0.8)."),
    top_p: float = typer.Option(1.0, "--top-p", min=0.0, max=1.0),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=1, help="Length "
                                                 "cap (default: the config's "
                                                 "eval.max_new_tokens, else 256)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seeds data, sampling and maj@k "
                                       "subsets (default: the config's seed, else 0)."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Problems per generation "
                                   "call."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.001, help="Online budget "
                                            "in seconds per problem: sample in chunks, keep "
                                            "what finished in time (reported as fallback)."),
    chunk: int = typer.Option(4, "--chunk", min=1, help="Samples per call under --timeout."),
    probe: Optional[str] = typer.Option(None, "--probe", help="sycophancy: also ask each "
                                        "problem with a wrong hint from the user (R33)."),
    reranker: Optional[str] = typer.Option(None, "--reranker", help="module:function "
                                           "scoring (prompt, completion) without the reference, "
                                           "for best-of-k."),
    instruction: Optional[str] = typer.Option(None, "--instruction", help="Format "
                                              "instruction after each question (default: "
                                              "--config's data.instruction, else the one "
                                              "saved with a checkpoint by rlvr train, else "
                                              "the task source's default; printed with its "
                                              "origin)."),
    one_shot: Optional[bool] = typer.Option(None, "--one-shot/--no-one-shot", help="Prepend "
                                            "a worked example (default: the config's, else "
                                            "the checkpoint's)."),
    saturation_threshold: float = typer.Option(0.01, "--saturation-threshold", min=0.0,
                                               help="A curve is saturated when k -> 2k gains "
                                               "less than this (accuracy, 0.01 = 1 point)."),
    request_timeout: float = typer.Option(60.0, "--request-timeout", min=0.001, help="Seconds "
                                          "per endpoint request."),
    retries: int = typer.Option(2, "--retries", min=0, help="Endpoint retries per request."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Endpoint requests in "
                                    "flight."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Verifier processes."),
    plugins: list[str] = typer.Option([], "--plugins", help="Python module registering task "
                                      "types (@register_verifier), format rules or "
                                      "aggregators, imported here and in every verifier "
                                      "process: reward.plugins of a run config (added to "
                                      "--config's). Repeatable or comma-separated; a module in "
                                      "the working directory imports by name."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    output_dir: Optional[Path] = typer.Option(None, "-o", "--output-dir", help="Output "
                                              "directory (default runs/eval-<tasks>-<time>)."),
) -> None:
    """Test-time scaling: n samples per problem -> pass@k, maj@k, best-of-k, cost per k,
    per-category tables and plots (DIR/results.json, results.md, completions.jsonl, *.png)."""
    import time
    from datetime import datetime

    from rlvr.eval.evaluate import (EvalError, EvalSettings, load_reranker, parse_aggregators,
                                    parse_ks)
    from rlvr.eval.report import combine, markdown, write_report

    if completions is not None and (model or tasks or endpoint):
        raise fail("--completions: give either a completions file or --model/--endpoint with "
                   "--tasks, not both")
    if completions is None and not model and not endpoint:
        raise fail("give --model M (or --endpoint URL) with --tasks T, or --completions FILE")
    if probe is not None and completions is not None:
        raise fail("--probe needs a model to ask; it does not apply to --completions")
    run_config = _load_run_config_for_eval(config)
    reward_config = _eval_reward_config(run_config, plugins, workers)
    default_out = output_dir is None
    if default_out:  # named now, so that it is checked before any work
        label = completions.name if completions is not None else tasks or run_config.data.source
        output_dir = Path("runs") / f"eval-{label}-{datetime.now():%Y%m%d-%H%M%S}"
    _check_output_dir(output_dir, "the default output directory" if default_out
                      else "--output-dir")
    try:
        agg = parse_aggregators(aggregators)
        ks = None if completions is not None else parse_ks(k, n)
        rerank = load_reranker(reranker) if reranker else None
    except EvalError as exc:
        raise fail(str(exc))
    seed = run_config.seed if seed is None else seed
    settings = EvalSettings(
        n=n, ks=ks, temperature=temperature, top_p=top_p,
        max_new_tokens=max_new_tokens or (run_config.eval.max_new_tokens if config else 256),
        seed=seed, batch_size=batch_size, aggregators=agg, timeout_s=timeout, chunk=chunk,
        probe=probe, saturation_threshold=saturation_threshold)
    if completions is None and endpoint is None:  # local models: sampled here
        settings.precision = precision_choice(precision).precision
    start = time.perf_counter()
    if completions is not None:
        summaries, rows = _eval_completions(completions, settings, reward_config, k, rerank)
        settings.tasks, settings.temperature, settings.top_p = completions.name, None, None
        first = summaries[next(iter(summaries))]
        settings.max_new_tokens, settings.n, settings.ks = (None, first["samples_per_problem"],
                                                            first["ks"])
    else:
        data = _eval_data_config(run_config, tasks, data_path, mixture, split, limit,
                                 instruction, one_shot)
        settings.tasks = data.source
        prompts = _model_prompts(model or [endpoint], data, instruction, one_shot, config)
        settings.extra = {"data": data.model_dump(mode="json"), "split": split,
                          "endpoint": endpoint, "models": model,
                          "prompts": {name: {k: v for k, v in p.items() if k != "saved"}
                                      for name, p in prompts.items()}}
        summaries, rows = _eval_models(model, endpoint, data, split, settings, reward_config,
                                       rerank, (request_timeout, retries, concurrency), prompts)
    results = combine(summaries, settings.as_dict(), time.perf_counter() - start)
    out = output_dir
    with output_errors():
        written = write_report(results, out, rows)
    print(markdown(results))
    err.print(f"wrote {', '.join(p.name for p in written)} to {out}", highlight=False)


def _load_run_config_for_eval(config: Optional[Path]):
    from rlvr.configio import ConfigError, load_config
    from rlvr.train.config import RunConfig

    try:
        return load_config(RunConfig, config, [])
    except ConfigError as exc:
        raise fail(str(exc))


def _eval_reward_config(run_config, plugins: list[str], workers: int):
    """The run config's reward section with ``--workers`` and the ``--plugins`` modules added
    (:func:`_with_plugins`)."""
    return _with_plugins(run_config.reward.model_copy(update={"workers": workers}), plugins)


def _with_plugins(reward, plugins: list[str]):
    """``reward`` (a RewardConfig) with the ``--plugins`` modules added to its ``plugins``
    (imported now, so their task types are known before any data is read; one that does not
    import exits 2 naming it)."""
    from rlvr.rewards.registry import load_plugins

    modules = [m.strip() for text in plugins for m in text.split(",") if m.strip()]
    for module in modules:
        try:
            load_plugins([module])
        except ImportError as exc:
            raise fail(f"--plugins: cannot import {module!r} ({exc})")
        except Exception as exc:  # noqa: BLE001 - the plugin's own error, reported as bad input
            raise fail(f"--plugins: importing {module!r} failed: {type(exc).__name__}: {exc}")
    merged = list(dict.fromkeys([*reward.plugins, *modules]))
    return reward.model_copy(update={"plugins": merged})


def _eval_data_config(run_config, tasks, data_path, mixture, split, limit, instruction,
                      one_shot):
    """The DataConfig ``rlvr eval`` loads: the run config's data section with the command
    line's choices applied (bad values exit 2 naming the option)."""
    from pydantic import ValidationError

    from rlvr.tasks.registry import needs_data_path, splits_in_one_file
    from rlvr.train.config import DataConfig

    if split not in ("validation", "train"):
        raise fail(f"--split: expected validation or train, got {split!r}")
    updates = {"source": tasks, "path": None if data_path is None else str(data_path),
               "mixture": mixture, "instruction": instruction, "one_shot": one_shot,
               ("val_size" if split == "validation" else "train_size"): limit}
    data = run_config.data.model_dump()
    if tasks is not None and tasks != data["source"]:
        from rlvr.train.config import carry_instruction

        # another source: the config's path and generator levels do not apply, and its
        # instruction carries over only when it is not the old source's default one
        del data["mixture"]
        data["path"] = data["val_path"] = None
        data["instruction"] = carry_instruction(data["instruction"], data["source"], tasks)
    data.update({key: value for key, value in updates.items() if value is not None})
    if split == "validation":  # the validation set never depends on train_size: skip the work
        data["train_size"] = 1
        if (data_path is not None and data_path.is_file()
                and not splits_in_one_file(data["source"])):
            # the file given is what is evaluated: every record (--limit: the first N), not
            # a hold-out of it (an MBPP file holds all its splits: its validation ids are used)
            data["val_path"] = str(data_path)
    option = {"source": "--tasks", "path": "--data-path", "mixture": "--mixture",
              "val_size": "--limit", "train_size": "--limit", "instruction": "--instruction"}
    try:
        data = DataConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "data"
        raise fail(f"{option.get(field, 'data.' + field)}: {first['msg']}"
                   f" (got {first.get('input')!r})")
    if needs_data_path(data.source) and not data.path:
        raise fail(f"--data-path: --tasks {data.source} reads a data file or directory")
    if data.path and not Path(data.path).exists():
        raise fail(f"--data-path: {data.path} does not exist")
    return data


def _model_prompts(models, data, instruction, one_shot, config) -> dict[str, dict]:
    """How each model is prompted, printed with where it came from: ``--instruction`` /
    ``--one-shot``, else ``--config``'s data section, else the prompt settings saved with the
    model (a checkpoint or sft_model/ of ``rlvr train``: its ``rlvr_prompt.json``, or its run's
    ``config.yaml``), else the default of the task source.

    Returns:
        model -> ``{"instruction", "one_shot", "from", "saved"}`` (``saved``: the
        :class:`rlvr.train.prompting.SavedPrompt` used, or ``None``).
    """
    from rlvr.train.prompting import saved_prompt

    out = {}
    for name in models:
        saved = None
        if config is None and (instruction is None or one_shot is None):
            try:
                saved = saved_prompt(name)
            except ValueError as exc:
                raise fail(f"--model {name}: {exc}")
        if instruction is not None:
            text, origin = instruction, "--instruction"
        elif config is not None:
            text, origin = data.instruction, f"--config {config}"
        elif saved is not None:
            text = saved.instruction_for(data.source)
            origin = f"saved with the model: {saved.origin}"
        else:
            text, origin = data.instruction, (f"the default for --tasks {data.source}; {name} has "
                                              f"no saved prompt settings")
        shot = (one_shot if one_shot is not None else data.one_shot if config is not None
                or saved is None else saved.one_shot)
        out[name] = {"instruction": text, "one_shot": shot, "from": origin, "saved": saved}
        err.print(f"instruction for {name}: {text!r}" + (" (none)" if not text else "")
                  + f"{'; one-shot example' if shot else ''} ({origin})", highlight=False,
                  soft_wrap=True)
    return out


def _checked_template(sampler, name: str, saved) -> object:
    """``sampler``, after a warning when its tokenizer's chat template is not the one the model
    was trained with (recorded in its saved prompt settings)."""
    trained = saved.settings.get("chat_template") if saved is not None else None
    if trained and getattr(sampler.tokenizer, "chat_template", None) != trained:
        err.print(f"[yellow]warning:[/] {name}: the tokenizer's chat template differs from the "
                  f"one it was trained with ({saved.origin})", highlight=False)
    return sampler


def _eval_models(models, endpoint, data, split, settings, reward_config, rerank, http,
                 prompts):
    from rlvr.eval.evaluate import EvalError, evaluate_models
    from rlvr.eval.sampling import EndpointSampler, load_engine_sampler
    from rlvr.eval.summary import SummaryError
    from rlvr.models.loader import ModelLoadError
    from rlvr.progress import console_phases
    from rlvr.rewards.pipeline import RewardPipeline
    from rlvr.tasks.sources import load_tasks

    if endpoint is None:
        for name in models:
            _check_model_name(name, "--model")
    try:
        train, val = load_tasks(data, settings.seed,
                                log=lambda m: err.print(m, highlight=False, soft_wrap=True))
    except ValueError as exc:
        raise fail(f"--tasks {data.source}: {exc}")
    task_list = val if split == "validation" else train
    common = dict(temperature=settings.temperature, top_p=settings.top_p,
                  max_new_tokens=settings.max_new_tokens)

    def prompt(name):
        return {"instruction": prompts[name]["instruction"],
                "one_shot": prompts[name]["one_shot"]}

    if endpoint is not None:
        timeout_s, retries, concurrency = http
        labels = models or [None]
        factories = {label or endpoint: (lambda label=label: EndpointSampler(
            endpoint, model=label, timeout_s=timeout_s, retries=retries,
            concurrency=concurrency, **prompt(label or endpoint), **common)) for label in labels}
    else:
        factories = {name: (lambda name=name: _checked_template(load_engine_sampler(
            name, seed=settings.seed, precision=settings.precision, **prompt(name), **common),
            name, prompts[name]["saved"])) for name in models}
    err.print(f"[bold]rlvr eval[/] {len(task_list)} {data.source} problems ({split}), "
              f"n = {settings.n}, temperature {settings.temperature}", highlight=False)
    try:
        with RewardPipeline(reward_config) as rewards:
            return evaluate_models(factories, task_list, settings, rewards, reranker=rerank,
                                   has_logprobs=endpoint is None,
                                   log=lambda m: err.print(m, highlight=False, soft_wrap=True),
                                   phase=console_phases(err))
    except (EvalError, SummaryError) as exc:
        raise fail(str(exc))
    except ModelLoadError as exc:
        raise fail(f"--model: {exc}")
    except ImportError as exc:
        raise fail(str(exc), code=1)
    except RuntimeError as exc:  # a server that cannot be reached or answers errors
        from rlvr.eval.endpoint import EndpointError

        if isinstance(exc, EndpointError):
            raise fail(f"--endpoint: {exc}", code=1)
        raise


def _eval_completions(path, settings, reward_config, ks_text, rerank):
    from rlvr.eval.evaluate import EvalError, evaluate_completions
    from rlvr.eval.records import read_completions
    from rlvr.eval.summary import SummaryError
    from rlvr.progress import console_phases
    from rlvr.rewards.pipeline import RewardPipeline
    from rlvr.rewards.records_io import InputError

    try:
        data = read_completions(path)
    except InputError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{path}: cannot read ({exc.strerror or exc})")
    try:
        with RewardPipeline(reward_config) as rewards:
            return evaluate_completions(data, settings, rewards, ks_text=ks_text,
                                        reranker=rerank, phase=console_phases(err))
    except (EvalError, SummaryError) as exc:
        raise fail(str(exc))


@app.command()
def lengths(
    path: Path = typer.Argument(..., help="A run directory (samples.jsonl), an rlvr eval "
                                "directory (completions.jsonl) or a JSONL file with tokens "
                                "(or completion text plus --tokenizer)."),
    cap: Optional[int] = typer.Option(None, "--cap", min=1, help="Current length cap "
                                      "(default: the run's grpo.max_new_tokens / the eval's "
                                      "max_new_tokens)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Model whose tokenizer "
                                            "counts tokens of completions without a count."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the report as "
                                            "JSON here."),
) -> None:
    """Completion-length distribution, recommended inference cap (P90 x 1.2) and the
    truncation rate at the current cap (R19)."""
    from rich.table import Table

    from rlvr.eval.lengths import LengthsError, histogram, length_report, load_lengths
    from rlvr.rewards.records_io import atomic_write, write_json

    if json_out is not None:
        _check_output_file(json_out, "--json")
    try:
        found = load_lengths(path, tokenizer=tokenizer, cap=cap)
        report = length_report(found.lengths, found.cap, found.finish_reasons)
    except (LengthsError, OSError) as exc:
        raise fail(str(exc))
    report["source"] = found.source
    table = Table(title=f"completion lengths (tokens): {found.source}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key in ("count", "mean", "min", "p50", "p90", "p99", "max", "cap", "truncation_rate",
                "recommended_cap", "truncation_rate_at_recommended"):
        value = report[key]
        text = ("-" if value is None else f"{value:.1%}" if "rate" in key
                else f"{value:.1f}" if isinstance(value, float) else str(value))
        table.add_row(key, text)
    out = Console(width=None if sys.stdout.isatty() else 100)
    out.print(table)
    counts = histogram(found.lengths)
    top = max(c for _, _, c in counts)
    for lo, hi, c in counts:
        out.print(f"{lo:>6}-{hi:<6} {c:>6} {'#' * round(40 * c / top)}", highlight=False)
    print(f"recommended cap: {report['recommended_cap']} tokens (P90 {report['p90']:.1f} x 1.2)"
          + ("" if report["cap"] is None else f"; truncated at the current cap {report['cap']}:"
             f" {report['truncation_rate']:.1%}"))
    if json_out is not None:
        with output_errors(), atomic_write(json_out) as f:
            write_json(f, report, ensure_ascii=True)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A run directory of `rlvr train` (metrics.jsonl "
                                   "and/or results.json; partial runs work)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="HTML file to write "
                                          "(default RUN_DIR/report.html)."),
) -> None:
    """A self-contained HTML report of a run: curves, alerts, baseline vs trained, samples."""
    from rlvr.reports.run_report import write_run_report

    try:
        path = write_run_report(run_dir, output)
    except ValueError as exc:
        raise fail(str(exc))
    except OSError as exc:
        raise fail(f"{output or run_dir}: cannot write the report ({exc.strerror or exc})")
    print(path)


def _print_config_summary(run_config, run_dir: Path) -> None:
    """The run's main settings, a line per section, on stderr (never wrapped: a log keeps one
    line per setting); the whole resolved config goes to ``run_dir/config.yaml``."""
    from rlvr.train.config import config_summary

    for line in config_summary(run_config, str(run_dir / "config.yaml")):
        err.print(line, highlight=False, markup=False, soft_wrap=True)


def _load_run_config(path: Optional[Path], overrides: list[str]):
    from rlvr.configio import ConfigError, load_config
    from rlvr.train.config import RunConfig

    if path is None:  # the default preset: ./configs, else the one beside the source tree
        candidates = [Path("configs/arithmetic.yaml"),
                      Path(__file__).resolve().parents[2] / "configs" / "arithmetic.yaml"]
        path = next((c for c in candidates if c.is_file()), None)
        if path is not None:
            err.print(f"config: {path} (the default preset)")
    try:
        return load_config(RunConfig, path, overrides)
    except ConfigError as exc:
        raise fail(str(exc))


def _check_resume_options(resume: Path, config: Optional[Path],
                          output_dir: Optional[Path]) -> None:
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
    from rlvr.train.config import RESUME_HINT, resume_conflicts

    if not overrides:
        return
    saved = _load_run_config(resume / "config.yaml", [])
    problems = resume_conflicts(saved, run_config, overrides)
    if problems:
        raise fail("\n".join(problems) + f"\n({RESUME_HINT})")


def _check_output_file(path: Path, option: str, *, make_parents: bool = False) -> None:
    """Fail before any work (exit 2, naming the option and the path) when ``path`` cannot be
    written as a file: it is a directory, or its directory is missing (unless
    ``make_parents``) or not writable (:func:`rlvr.rewards.records_io.output_file_problem`)."""
    from rlvr.rewards.records_io import output_file_problem

    problem = output_file_problem(path, make_parents=make_parents)
    if problem is not None:
        raise fail(f"{option} {path}: {problem}")


def _check_output_dir(path: Path, option: str) -> None:
    """Fail before any work (exit 2, naming the option and the path) when ``path`` cannot be
    created or written as an output directory: it (or an ancestor) is a file, or it is not
    writable (:func:`rlvr.rewards.records_io.output_dir_problem`)."""
    from rlvr.rewards.records_io import output_dir_problem

    problem = output_dir_problem(path)
    if problem is not None:
        raise fail(f"{option} {path}: {problem}")


@contextmanager
def output_errors():
    """Turn an :class:`~rlvr.rewards.records_io.OutputError` raised in the block (disk full
    while writing an output) into one line on stderr and exit code 1; the outputs written
    before keep their content (every writer is temp-then-rename or cuts back what it
    appended)."""
    from rlvr.rewards.records_io import OutputError

    try:
        yield
    except OutputError as exc:
        raise fail(str(exc), code=1) from None


def _run_dir_option(resume: Optional[Path], output_dir: Optional[Path], run_config) -> str:
    """Where the run directory came from, for messages: ``--resume``, ``--output-dir``,
    ``output_dir`` (the config) or ``the default run directory``."""
    if resume is not None:
        return "--resume"
    if output_dir is not None:
        return "--output-dir"
    return "output_dir" if run_config.output_dir else "the default run directory"


def _prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool,
                     option: str = "--output-dir") -> bool:
    """Fail before any work (exit 2, naming ``option`` and the path) on a run directory that
    cannot take this run: a file in its place (or above it), an unwritable location, or a
    directory already holding a run (without ``--resume`` two runs' logs would interleave and
    the old ``sft_model/`` would become a later resume's KL reference). ``--overwrite``
    clears such a directory first. Returns whether this run starts in an empty (or new)
    directory, which :func:`_discard_failed_start` may then clear again."""
    from rlvr.rewards.records_io import output_dir_problem

    if run_dir.exists() and not run_dir.is_dir():
        raise fail(f"{option} {run_dir}: exists and is not a directory (choose another "
                   f"--output-dir)")
    problem = output_dir_problem(run_dir)
    if problem is not None:
        raise fail(f"{option} {run_dir}: cannot write the run directory ({problem})")
    if resume:
        return False
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not overwrite:
            raise fail(f"{run_dir} already holds files (a run?): continue that run with "
                       f"--resume {run_dir}, run the same command again with --overwrite "
                       f"added to clear it, or choose another --output-dir")
        _clear_dir(run_dir)
    return True


def _clear_dir(run_dir: Path) -> None:
    for entry in run_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _discard_failed_start(run_dir: Path, fresh: bool) -> None:
    """A run refused for bad input before any training (exit 2) leaves nothing behind in a
    directory it started empty, so the corrected command runs without --overwrite."""
    if fresh and run_dir.is_dir():
        _clear_dir(run_dir)


def _check_run_inputs(config, overrides: list[str] = ()) -> None:
    """Fail before any work on inputs that cannot work (exit 2); a value that came from a
    ``--set`` override is named by it."""
    from rlvr.configio import override_for
    from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM, missing_model_path

    def origin(field: str) -> str:
        text = override_for(tuple(field.split(".")), list(overrides))
        return f"--set {text!r}: " if text else ""

    for field in ("path", "val_path"):
        value = getattr(config.data, field)
        if value and not Path(value).exists():
            raise fail(f"{origin('data.' + field)}data.{field}: {value} does not exist")
    for i, spec in enumerate(config.data.sources):
        for field in ("path", "val_path"):
            value = getattr(spec, field)
            if value and not Path(value).exists():
                raise fail(f"data.sources.{i}.{field}: {value} does not exist")
    name = config.model.name
    if missing_model_path(name):
        raise fail(f"{origin('model.name')}model.name: {missing_model_path(name)}")
    if name not in (DEFAULT_MODEL, TINY_RANDOM) and not Path(name).exists() and "/" not in name:
        raise fail(f"{origin('model.name')}model.name: {name!r} is neither a known model, a "
                   f"local path nor a hub id")


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

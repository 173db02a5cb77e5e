"""``rlvr verify``: score completions with the reward pipeline (and ``--compare`` them with
another library)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from rlvr.cli.common import check_output_file, err, fail, output_errors, with_plugins
from rlvr.configio import ConfigError, load_config
from rlvr.io import (DEFAULT_MAX_LINE_BYTES, InputError, atomic_write, input_limits, json_text,
                     write_json)
from rlvr.rewards.compare import (CompareError, check_tool, compare_results,
                                  default_compare_out, math_verify_verdicts)
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.pool import VerifierPool
from rlvr.rewards.records_io import output_row, read_records
from rlvr.rewards.summary import summarize, summary_table


def verify(
    input: Path = typer.Argument(..., help="JSONL: task_type, completion, reference[, id, "
                                           "prompt, category, source] per line."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write one JSON result "
                                          "per input line here (atomically). Default: stdout, "
                                          "unless --summary is given."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Verifier processes."),
    summary: bool = typer.Option(False, "--summary", help="Print reward statistics per "
                                 "category / source."),
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
    max_line_bytes: int = typer.Option(DEFAULT_MAX_LINE_BYTES, "--max-line-bytes", min=1,
                                       help="The longest input line (bytes): a longer record "
                                       "is refused (exit 2, naming the line) before it is "
                                       "read whole."),
) -> None:
    """Score completions with the reward pipeline: reward, components, status, extracted."""
    reward_config = with_plugins(_load_reward_config(config, workers=workers, timeout_s=timeout),
                                 plugins)
    if compare is not None:
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
            check_output_file(path, option)
    _check_distinct_outputs([(o, p) for o, p in outputs if p is not None])
    try:
        with input_limits(max_line_bytes=max_line_bytes, line_setting="--max-line-bytes"):
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
    :class:`~rlvr.io.OutputError`)."""
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
    sets = [f"{key}={value}" for key, value in overrides.items()]
    try:
        return load_config(RewardConfig, path, sets, section="reward")
    except ConfigError as exc:
        raise fail(str(exc))

"""``rlvr verify``: score completions with the reward pipeline (and ``--compare`` them with
another library)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from rlvr.cli.common import check_output_file, err, fail, output_errors, with_plugins
from rlvr.configio import ConfigError, load_config
from rlvr.io import (
    DEFAULT_MAX_LINE_BYTES,
    InputError,
    atomic_write,
    input_limits,
    json_text,
    write_json,
)
from rlvr.limits import MAX_TIMEOUT_S, MAX_WORKERS
from rlvr.rewards.compare import (
    CompareError,
    Comparison,
    check_tool,
    compare_results,
    default_compare_out,
    math_verify_verdicts,
)
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.pool import VerifierPool
from rlvr.rewards.records_io import check_records, iter_records, output_row
from rlvr.rewards.streaming import score_records
from rlvr.rewards.summary import SummaryAccumulator, summary_table


def verify(
    input: Path = typer.Argument(..., help="JSONL: task_type, completion, reference[, id, "
                                           "prompt, category, source] per line."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write one JSON result "
                                          "per input line here (atomically). Default: stdout, "
                                          "unless --summary is given."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, max=MAX_WORKERS,
        help="Verifier processes."),
    summary: bool = typer.Option(False, "--summary", help="Print reward statistics per "
                                 "category / source."),
    summary_json: Path | None = typer.Option(None, "--summary-json", help="Also write the "
                                                "summary as JSON here."),
    timeout: float = typer.Option(2.0, "--timeout", min=0.001, max=MAX_TIMEOUT_S,
        help="Seconds per verifier call."),
    config: Path | None = typer.Option(None, "--config", help="YAML with a RewardConfig "
                                          "(weights, format rules, verifier options)."),
    compare: str | None = typer.Option(None, "--compare", help="Also score the math "
                                          "records with another library and list the "
                                          "disagreements: math-verify (Hugging Face's "
                                          "Math-Verify; pip install 'rlvr\\[compare]'). Its "
                                          "calls run in the verifier processes with the same "
                                          "--timeout. Other task types are skipped. Prints one "
                                          "line: records compared, agreement, disagreements, "
                                          "correct per side."),
    compare_out: Path | None = typer.Option(None, "--compare-out", help="JSONL of the "
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
            raise fail(str(exc)) from None
        compare_out = compare_out or default_compare_out(input, output)
    elif compare_out is not None:
        raise fail("--compare-out: give --compare math-verify too (it names the other "
                   "library whose disagreements are written)")
    outputs = (("-o", output), ("--summary-json", summary_json), ("--compare-out", compare_out))
    for option, path in outputs:
        if path is not None:
            check_output_file(path, option)
    _check_distinct_outputs([(o, p) for o, p in outputs if p is not None], input)
    limits = {"max_line_bytes": max_line_bytes, "line_setting": "--max-line-bytes"}
    with _rereadable(input) as source:
        try:  # every line is checked before any work starts; none is kept
            with input_limits(**limits):
                counts = check_records(source)
        except InputError as exc:
            raise fail(str(exc).replace(str(source), str(input), 1)) from None
        except OSError as exc:
            raise fail(f"{input}: cannot read ({exc.strerror or exc})") from None
        if not counts:
            err.print(f"{input}: no records (empty file); nothing to score")

        pool = VerifierPool(workers) if compare is not None else None  # shared by both
        totals = _Totals(SummaryAccumulator(), Comparison(compare) if compare else None)
        try:
            with output_errors(), input_limits(**limits):
                _score_and_write(source, reward_config, pool, counts, output, summary, compare,
                                 compare_out, timeout, totals)
        except InputError as exc:  # the input changed after it was checked
            raise fail(str(exc).replace(str(source), str(input), 1)) from None
        finally:
            if pool is not None:
                pool.close()

    with output_errors():
        _write_summaries(totals, output, summary, summary_json, input, compare_out)


@contextmanager
def _rereadable(path: Path):
    """``path`` itself when it is a regular file (read twice: checked, then scored); a pipe or
    another stream (``<(zcat in.jsonl.gz)``, ``/dev/stdin``) is first copied to a temp file,
    which is read twice instead and removed afterwards."""
    if path.is_file() or not path.exists():
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="rlvr-verify-") as tmp:
        copy = Path(tmp) / "input.jsonl"
        try:
            with open(path, "rb") as src, open(copy, "wb") as dst:
                shutil.copyfileobj(src, dst)
        except OSError as exc:
            raise fail(f"{path}: cannot read it into a temp file ({exc.strerror or exc})") from None
        yield copy


@dataclass
class _Totals:
    """What ``rlvr verify`` counts while the records stream past: the reward summary and the
    ``--compare`` counts (their rows are written as they come, not kept)."""

    summary: SummaryAccumulator
    comparison: Comparison | None


def _score_and_write(input, reward_config, pool, counts, output, summary, compare,
                     compare_out, timeout, totals: _Totals) -> None:
    """Score the records of ``input`` a chunk at a time and write each chunk's rows (to a temp
    file beside ``-o``'s, renamed when all are written; else stdout) and ``--compare``
    disagreements as it is scored; nothing is kept but counts. An OSError raises
    :class:`~rlvr.io.OutputError` and leaves the previous outputs as they were."""
    with ExitStack() as stack:
        out = (stack.enter_context(atomic_write(output)) if output is not None
               else None if summary else sys.stdout)
        compare_file = (stack.enter_context(atomic_write(compare_out)) if compare is not None
                        else None)
        on_verify, on_compare = stack.enter_context(
            _progress(sum(counts.values()), counts.get("math", 0) if compare else 0, compare))
        pipeline = stack.enter_context(RewardPipeline(reward_config, pool=pool))
        compared = 0
        for batch, results in score_records(pipeline, iter_records(input), on_result=on_verify):
            for record, result in zip(batch, results):
                if out is not None:
                    out.write(json_text(output_row(record, result)) + "\n")
                totals.summary.add(result, record.category, record.source)
            if compare is not None:
                base = compared
                other = math_verify_verdicts(pool, batch, timeout, None if on_compare is None
                                             else lambda n, base=base: on_compare(base + n))
                compared += sum(v is not None for v in other)
                part = compare_results(batch, results, other, compare)
                for row in part.rows:
                    compare_file.write(json_text(row) + "\n")
                totals.comparison.add(part)
        if out is sys.stdout:
            out.flush()


def _write_summaries(totals: _Totals, output, summary, summary_json, input,
                     compare_out) -> None:
    """The summary table, ``--summary-json`` (atomically) and the ``--compare`` line."""
    if summary or summary_json:
        stats = totals.summary.summary()
        if summary:
            # a pipe or CI log gets a wide table rather than rich's 80-column default
            out = Console(width=None if sys.stdout.isatty() else 160)
            out.print(summary_table(stats, title=f"reward summary: {input}"))
        if summary_json:
            with atomic_write(summary_json) as f:
                write_json(f, stats, ensure_ascii=True)
    if totals.comparison is not None:
        line = totals.comparison.summary_line(compare_out)
        if output is None and not summary:  # stdout carries the scored rows: keep it JSONL
            err.print(line, highlight=False, soft_wrap=True)
        else:
            print(line)


@contextmanager
def _progress(total: int, total_compare: int, compare: str | None):
    """``(on_verify, on_compare)``: progress callbacks (``f(n_done)``) of bars on stderr for
    200 or more records, else ``(None, None)``."""
    if total < 200:
        yield None, None
        return
    with Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True) as progress:
        verifying = progress.add_task("verifying", total=total)
        comparing = (progress.add_task(compare, total=total_compare) if compare is not None
                     else None)
        yield ((lambda n: progress.update(verifying, completed=n)),
               None if comparing is None else (lambda n: progress.update(comparing,
                                                                         completed=n)))


def _check_distinct_outputs(paths: list[tuple[str, Path]], input: Path) -> None:
    """Fail (exit 2, naming both) when two output options name the same file, or one names
    the input (its records would be replaced by their scores)."""
    seen: dict[Path, str] = {input.resolve(): "the input"}
    for option, path in paths:
        key = path.resolve()
        if key in seen:
            raise fail(f"{option} {path}: the same file as {seen[key]}; give each output its "
                       f"own path")
        seen[key] = option


def _load_reward_config(path: Path | None, **overrides):
    sets = [f"{key}={value}" for key, value in overrides.items()]
    try:
        return load_config(RewardConfig, path, sets, section="reward")
    except ConfigError as exc:
        raise fail(str(exc)) from None

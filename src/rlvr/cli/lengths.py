"""``rlvr lengths``: the completion-length distribution and a recommended length cap (R19)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from rlvr.cli.common import check_output_file, fail, output_errors
from rlvr.eval.lengths import LengthsError, histogram, length_report, load_lengths
from rlvr.io import atomic_write, write_json
from rlvr.limits import MAX_TOKENS


def lengths(
    path: Path = typer.Argument(..., help="A run directory (samples.jsonl), an rlvr eval "
                                "directory (completions.jsonl) or a JSONL file with tokens "
                                "(or completion text plus --tokenizer)."),
    cap: int | None = typer.Option(None, "--cap", min=1, max=MAX_TOKENS,
        help="Current length cap (default: the run's grpo.max_new_tokens / the eval's "
        "max_new_tokens)."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="Model whose tokenizer "
                                            "counts tokens of completions without a count."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the report as "
                                            "JSON here."),
) -> None:
    """Completion-length distribution, recommended inference cap (P90 x 1.2) and the
    truncation rate at the current cap."""
    if json_out is not None:
        check_output_file(json_out, "--json")
    try:
        found = load_lengths(path, tokenizer=tokenizer, cap=cap)
        report = length_report(found.lengths, found.cap, found.finish_reasons)
    except (LengthsError, OSError) as exc:
        raise fail(str(exc)) from None
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
    if report["censored"]:
        low, high = report["truncation_rate_at_recommended_range"]
        print(f"warning: {report['truncation_rate']:.1%} of the completions stopped at the cap "
              f"{report['cap']}, so their true lengths are unknown: P90 and the recommended cap "
              f"are lower bounds, and the truncation rate at the recommended cap is between "
              f"{low:.1%} and {high:.1%}; measure again with a larger cap")
    if json_out is not None:
        with output_errors(), atomic_write(json_out) as f:
            write_json(f, report, ensure_ascii=True)

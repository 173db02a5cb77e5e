"""``rlvr report``: the self-contained HTML report of a training run."""

from __future__ import annotations

from pathlib import Path

import typer

from rlvr.cli.common import fail
from rlvr.reports.run_report import write_run_report


def report(
    run_dir: Path = typer.Argument(..., help="A run directory of `rlvr train` (metrics.jsonl "
                                   "and/or results.json; partial runs work)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="HTML file to write "
                                          "(default RUN_DIR/report.html)."),
) -> None:
    """A self-contained HTML report of a run: curves, alerts, baseline vs trained, samples."""
    try:
        path = write_run_report(run_dir, output)
    except ValueError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{output or run_dir}: cannot write the report "
                   f"({exc.strerror or exc})") from None
    print(path)

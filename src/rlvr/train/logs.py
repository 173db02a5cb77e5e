"""The run's console and its JSONL logs (metrics.jsonl, samples.jsonl, alerts.jsonl,
validation.jsonl, validation_samples.jsonl in the run directory)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from rlvr.io import append_jsonl

# Logs piped to a file keep one line per event (rich wraps at 80 columns off a terminal).
console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

LOG_FILES = ("metrics.jsonl", "samples.jsonl", "alerts.jsonl", "validation.jsonl",
             "validation_samples.jsonl")


def append_log(path: Path, rows: list[dict]) -> None:
    """Append rows to a run log as standard JSON: a NaN / inf value (a NaN loss) is written as
    null and named under ``"nonfinite"`` (:func:`rlvr.io.append_jsonl`); numpy
    scalars and 0-d tensors as floats."""
    append_jsonl(path, rows, default=float)

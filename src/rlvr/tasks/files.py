"""What every file-based task loader shares: :class:`DataError` and the JSONL reader.

:mod:`rlvr.tasks.sources` (GSM8K, MATH-500, task JSONL) and :mod:`rlvr.tasks.code` (MBPP,
HumanEval) both build on this module, so neither imports the other at module level.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.io import InputError, read_jsonl


class DataError(ValueError):
    """Task data could not be loaded; the message names the file, line and field."""


def read_task_jsonl(path: Path) -> list[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of a task JSONL file.

    Raises:
        DataError: the file is missing, a line is not a JSON object or not UTF-8 (the message
            names the file and line, from :func:`rlvr.io.read_jsonl`).
        OSError: the file cannot be read.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return read_jsonl(path)
    except InputError as exc:
        raise DataError(str(exc)) from None

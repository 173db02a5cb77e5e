"""Reading and writing the JSONL records of ``rlvr verify``.

Input: one JSON object per line with ``task_type`` (str), ``completion`` (str), ``reference``
(math: answer string or number; code: dict), optional ``id``, ``prompt``, ``category``,
``source``. Output: one JSON object per input record, same order. The general file I/O (JSONL
reading, atomic writes, standard JSON) is :mod:`rlvr.io`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlvr.io import InputError, parse_jsonl_object, text_lines
from rlvr.rewards.code_reference import reference_problem
from rlvr.rewards.registry import VERIFIERS
from rlvr.rewards.types import RewardResult


@dataclass(frozen=True)
class VerifyRecord:
    """One input line of ``rlvr verify``. ``line`` is 1-based."""

    line: int
    id: str
    task_type: str
    completion: str
    reference: Any
    category: str | None = None
    source: str | None = None


def _expect(value: Any, kinds: tuple[type, ...], field: str, path, line: int) -> None:
    if not isinstance(value, kinds) or isinstance(value, bool):
        expected = " or ".join(k.__name__ for k in kinds)
        raise InputError(path, line, f"field '{field}': expected {expected}, got "
                                     f"{type(value).__name__} {json.dumps(value)[:60]}")


def parse_record(text: str, path: str | os.PathLike, line: int, known: set[str]) -> VerifyRecord:
    """Validate one JSONL line. Raises :class:`InputError` naming the line and field."""
    obj = parse_jsonl_object(text, path, line)
    for field in ("task_type", "completion", "reference"):
        if field not in obj or obj[field] is None:
            raise InputError(path, line, f"missing required field '{field}'")
    _expect(obj["task_type"], (str,), "task_type", path, line)
    if obj["task_type"] not in known:
        raise InputError(path, line, f"field 'task_type': unknown task type "
                                     f"{obj['task_type']!r}; known: {', '.join(sorted(known))} "
                                     f"(a plugin module registers more: --plugins MODULE)")
    _expect(obj["completion"], (str,), "completion", path, line)
    reference = obj["reference"]
    if obj["task_type"] == "code":
        _expect(reference, (dict,), "reference", path, line)
        problem = reference_problem(reference)
        if problem is not None:
            field, message = problem
            name = f"reference.{field}" if field else "reference"
            raise InputError(path, line, f"field '{name}': {message}")
    elif isinstance(reference, (int, float)) and not isinstance(reference, bool):
        reference = json.dumps(reference)
    else:
        _expect(reference, (str, dict, list), "reference", path, line)
    for field in ("id", "category", "source"):
        if obj.get(field) is not None:
            _expect(obj[field], (str, int), field, path, line)
    return VerifyRecord(
        line=line,
        id=str(obj.get("id", line)),
        task_type=obj["task_type"],
        completion=obj["completion"],
        reference=reference,
        category=None if obj.get("category") is None else str(obj["category"]),
        source=None if obj.get("source") is None else str(obj["source"]),
    )


def iter_records(path: str | os.PathLike) -> Iterator[VerifyRecord]:
    """The records of a JSONL file one at a time, validated as they are read (blank lines
    skipped): memory holds one line, whatever the file's size.

    Raises:
        InputError: a bad line (when it is reached).
        OSError: the file cannot be read.
    """
    known = set(VERIFIERS.names())
    for line_no, text in text_lines(path):
        if text.strip():
            yield parse_record(text, path, line_no, known)


def check_records(path: str | os.PathLike) -> Counter:
    """Validate every record of a JSONL file before any work starts, keeping none: the number
    of records per task type.

    Raises:
        InputError: the first bad line (naming it and the field).
        OSError: the file cannot be read.
    """
    return Counter(record.task_type for record in iter_records(path))


def read_records(path: str | os.PathLike) -> list[VerifyRecord]:
    """Read and validate every record of a JSONL file before any work starts.

    Blank lines are skipped. Raises :class:`InputError` (first bad line) or ``OSError``.
    """
    return list(iter_records(path))


def output_row(record: VerifyRecord, result: RewardResult) -> dict[str, Any]:
    """The output object of one record: id, reward, components, status, extracted, category,
    plus method, detail and seconds for tracing."""
    return {
        "id": record.id,
        "reward": round(result.reward, 6),
        "components": result.components,
        "status": result.status.value,
        "extracted": result.extracted,
        "category": record.category,
        "source": record.source,
        "method": result.method,
        "detail": result.detail,
        "seconds": round(result.seconds, 6),
    }

"""Load train / validation :class:`~rlvr.records.Task` lists for a run's ``data`` section.

File sources read a local path (the hub is not reachable offline):
- ``gsm8k``: ``question`` / ``answer`` records; the reference is the whole answer (the math
  verifier reads its ``#### N``); the worked solution for SFT is the answer with GSM8K's
  calculator notes ``<<48/2=24>>`` removed.
- ``math500``: ``problem`` / ``solution`` / ``answer``.
- ``jsonl``: the project's task record format (``rlvr.records.Task`` fields).
- ``mbpp``: MBPP code tasks (:mod:`rlvr.tasks.code`); ``path`` is ``mbpp.jsonl`` (full set),
  ``sanitized-mbpp.json`` (sanitized set) or their directory (full set). Train = task ids
  601-974, validation = 511-600 (the MBPP README's splits); the test ids are never loaded here.
- ``humaneval``: HumanEval code tasks; ``path`` is ``HumanEval.jsonl`` or its directory.
  HumanEval has no train split (it is an evaluation set): validation is a seeded hold-out of
  ``val_size`` problems and training uses the rest, disjoint from it, as for ``jsonl``. Use it
  for pipeline checks and experiments only; numbers from such a run are not HumanEval scores.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from rlvr.records import RecordError, Task

_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")


class DataError(ValueError):
    """Task data could not be loaded; the message names the file, line and field."""


def gsm8k_solution(answer: str) -> str:
    """GSM8K answer text in the target output format: calculator notes removed, the final
    ``#### N`` line kept (with thousands separators dropped)."""
    text = _CALCULATOR_NOTE.sub("", answer)
    head, _, final = text.rpartition("####")
    return f"{head.rstrip()}\n#### {final.strip().replace(',', '')}"


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    from rlvr.rewards.records_io import InputError, jsonl_objects

    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return jsonl_objects(path)
    except InputError as exc:
        raise DataError(str(exc)) from None


def _field(obj: dict, name: str, path: Path, line: int) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path}:{line}: field '{name}': expected a non-empty string")
    return value


def load_gsm8k(path: Path, split: str) -> list[Task]:
    """GSM8K records from ``path`` (a file, or a directory holding ``train.jsonl`` /
    ``test.jsonl``; validation uses ``test.jsonl``)."""
    if path.is_dir():
        path = path / ("train.jsonl" if split == "train" else "test.jsonl")
    tasks = []
    for line, obj in _read_jsonl(path):
        answer = _field(obj, "answer", path, line)
        if "####" not in answer:
            raise DataError(f"{path}:{line}: field 'answer': no final '#### N' line")
        tasks.append(Task(id=f"gsm8k-{path.stem}-{line}", prompt=_field(obj, "question", path,
                          line), reference=answer, task_type="math", source="gsm8k",
                          category="gsm8k", solution=gsm8k_solution(answer)))
    return tasks


def load_math500(path: Path, split: str) -> list[Task]:
    """MATH-500 records (``problem``, ``solution``, ``answer``, ``subject``, ``level``)."""
    if path.is_dir():
        path = path / "test.jsonl"
    return [Task(id=str(obj.get("unique_id", f"math500-{line}")),
                 prompt=_field(obj, "problem", path, line),
                 reference=_field(obj, "answer", path, line), task_type="math", source="math500",
                 category=str(obj.get("subject", "math")), difficulty=str(obj.get("level", "")) or None,
                 solution=obj.get("solution"))
            for line, obj in _read_jsonl(path)]


def load_task_file(path: Path, task_type: str | None = None) -> list[Task]:
    """Tasks in the project's JSONL task format. ``task_type``: every task must be of this
    type (``data.source: logic`` reads logic tasks only). Raises :class:`DataError` naming the
    line."""
    tasks = []
    for line, obj in _read_jsonl(path):
        try:
            task = Task.from_dict(obj)
        except RecordError as exc:
            raise DataError(f"{path}:{line}: {exc}") from None
        if task_type is not None and task.task_type != task_type:
            raise DataError(f"{path}:{line}: task_type {task.task_type!r}, expected "
                            f"{task_type!r} (data.source: jsonl reads tasks of any type)")
        tasks.append(task)
    return tasks


def _hold_out(tasks: list[Task], path: Path, data, seed: int) -> tuple[list[Task], list[Task]]:
    """Seeded shuffle, then ``val_size`` tasks for validation and the rest (capped) for
    training; the two are disjoint."""
    tasks = list(tasks)
    random.Random(seed).shuffle(tasks)
    if len(tasks) <= data.val_size:
        raise DataError(f"{path}: {len(tasks)} tasks, need more than data.val_size="
                        f"{data.val_size}")
    return tasks[data.val_size:][: data.train_size], tasks[: data.val_size]


def load_tasks(data, seed: int) -> tuple[list[Task], list[Task]]:
    """``(train, validation)`` task lists for a :class:`rlvr.train.config.DataConfig`.

    ``arithmetic`` and ``logic`` are generated from ``data.mixture`` (train and validation
    puzzles disjoint), or, with ``data.path``, read from that task file (e.g. written by
    ``rlvr data generate``; every task must be of the source's task type) and held out like
    ``jsonl``.

    Sizes are capped by ``data.train_size`` / ``data.val_size``; file sources are shuffled
    with ``seed`` before the cap (deterministically). For ``jsonl`` and ``humaneval`` the
    validation set is a seeded hold-out of ``val_size`` tasks from the file (so is ``math500``'s,
    a single evaluation file); ``mbpp`` uses its
    train (601-974) and validation (511-600) ids.

    Raises:
        DataError: missing file, malformed record, or too few tasks.
    """
    if data.source in ("arithmetic", "logic") and not data.path:
        if data.source == "arithmetic":
            from rlvr.tasks.arithmetic import generate
        else:
            from rlvr.tasks.logic import generate_logic as generate

        return (generate(data.mixture, data.train_size, seed=seed, split="train"),
                generate(data.mixture, data.val_size, seed=seed + 1, split="validation"))
    path = Path(data.path)
    if not path.exists():
        raise DataError(f"data.path: {path} does not exist")
    if data.source == "jsonl":
        return _hold_out(load_task_file(path), path, data, seed)
    if data.source in ("arithmetic", "logic"):  # a file of generated tasks (`rlvr data generate`)
        expected = "math" if data.source == "arithmetic" else "logic"
        return _hold_out(load_task_file(path, expected), path, data, seed)
    if data.source == "humaneval":
        from rlvr.tasks.code import load_humaneval

        return _hold_out(load_humaneval(path), path, data, seed)
    if data.source == "mbpp":
        from rlvr.tasks.code import load_mbpp

        train, val = load_mbpp(path, "train"), load_mbpp(path, "validation")
        if not train or not val:
            raise DataError(f"{path}: no MBPP tasks in the {'train' if not train else 'validation'}"
                            " split (task ids 601-974 / 511-600)")
        random.Random(seed).shuffle(train)
        random.Random(seed + 1).shuffle(val)
        return train[: data.train_size], val[: data.val_size]
    if data.source == "math500":  # one evaluation file: a seeded, disjoint hold-out
        return _hold_out(load_math500(path, "test"), path, data, seed)
    train, val = load_gsm8k(path, "train"), load_gsm8k(path, "validation")
    random.Random(seed).shuffle(train)
    random.Random(seed + 1).shuffle(val)
    return train[: data.train_size], val[: data.val_size]

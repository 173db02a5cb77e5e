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
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from rlvr.io import InputError, check_prompt, input_limits
from rlvr.records import RecordError, Task
from rlvr.tasks.files import DataError
from rlvr.tasks.files import read_task_jsonl as _read_jsonl
from rlvr.tasks.registry import in_process, task_source

_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")


def gsm8k_solution(answer: str) -> str:
    """GSM8K answer text in the target output format: calculator notes removed, the final
    ``#### N`` line kept (with thousands separators dropped)."""
    text = _CALCULATOR_NOTE.sub("", answer)
    head, _, final = text.rpartition("####")
    return f"{head.rstrip()}\n#### {final.strip().replace(',', '')}"


def _field(obj: dict, name: str, path: Path, line: int) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"{path}:{line}: field '{name}': expected a non-empty string")
    return value


def _prompt(obj: dict, name: str, path: Path, line: int) -> str:
    """The prompt field ``name``: a non-empty string within ``data.max_prompt_chars``."""
    try:
        return check_prompt(_field(obj, name, path, line), path, line, name)
    except InputError as exc:
        raise DataError(str(exc)) from None


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
        tasks.append(Task(id=f"gsm8k-{path.stem}-{line}", prompt=_prompt(obj, "question", path,
                          line), reference=answer, task_type="math", source="gsm8k",
                          category="gsm8k", solution=gsm8k_solution(answer)))
    return tasks


def load_math500(path: Path, split: str) -> list[Task]:
    """MATH-500 records (``problem``, ``solution``, ``answer``, ``subject``, ``level``)."""
    if path.is_dir():
        path = path / "test.jsonl"
    return [Task(id=str(obj.get("unique_id", f"math500-{line}")),
                 prompt=_prompt(obj, "problem", path, line),
                 reference=_field(obj, "answer", path, line), task_type="math", source="math500",
                 category=str(obj.get("subject", "math")),
                 difficulty=str(obj.get("level", "")) or None,
                 solution=obj.get("solution"))
            for line, obj in _read_jsonl(path)]


# The task types a verifier is registered for, while :func:`load_tasks` runs with them: a task
# module never imports the reward registry (importing it registers the reward built-ins), so
# the layer above (the run, ``rlvr eval``) passes the names down.
_KNOWN_TYPES: ContextVar[frozenset[str] | None] = ContextVar("rlvr_known_task_types",
                                                             default=None)


@contextmanager
def known_task_types(names: Collection[str] | None) -> Iterator[None]:
    """Within the block, a task file a source reads with tasks of any type (``jsonl``) must
    hold only tasks of these types (:func:`registered_task_types`); None: no check."""
    token = _KNOWN_TYPES.set(None if names is None else frozenset(names))
    try:
        yield
    finally:
        _KNOWN_TYPES.reset(token)


def registered_task_types() -> frozenset[str] | None:
    """The task types set by the enclosing :func:`known_task_types`, or None outside one."""
    return _KNOWN_TYPES.get()


def load_task_file(path: Path, task_type: str | None = None,
                   known_types: Collection[str] | None = None) -> list[Task]:
    """Tasks in the project's JSONL task format.

    Args:
        path: the file.
        task_type: every task must be of this type (``data.source: logic`` reads logic tasks
            only).
        known_types: every task's type must be one of these (the registered task types), so
            that a task no verifier can score is refused before any model is loaded.

    Raises:
        DataError: naming the file and line.
    """
    tasks = []
    for line, obj in _read_jsonl(path):
        try:
            task = Task.from_dict(obj)
            check_prompt(task.prompt, path, line)
        except RecordError as exc:
            raise DataError(f"{path}:{line}: {exc}") from None
        except InputError as exc:
            raise DataError(str(exc)) from None
        if task_type is not None and task.task_type != task_type:
            raise DataError(f"{path}:{line}: task_type {task.task_type!r}, expected "
                            f"{task_type!r} (data.source: jsonl reads tasks of any type)")
        if known_types is not None and task.task_type not in known_types:
            raise DataError(unknown_task_type(task.task_type, known_types, f"{path}:{line}: "))
        tasks.append(task)
    return tasks


def unknown_task_type(task_type: str, known: Collection[str], where: str = "") -> str:
    """The message for a task type no verifier is registered for: names it, the registered
    ones and how to add one."""
    return (f"{where}task_type {task_type!r} has no registered verifier; registered: "
            f"{', '.join(sorted(known))} (a plugin module registers one with "
            f"@register_verifier: reward.plugins of a run config, rlvr eval --plugins)")


DEFAULT_VAL_SIZE = 200  # validation problems when data.val_size is unset
HOLD_OUT_FRACTION = 0.2  # the most of one file an unset data.val_size holds out


def _hold_out(tasks: list[Task], path: Path, data, seed: int,
              log: Callable[[str], None] | None) -> tuple[list[Task], list[Task]]:
    """Seeded shuffle, then ``val_size`` tasks for validation and the rest for training; the
    two are disjoint. An unset ``val_size`` holds out :data:`DEFAULT_VAL_SIZE` tasks, or a
    fifth of a smaller file (said through ``log``); a set one exactly that many."""
    tasks = list(tasks)
    random.Random(seed).shuffle(tasks)
    size = data.val_size
    if size is None:
        size = min(DEFAULT_VAL_SIZE, int(len(tasks) * HOLD_OUT_FRACTION))
        if size < 1:
            raise DataError(f"{path}: {len(tasks)} task(s), too few to hold out a validation "
                            f"set: give a separate held-out file as data.val_path")
        if size < DEFAULT_VAL_SIZE and log is not None:
            log(f"data: {path} has {len(tasks)} tasks: holding out {size} "
                f"({HOLD_OUT_FRACTION:.0%}) for validation and training on {len(tasks) - size} "
                f"(data.val_size unset: {DEFAULT_VAL_SIZE}, or a fifth of a smaller file); "
                f"set data.val_size, or give a separate held-out file as data.val_path")
    elif len(tasks) <= size:
        raise DataError(f"{path}: {len(tasks)} tasks, need more than data.val_size={size} to "
                        f"hold out {size} for validation and train on the rest: lower "
                        f"data.val_size, or give a separate held-out file as data.val_path")
    return tasks[size:], tasks[:size]


def _file_tasks(source: str, path: Path, split: str | None) -> list[Task]:
    """Every task of ``path`` in ``source``'s format, in file order (``split``: the part of a
    source's own splits to read, ``None``: the whole file; :meth:`TaskSource.read`)."""
    return task_source(source).read(path, split)


def _validation_file(data) -> list[Task]:
    """Every task of ``data.val_path`` (read as the source reads ``path``; a GSM8K directory:
    its test.jsonl), in file order, the first ``data.val_size`` when that is set."""
    path = Path(data.val_path)
    if not path.exists():
        raise DataError(f"data.val_path: {path} does not exist")
    tasks = _file_tasks(data.source, path, None)  # a GSM8K directory: its test.jsonl
    if not tasks:
        raise DataError(f"data.val_path: {path} holds no tasks")
    # data.val_size caps the file; a file smaller than a preset's val_size is used whole
    return tasks[: data.val_size] if data.val_size else tasks


def _without(train: list[Task], val: list[Task], data,
             log: Callable[[str], None] | None) -> list[Task]:
    """``train`` minus the tasks also in the validation file (same id or the same prompt), so
    that validation stays held out; says how many through ``log``."""
    ids, prompts = {t.id for t in val}, {t.prompt for t in val}
    kept = [t for t in train if t.id not in ids and t.prompt not in prompts]
    if len(kept) < len(train) and log is not None:
        dropped = len(train) - len(kept)
        log(f"data: {dropped} training task{'s are' if dropped != 1 else ' is'} also in "
            f"data.val_path {data.val_path}: left out of training")
    return kept


def load_tasks(data, seed: int, log: Callable[[str], None] | None = None, *,
               known_types: Collection[str] | None = None) -> tuple[list[Task], list[Task]]:
    """:func:`_load_tasks` under the data section's input limits (``data.max_line_bytes``,
    ``data.max_prompt_chars``: :func:`rlvr.io.input_limits`); its docstring says the rest.
    ``known_types``: the registered task types (``rlvr.rewards.registry.VERIFIERS.names()``),
    which every task of a file of any task type must have (:func:`known_task_types`)."""
    with input_limits(max_line_bytes=getattr(data, "max_line_bytes", None),
                      max_prompt_chars=getattr(data, "max_prompt_chars", None)), \
            known_task_types(known_types):
        return _load_tasks(data, seed, log)


def _load_tasks(data, seed: int, log: Callable[[str], None] | None = None
                ) -> tuple[list[Task], list[Task]]:
    """``(train, validation)`` task lists for a :class:`rlvr.train.config.DataConfig`.

    ``arithmetic`` and ``logic`` are generated from ``data.mixture`` (training problems from
    ``data.train_mixture`` when set; train and validation puzzles disjoint), or, with
    ``data.path``, read from that task file (e.g. written by ``rlvr data generate``; every task
    must be of the source's task type) and held out like ``jsonl``.

    Validation: with ``data.val_path``, every task of that file in file order (the first
    ``val_size`` when set), and training tasks also in it (same id or prompt) are left out;
    otherwise ``gsm8k`` (test.jsonl of a directory) and ``mbpp`` (ids 511-600, train
    601-974) use their own validation split and generated sources their validation puzzles
    (``val_size`` of them, default 200), and the single-file sources (``jsonl``, ``math500``,
    ``humaneval``, task files of ``arithmetic`` / ``logic``) a seeded hold-out of ``val_size``
    tasks, disjoint from training (unset: 200, or a fifth of a file of fewer than 1000 tasks,
    said through ``log``). Training is capped at ``data.train_size``; file sources are
    shuffled with ``seed`` before a cap (deterministically).

    Args:
        data: the data section (one source).
        seed: shuffles and generators.
        log: called with a note when the hold-out is smaller than the default or training
            tasks are left out because the validation file holds them.

    Raises:
        DataError: missing file, malformed record, or too few tasks.
    """
    source = task_source(data.source)
    val = _validation_file(data) if data.val_path else None
    if in_process(data):
        train = source.generate(data.train_mixture or data.mixture, data.train_size, seed=seed,
                                split="train")
        if val is None:
            return train, source.generate(data.mixture, data.val_size or DEFAULT_VAL_SIZE,
                                          seed=seed + 1, split="validation")
        return _without(train, val, data, log), val
    path = Path(data.path)
    if not path.exists():
        raise DataError(f"data.path: {path} does not exist")
    if source.own_splits:  # their own train and validation splits (GSM8K, MBPP)
        train = _file_tasks(data.source, path, "train")
        random.Random(seed).shuffle(train)
        if val is None:
            val = _file_tasks(data.source, path, "validation")
            random.Random(seed + 1).shuffle(val)
            val = val[: data.val_size or DEFAULT_VAL_SIZE]
        if source.empty_split and (not train or not val):
            raise DataError(f"{path}: " + source.empty_split.format(
                split="train" if not train else "validation"))
    else:
        tasks = _file_tasks(data.source, path, None)
        if val is None:
            train, val = _hold_out(tasks, path, data, seed, log)
        else:
            train = list(tasks)
            random.Random(seed).shuffle(train)
    if data.val_path:
        train = _without(train, val, data, log)
    return train[: data.train_size], val

"""Code task sources: HumanEval and MBPP records as :class:`~rlvr.records.Task` records.

Every task has ``task_type="code"`` and a ``reference`` in the ``code`` verifier's format
(:mod:`rlvr.rewards.code`):

- HumanEval (``HumanEval.jsonl``, 164 problems): ``{"entry_point", "test", "prompt"}``. The
  verifier puts the prompt (signature + docstring, plus any helpers it defines) before the
  completion, so a full function definition and a bare body both work. There is no train
  split: HumanEval is an evaluation set.
- MBPP full (``mbpp.jsonl``, 974) and sanitized (``sanitized-mbpp.json``, 427):
  ``{"entry_point", "tests": [assert, ...], "setup_code"}``. ``setup_code`` is the full set's
  ``test_setup_code`` or the sanitized set's ``test_imports`` joined by newlines. The entry
  point is derived from the reference code and the tests (:func:`mbpp_entry_point`). Splits
  follow the MBPP README by task id (:func:`mbpp_split`): ``prompt`` 1-10, ``test`` 11-510,
  ``validation`` 511-600, ``train`` 601-974.

Prompts ask for the solution in one fenced ```` ```python ```` block (what the ``code_block``
format rule rewards). MBPP prompts give the task text and the first test assert as a usage
example (as the MBPP paper does; it also fixes the function name and signature), HumanEval
prompts the signature and docstring. ``solution`` is the reference code in a ```` ```python ````
fence, for SFT: the whole function for HumanEval (prompt + canonical body).

Malformed input raises :class:`~rlvr.tasks.files.DataError` naming the file, the line (JSONL)
or array index (JSON) and the field.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import warnings
from pathlib import Path
from typing import Any

from rlvr.io import json_value, prompt_problem
from rlvr.records import RecordError, Task
from rlvr.tasks.files import DataError
from rlvr.tasks.files import read_task_jsonl as _read_jsonl

HUMANEVAL_FILE = "HumanEval.jsonl"
MBPP_FILE = "mbpp.jsonl"
MBPP_SANITIZED_FILE = "sanitized-mbpp.json"

#: MBPP splits by task id, from the MBPP README: name -> inclusive (first, last) id.
MBPP_SPLITS: dict[str, tuple[int, int]] = {
    "prompt": (1, 10),
    "test": (11, 510),
    "validation": (511, 600),
    "train": (601, 974),
}

#: The answer-format request that ends every code prompt.
CODE_ANSWER_FORMAT = (
    "Write the complete solution as Python code in a single ```python code block."
)

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.MULTILINE)


# ----------------------------------------------------------------------------- prompts, fences


def python_fence(code: str) -> str:
    """``code`` in a ```` ```python ```` fence (line endings normalised, trailing space cut)."""
    body = code.replace("\r\n", "\n").replace("\r", "\n").rstrip()
    return f"```python\n{body}\n```"


def mbpp_prompt(text: str, example_test: str) -> str:
    """The prompt of an MBPP task: the task text, one test assert as a usage example, and the
    request for a fenced python solution."""
    return (f"{text.strip()}\nYour code should pass this test:\n\n{example_test.strip()}\n\n"
            f"{CODE_ANSWER_FORMAT}")


def humaneval_prompt(prompt: str) -> str:
    """The prompt of a HumanEval task: the signature and docstring to complete, and the
    request for a fenced python solution."""
    return ("Complete the following Python function.\n\n"
            f"{python_fence(prompt)}\n\n{CODE_ANSWER_FORMAT} Include the signature.")


# --------------------------------------------------------------------------------- entry point


def _parse(source: str) -> ast.Module:
    # Dataset code has invalid escapes ("\d" in plain strings): not ours to warn about.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def _called_names(tests: list[str]) -> list[str]:
    """Names called directly (``name(...)``) in the tests, in source order, without repeats."""
    seen: list[str] = []
    for test in tests:
        try:
            tree = _parse(test.strip())
        except SyntaxError:
            continue
        calls = [n for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        calls.sort(key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            if call.func.id not in seen:
                seen.append(call.func.id)
    return seen


def _defined_names(code: str) -> tuple[list[str], list[str]]:
    """Top-level ``(functions, classes)`` defined by ``code`` (regex fallback for functions
    when the code does not parse)."""
    try:
        tree = _parse(code)
    except (SyntaxError, ValueError):
        return _DEF.findall(code), []
    funcs = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    return funcs, classes


def mbpp_entry_point(code: str, tests: list[str]) -> str | None:
    """The function under test of an MBPP record.

    The first name the tests call that the reference code defines as a top-level function;
    else such a class; else the first non-builtin name the tests call; else the last function
    the code defines. ``None`` if there is none of these.
    """
    funcs, classes = _defined_names(code)
    called = _called_names(tests)
    for pool in (funcs, classes):
        for name in called:
            if name in pool:
                return name
    for name in called:
        if not hasattr(builtins, name):
            return name
    return funcs[-1] if funcs else None


def mbpp_split(task_id: int) -> str:
    """The MBPP split of ``task_id``: ``prompt``, ``test``, ``validation`` or ``train``.

    Raises:
        ValueError: the id is outside 1-974.
    """
    for name, (lo, hi) in MBPP_SPLITS.items():
        if lo <= task_id <= hi:
            return name
    raise ValueError(f"MBPP task_id {task_id} is outside 1-974 (no split)")


# ------------------------------------------------------------------------------------- reading


def _where(path: Path, line: int | None, index: int | None) -> str:
    if line is not None:
        return f"{path}:{line}"
    return f"{path}: record [{index}]"


def _str_field(obj: dict, name: str, where: str, *, required: bool = True,
               nonempty: bool = True) -> str:
    value = obj.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        got = "missing" if name not in obj else f"got {type(value).__name__}"
        raise DataError(f"{where}: field '{name}': expected a string ({got})")
    if nonempty and not value.strip():
        raise DataError(f"{where}: field '{name}': expected a non-empty string")
    return value


def _str_list(obj: dict, name: str, where: str, *, required: bool = True) -> list[str]:
    value = obj.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        got = "missing" if name not in obj else f"got {type(value).__name__}"
        raise DataError(f"{where}: field '{name}': expected a list of strings ({got})")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise DataError(f"{where}: field '{name}[{i}]': expected a non-empty string, "
                              f"got {json.dumps(item)[:60]}")
    if required and not value:
        raise DataError(f"{where}: field '{name}': expected at least one test")
    return value


def _task_id(obj: dict, where: str) -> int:
    value = obj.get("task_id")
    if isinstance(value, bool) or not isinstance(value, int):
        got = "missing" if "task_id" not in obj else f"got {json.dumps(value)[:40]}"
        raise DataError(f"{where}: field 'task_id': expected an integer ({got})")
    if not MBPP_SPLITS["prompt"][0] <= value <= MBPP_SPLITS["train"][1]:
        raise DataError(f"{where}: field 'task_id': {value} is outside MBPP's 1-974")
    return value


def _read_json_array(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        data = json_value(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg} at column "
                          f"{exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (byte {exc.start + 1}); save the file as "
                        f"UTF-8") from None
    except ValueError as exc:  # nested too deeply, too long a number
        raise DataError(f"{path}: {exc}") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of records, got "
                          f"{type(data).__name__}")
    for i, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise DataError(f"{path}: record [{i}]: expected a JSON object, got "
                              f"{type(obj).__name__}")
    return list(enumerate(data))


def _resolve(path: Path, default_name: str) -> Path:
    path = Path(path)
    return path / default_name if path.is_dir() else path


def _task(where: str, **fields: Any) -> Task:
    try:
        task = Task(**fields)
    except RecordError as exc:
        raise DataError(f"{where}: {exc}") from None
    problem = prompt_problem(task.prompt)
    if problem is not None:
        raise DataError(f"{where}: {problem}")
    return task


# ----------------------------------------------------------------------------------- HumanEval


def load_humaneval(path: str | Path) -> list[Task]:
    """All HumanEval problems in file order.

    Args:
        path: ``HumanEval.jsonl``, or a directory holding it.

    Raises:
        DataError: missing file, invalid JSON, or a field missing / of the wrong type
            (``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``),
            naming the file, line and field.
    """
    path = _resolve(Path(path), HUMANEVAL_FILE)
    tasks, seen = [], {}
    for line, obj in _read_jsonl(path):
        where = f"{path}:{line}"
        task_id = _str_field(obj, "task_id", where)
        prompt = _str_field(obj, "prompt", where)
        body = _str_field(obj, "canonical_solution", where)
        test = _str_field(obj, "test", where)
        entry = _str_field(obj, "entry_point", where)
        if not _IDENT.match(entry):
            raise DataError(f"{where}: field 'entry_point': {entry!r} is not a Python name")
        if "def check" not in test:
            raise DataError(f"{where}: field 'test': no 'def check(candidate)' in the test "
                              "source")
        if task_id in seen:
            raise DataError(f"{where}: field 'task_id': {task_id!r} repeats line "
                              f"{seen[task_id]}")
        seen[task_id] = line
        sep = "" if prompt.endswith("\n") else "\n"
        tasks.append(_task(
            where, id=task_id, prompt=humaneval_prompt(prompt),
            reference={"entry_point": entry, "test": test, "prompt": prompt},
            task_type="code", source="humaneval", category="humaneval",
            solution=python_fence(prompt + sep + body),
            metadata={"task_id": task_id, "entry_point": entry}))
    return tasks


# ---------------------------------------------------------------------------------------- MBPP


def _is_sanitized(path: Path) -> bool:
    return path.suffix == ".json"


def load_mbpp(path: str | Path, split: str | None = None) -> list[Task]:
    """MBPP problems (full or sanitized set) in file order, optionally one split only.

    Args:
        path: ``mbpp.jsonl`` (full set), ``sanitized-mbpp.json`` (sanitized set: a JSON array),
            or a directory (the full set's ``mbpp.jsonl`` in it is used).
        split: ``train``, ``validation``, ``test``, ``prompt`` or ``None`` (all).

    Raises:
        DataError: missing file, invalid JSON, a field missing / of the wrong type, a
            repeated task id, or a record whose entry point cannot be found, naming the file,
            line (JSONL) or array index (JSON) and field.
        ValueError: ``split`` is not one of the split names.
    """
    if split is not None and split not in MBPP_SPLITS:
        raise ValueError(f"MBPP split {split!r} is unknown; choose from {sorted(MBPP_SPLITS)}")
    path = _resolve(Path(path), MBPP_FILE)
    sanitized = _is_sanitized(path)
    rows = ([(None, i, obj) for i, obj in _read_json_array(path)] if sanitized
            else [(line, None, obj) for line, obj in _read_jsonl(path)])
    source = "mbpp-sanitized" if sanitized else "mbpp"
    tasks, seen = [], {}
    for line, index, obj in rows:
        where = _where(path, line, index)
        task_id = _task_id(obj, where)
        task_split = mbpp_split(task_id)
        text = _str_field(obj, "prompt" if sanitized else "text", where)
        code = _str_field(obj, "code", where)
        tests = [t.strip() for t in _str_list(obj, "test_list", where)]
        if sanitized:
            setup = "\n".join(s.strip() for s in _str_list(obj, "test_imports", where,
                                                           required=False))
            challenge: list[str] = []
        else:
            setup = _str_field(obj, "test_setup_code", where, required=False, nonempty=False)
            challenge = _str_list(obj, "challenge_test_list", where, required=False)
        setup = setup.replace("\r\n", "\n")
        entry = mbpp_entry_point(code.replace("\r\n", "\n"), tests)
        if entry is None:
            raise DataError(f"{where}: field 'test_list': no function call to test (cannot "
                            "derive the entry point from 'code' and 'test_list')")
        if task_id in seen:
            raise DataError(f"{where}: field 'task_id': {task_id} repeats {seen[task_id]}")
        seen[task_id] = f"line {line}" if line is not None else f"record [{index}]"
        if split is not None and task_split != split:
            continue
        metadata: dict[str, Any] = {"task_id": task_id, "split": task_split}
        if challenge:
            metadata["challenge_tests"] = [t.strip() for t in challenge]
        tasks.append(_task(
            where, id=f"{source}/{task_id}", prompt=mbpp_prompt(text, tests[0]),
            reference={"entry_point": entry, "tests": tests, "setup_code": setup},
            task_type="code", source=source, category=source,
            solution=python_fence(code), metadata=metadata))
    return tasks

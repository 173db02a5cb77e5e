"""The shape a code task's reference must have, checked without the sandbox: ``rlvr verify``
checks every record's reference before any scoring (and imports this at start-up), the
``code`` verifier (:mod:`rlvr.rewards.code`) before grading."""

from __future__ import annotations

import json
from typing import Any


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


def reference_problem(reference: Any) -> tuple[str, str] | None:
    """The first problem of a code reference, as ``(field, message)`` (e.g.
    ``("tests[0]", "expected a string, got int 1")``), or None when it is well formed.

    Well formed: a dict with ``tests`` (a non-empty list of assert strings, or one string) or
    ``test`` (the source of ``check(candidate)``, a string); ``entry_point``, ``setup_code``
    and ``prompt`` are strings (or null) when present. ``rlvr verify`` rejects a record with a
    problem before any scoring; the ``code`` verifier gives such a reference an ``error``
    verdict.
    """
    if not isinstance(reference, dict):
        return "", f"expected a dict, got {_shown(reference)}"
    for name in ("entry_point", "setup_code", "prompt"):
        if reference.get(name) is not None and not isinstance(reference[name], str):
            return name, f"expected a string, got {_shown(reference[name])}"
    tests = reference.get("tests")
    if tests is not None:
        if isinstance(tests, str):
            tests = [tests]
        if not isinstance(tests, list):
            return "tests", f"expected a list of assert strings, got {_shown(tests)}"
        if not tests:
            return "tests", "expected at least one test, got an empty list"
        for i, item in enumerate(tests):
            if not isinstance(item, str):
                return f"tests[{i}]", f"expected a string, got {_shown(item)}"
        return None
    test = reference.get("test")
    if test is None:
        return "", "needs 'tests' (a list of asserts) or 'test' (the check(candidate) source)"
    if not isinstance(test, str):
        return "test", f"expected a string, got {_shown(test)}"
    return None

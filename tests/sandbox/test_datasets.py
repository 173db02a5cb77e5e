"""HumanEval / MBPP reference solutions through the code verifier.

Fast: a fixed sample of 20 HumanEval problems (canonical passes; ``pass`` / ``return None``
bodies fail). Slow (``-m slow``): all 164 HumanEval problems, all 974 MBPP problems, and all 427
sanitized-MBPP problems as the task loader builds them (``test_imports`` as setup code).
"""

from __future__ import annotations

import ast
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from sandbox_test_helpers import shared_path

from rlvr.rewards.code import grade_code
from rlvr.rewards.types import Status
from rlvr.tasks.code import load_mbpp

HUMANEVAL = shared_path("data", "humaneval", "HumanEval.jsonl")
MBPP = shared_path("data", "mbpp", "mbpp.jsonl")
MBPP_SANITIZED = shared_path("data", "mbpp", "sanitized-mbpp.json")


def _load(path):
    if not path.exists():
        pytest.skip(f"{path} not found (shared data absent)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _he_ref(p):
    return {"entry_point": p["entry_point"], "test": p["test"], "prompt": p["prompt"]}


def _grade_all(items, fn):
    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(fn, items))


def _check_humaneval(problems):
    good = _grade_all(problems, lambda p: grade_code(p["canonical_solution"], _he_ref(p)))
    bad = {p["task_id"]: g.verdict.detail for p, g in zip(problems, good)
           if g.verdict.status is not Status.correct}
    assert not bad, bad
    for body in ("    pass\n", "    return None\n"):
        res = _grade_all(problems, lambda p, body=body: grade_code(body, _he_ref(p)))
        wrongly = [p["task_id"] for p, g in zip(problems, res)
                   if g.verdict.status is Status.correct]
        assert not wrongly, (body, wrongly)


# Includes problems whose tests run inside the sandbox (2, 32, 38, 53, 151: loops, helpers).
SAMPLE = [0, 2, 7, 12, 22, 32, 38, 53, 57, 72, 80, 95, 101, 111, 123, 129, 136, 140, 151, 163]


def test_humaneval_sample():
    problems = _load(HUMANEVAL)
    _check_humaneval([problems[i] for i in SAMPLE])


def test_humaneval_fenced_full_function():
    p = _load(HUMANEVAL)[0]
    completion = "Sure:\n```python\n" + p["prompt"] + p["canonical_solution"] + "```\n"
    ref = {"entry_point": p["entry_point"], "test": p["test"]}  # no prompt: full code given
    assert grade_code(completion, ref).verdict.status is Status.correct


@pytest.mark.slow
def test_humaneval_all():
    _check_humaneval(_load(HUMANEVAL))


def mbpp_reference(r):
    """The verifier reference of an MBPP record (entry point = first function the tests call)."""
    entry = next(n.func.id for n in ast.walk(ast.parse(r["test_list"][0].strip()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    return {"entry_point": entry, "tests": r["test_list"], "setup_code": r["test_setup_code"]}


@pytest.mark.slow
def test_mbpp_all_reference_solutions():
    records = _load(MBPP)
    res = _grade_all(records, lambda r: grade_code("```python\n" + r["code"] + "\n```",
                                                   mbpp_reference(r)))
    failures = {r["task_id"]: (g.verdict.detail, g.grade.failures[:2] if g.grade else ())
                for r, g in zip(records, res) if g.verdict.status is not Status.correct}
    print(f"MBPP reference solutions passing: {len(records) - len(failures)}/{len(records)}")
    for tid, why in failures.items():
        print(f"  task {tid}: {why}")
    assert not failures, failures


@pytest.mark.slow
def test_mbpp_sanitized_all_reference_solutions():
    if not MBPP_SANITIZED.exists():
        pytest.skip(f"{MBPP_SANITIZED} not found (shared data absent)")
    tasks = load_mbpp(MBPP_SANITIZED)
    assert len(tasks) == 427
    res = _grade_all(tasks, lambda t: grade_code(t.solution, t.reference))
    failures = {t.metadata["task_id"]: (g.verdict.detail, g.grade.failures[:2] if g.grade else ())
                for t, g in zip(tasks, res) if g.verdict.status is not Status.correct}
    assert not failures, failures

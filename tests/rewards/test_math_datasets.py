"""Whole-dataset checks: GSM8K test (1319) and MATH-500 reference solutions.

A dataset's own worked solution must verify against its own answer (a verifier that rejects
references poisons training, R27), and a one-off change of the final number must be rejected.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlvr.rewards.math.verifier import reference_answer, verify_math
from rlvr.rewards.types import Status

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
GSM8K = DATA / "gsm8k" / "test.jsonl"
MATH500 = DATA / "math500" / "test.jsonl"

# MATH-500 records whose solution does not verify against the answer field (unique_id -> why).
MATH500_KNOWN = {}


def _load(path: Path) -> list[dict]:
    if not path.exists():
        pytest.skip(f"dataset not found: {path}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def test_gsm8k_reference_answer_extraction() -> None:
    assert reference_answer("She has 3 + 4 = 7 apples.\n#### 1,234") == "1,234"


def test_gsm8k_full_solutions_verify_and_off_by_one_fails() -> None:
    records = _load(GSM8K)
    assert len(records) == 1319
    failures = []
    for rec in records:
        answer = rec["answer"]
        if verify_math(answer, answer).status is not Status.correct:
            failures.append(("self", answer[-80:]))
        m = re.search(r"####\s*(-?[\d,]+)\s*$", answer)
        assert m, answer[-80:]
        changed = int(m.group(1).replace(",", "")) + 1
        wrong = answer[: m.start()] + f"#### {changed}"
        if verify_math(wrong, answer).status is not Status.wrong:
            failures.append(("off-by-one", wrong[-80:]))
    assert not failures, failures[:10]


def test_math500_solutions_verify() -> None:
    records = _load(MATH500)
    failures = []
    for rec in records:
        verdict = verify_math(rec["solution"], rec["answer"])
        if verdict.status is not Status.correct:
            failures.append((rec["unique_id"], rec["answer"], verdict.extracted, verdict.detail))
    for f in failures:
        print("MATH-500 exception:", *f)
    unexpected = [f for f in failures if f[0] not in MATH500_KNOWN]
    assert len(failures) <= 0.01 * len(records)
    assert not unexpected, unexpected

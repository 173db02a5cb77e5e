"""The shared labelled equivalence cases (``shared/cases/math_equivalence.jsonl``).

Each case is a (reference, response, expected) triple gathered from public graders' tests and
issue trackers plus synthetic reward-hacking and Chinese outputs. The verifier must reproduce the
expected verdict on >= 97% of the non-disputed cases and >= 94% of all cases. Cases it still gets
wrong are listed in ``KNOWN_FAILURES`` (strict xfail, so a fix is noticed) with the reason; this
dict is the only place case ids may appear: the verifier has no per-case rules.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr.rewards.math.verifier import verify_math
from rlvr.rewards.types import Status

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CASES_FILE = SHARED / "cases" / "math_equivalence.jsonl"

if not CASES_FILE.exists():
    pytest.skip(f"shared cases not found at {CASES_FILE}", allow_module_level=True)

CASES = [json.loads(line) for line in CASES_FILE.read_text(encoding="utf-8").splitlines()
         if line.strip()]

# id -> why our verdict differs from the label. Disputed cases (policy-dependent) first.
KNOWN_FAILURES = {
    "HEN-0002": "disputed: a bare list of roots is compared as a set by policy (order-free)",
    "MV-0029": "disputed: we read an inline $..$ answer spanning lines; the source does not",
    "MV-0128": "disputed: 0.33 for exact 1/3 is too coarse under the 9-significant-digit policy",
    "MV-0134": "disputed: 2.6667 for exact 8/3 is too coarse under the 9-significant-digit policy",
    "PRM-0001": "disputed: an unreduced fraction 2/4 is value-equal to 1/2 and accepted by policy",
    "PRM-0002": "disputed: 4/2 is value-equal to 2 and accepted by policy",
    "MV-0260": "two adjacent boxes with different values are read as two candidates (hedge); "
               "the source takes the last one",
}


def _correct(case: dict) -> bool:
    return verify_math(case["response"], case["reference"]).status is Status.correct


def _params():
    for case in CASES:
        marks = ()
        if case["id"] in KNOWN_FAILURES:
            marks = (pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[case["id"]]),)
        yield pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_case_verdict(case: dict) -> None:
    verdict = verify_math(case["response"], case["reference"])
    got = verdict.status is Status.correct
    assert got == case["expected"], (
        f"{case['id']} ({case['category']}): expected {case['expected']}, got {verdict.status} "
        f"extracted={verdict.extracted!r} detail={verdict.detail!r}"
    )


def test_known_failures_exist() -> None:
    ids = {c["id"] for c in CASES}
    assert set(KNOWN_FAILURES) <= ids


def test_aggregate_accuracy(capsys) -> None:
    right = Counter()
    total = Counter()
    for case in CASES:
        ok = _correct(case) == case["expected"]
        for key in ("all", case["category"]) + (() if case["disputed"] else ("non-disputed",)):
            total[key] += 1
            right[key] += ok
    with capsys.disabled():
        print()
        for key in sorted(total, key=lambda k: (k not in ("all", "non-disputed"), k)):
            print(f"  {key:28s} {right[key]:4d}/{total[key]:<4d} {right[key] / total[key]:7.1%}")
    assert right["all"] / total["all"] >= 0.94
    assert right["non-disputed"] / total["non-disputed"] >= 0.97

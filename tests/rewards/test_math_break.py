"""A third labelled set of the shared cases' kinds (tests/rewards/data/math_break.jsonl, in the
shared cases' format): 581 cases (``X-0001``..) constructed by a separate pass that
read only the labelling policy and MATH-500 / GSM8K reference formats, to find the *kinds* of
answers the verifier misjudged (173 of them, in 37 kinds), plus cases (``X-P1-``, ``X-P2-``,
``X-P3-``, ``X-P6-``) written with the fixes, each kind's accepted and still-rejected variants.
Cases the verifier still gets wrong are in ``KNOWN_FAILURES`` (strict xfail, so a fix is
noticed), keyed by id with the failure kind; the verifier has no per-case rules. A case with a
``status`` field must get that status exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.rewards.math.verifier import verify_math
from rlvr.rewards.types import Status

DATA = Path(__file__).with_name("data")


def _load(name: str) -> list[dict]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


CASES = _load("math_break.jsonl")

# id -> failure kind (the comment above each block says what the kind is)
KNOWN_FAILURES = {
    # B: a bare letter string (`abc` vs `cba`) is read as a word answer and compared as a word:
    # whether `abc` is a product or a word cannot be told from the string, and comparing words
    # as letter products would accept anagrams (`dog` for `god`). Letters joined by minus
    # signs (`p - q`, `a-b`) are algebra (fixed).
    "X-0410": "B",
    # AB (disputed): a one-element set against the value (`\{2\}` vs `x = 2`)
    "X-0523": "AB",
    "X-0524": "AB",
    # DISP (disputed, grading policy): the same value in two spellings read as two answers
    # ("1/4, or 25%": 25% may mean 25 or 0.25), a GSM8K closing computation without an answer
    # marker, a scaled three-part ratio
    "X-0526": "DISP",
    "X-0527": "DISP",
    "X-0534": "DISP",
    "X-0535": "DISP",
    "X-0570": "DISP",
}




def test_high_degree_inequality_is_solved_from_its_real_roots(monkeypatch) -> None:
    """Kind AJ: a polynomial inequality of high degree is solved from its real roots; sympy's
    general solver (``as_set`` / solveset: 20-40 s on this one, a timeout in the reward
    pipeline's 2 s bound) is never called."""
    import sympy

    def refuse(self):
        raise AssertionError("the general solver was called")

    monkeypatch.setattr(sympy.core.relational.Relational, "as_set", refuse)
    verdict = verify_math("\\boxed{x^{23} + 5x^{13} - 2x^{7} + 3x > 0}", "(0, \\infty)")
    assert verdict.status is Status.correct
    wrong = verify_math("\\boxed{x^{23} + 5x^{13} - 2x^{7} + 3x > 0}", "(1, \\infty)")
    assert wrong.status is Status.wrong



@pytest.mark.parametrize("case", [c for c in CASES if "status" in c], ids=lambda c: c["id"])
def test_break_case_status(case: dict) -> None:
    """A case with a ``status`` field must get exactly that status: a non-answer or a cut-off
    answer is ``unparsed`` (it feeds the parse-failure rate), not ``wrong``."""
    verdict = verify_math(case["response"], case["reference"])
    assert verdict.status.value == case["status"], (verdict.extracted, case["note"])


# A second probe: 702 cases (``Y-0001``..) in tests/rewards/data/math_break2.jsonl,
# constructed from the labelling policy and MATH-500 / GSM8K answer formats (formatting
# wrappers, unicode, repeating decimals, hedges in parentheses, null delimiters, ...).
CASES2 = _load("math_break2.jsonl")

# id -> failure kind (the comment above each block says what the kind is)
KNOWN_FAILURES2 = {
    # disputed: disputed (grading policy; see the probe report)
    "Y-0026": "disputed",
    "Y-0041": "disputed",
    "Y-0085": "disputed",
    "Y-0140": "disputed",
    "Y-0141": "disputed",
    "Y-0174": "disputed",
    "Y-0176": "disputed",
    "Y-0192": "disputed",
    "Y-0193": "disputed",
    "Y-0247": "disputed",
    "Y-0250": "disputed",
    "Y-0253": "disputed",
    "Y-0259": "disputed",
    "Y-0352": "disputed",
    "Y-0368": "disputed",
    "Y-0388": "disputed",
    "Y-1010": "disputed",
    "Y-1024": "disputed",
    "Y-1031": "disputed",
    "Y-1032": "disputed",
    "Y-1033": "disputed",
    "Y-1057": "disputed",
    "Y-1093": "disputed",
    "Y-1095": "disputed",
    "Y-1105": "disputed",
    "Y-1129": "disputed",
    "Y-1137": "disputed",
    "Y-1141": "disputed",
    "Y-1150": "disputed",
    "Y-2022": "disputed",
    "Y-2024": "disputed",
    "Y-2049": "disputed",
    "Y-2060": "disputed",
    "Y-2063": "disputed",
    "Y-2069": "disputed",
    "Y-2074": "disputed",
    "Y-2087": "disputed",
    "Y-2090": "disputed",
    "Y-2092": "disputed",
    "Y-3012": "disputed",
}



# A third probe: 494 cases (``Z-0001``..) in tests/rewards/data/math_break3.jsonl,
# constructed from the labelling policy, MATH-500 reference shapes and the ways real models
# write answers (think blocks, display boxes, Minerva / Llama / MetaMath closings, GSM8K '####',
# Chinese), plus reward-hacking attempts; the first 398 are the probe, the rest (``Z-0399``..)
# each fixed kind's accepted and still-rejected variants. Before the fixes 62 were misjudged
# (53 not disputed), in 15 kinds ZA-ZQ; now 10 (ZN and 9 disputed).
CASES3 = _load("math_break3.jsonl")

# id -> failure kind (the comment above each block says what the kind is)
KNOWN_FAILURES3 = {
    # fixed: ZA (a retraction after an option letter names the letter that counts), ZB (a
    # conditional or general alternative after the answer is a second answer), ZC (a value
    # denied after the marker, 答案不是6, is no answer), ZD (colour wrappers are typography), ZE
    # (a modulus after a residue, 42 \pmod{100}, is not a second value), ZG (a value denied
    # after the answer, '6, not 7' / 答案是6，不是7, is neither the answer nor a second one), ZH
    # (a retraction or hedge after the GSM8K '####' line; 'Wait, actually it is 20.'), ZI
    # (another value named a solution too after the answer, 'Also, x = -5 is a solution.')
    # fixed: ZF (a vector written with unit vectors i, j, k is compared with a column vector by
    # its components), ZJ (bold unit vectors were dropped as unit text: -7i + 16j + 5k was 14),
    # ZK (a restatement right after the answer, 'i.e. 20%', that the answer does not round to),
    # ZM (a hedge in Chinese brackets, 答案：3（或4）, was dropped as a note; 3（不是4） read 4),
    # ZP ('The correct option is B.' closing a longer response was no marker), ZO (\log_e is
    # the natural logarithm), ZQ (a hedge after the box in other words: '8 is another
    # possibility', "8 can't be ruled out", '(also 8 works)')
    # ZN: a point's name before its coordinates (P(1,2) for (1,2)) is read as a function call;
    # dropping a capital letter before a pair would reject an option letter with its value
    # ('B(1,2)' for B), which cannot be told apart without the reference's shape
    "Z-0483": "ZN",
    # disputed (grading policy): radians for a degree reference, dollars for cents, an option
    # letter before a text answer, a one-element set, struck-out values, a linear equation for
    # its root, a Python base prefix, spaced digits
    "Z-0123": "disputed",
    "Z-0172": "disputed",
    "Z-0183": "disputed",
    "Z-0220": "disputed",
    "Z-0303": "disputed",
    "Z-0321": "disputed",
    "Z-0322": "disputed",
    "Z-0330": "disputed",
    "Z-0395": "disputed",
}


def _params(cases: list[dict], known: dict[str, str]):
    """Each case, a strict xfail (reason: its failure kind, or "disputed") where listed."""
    for case in cases:
        marks = ()
        if case["id"] in known:
            kind = known[case["id"]]
            reason = "disputed" if kind == "disputed" else f"kind {kind}"
            marks = (pytest.mark.xfail(strict=True, reason=reason),)
        yield pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [*_params(CASES, KNOWN_FAILURES),
                                  *_params(CASES2, KNOWN_FAILURES2),
                                  *_params(CASES3, KNOWN_FAILURES3)])
def test_break_case(case: dict) -> None:
    verdict = verify_math(case["response"], case["reference"])
    assert (verdict.status is Status.correct) == case["expected"], (
        f"{case['category']}: {verdict.status.value} extracted={verdict.extracted!r} "
        f"detail={verdict.detail!r} note={case['note']}")

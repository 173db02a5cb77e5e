"""A third labelled set of the shared cases' kinds (581 cases, ``X-``), constructed in session 30
by a separate pass that read only the labelling policy and MATH-500 / GSM8K reference formats, to
find the *kinds* of answers the verifier misjudges (tests/rewards/data/math_break.jsonl, in the
shared cases' format). Cases the verifier still gets wrong are in ``KNOWN_FAILURES`` (strict
xfail, so a fix is noticed), keyed by id with the failure kind; the verifier has no per-case
rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.rewards.math.verifier import verify_math
from rlvr.rewards.types import Status

CASE_FILE = Path(__file__).with_name("data") / "math_break.jsonl"
CASES = [json.loads(line) for line in CASE_FILE.read_text(encoding="utf-8").splitlines()
         if line.strip()]

# id -> failure kind (the comment above each block says what the kind is)
KNOWN_FAILURES = {
    # A: Trailing `letter^n` after a coefficient (and a lone m/s/h/g/l after `digit space
    "X-0069": "A",
    "X-0070": "A",
    "X-0072": "A",
    "X-0073": "A",
    "X-0093": "A",
    "X-0094": "A",
    "X-0095": "A",
    "X-0396": "A",
    "X-0397": "A",
    "X-0398": "A",
    "X-0399": "A",
    "X-0400": "A",
    "X-0401": "A",
    "X-0402": "A",
    "X-0403": "A",
    "X-0404": "A",
    "X-0405": "A",
    # B: Letter-only expressions with spaces/hyphens (`p - q`, `a-b`, `abc`) are parsed a
    "X-0065": "B",
    "X-0406": "B",
    "X-0407": "B",
    "X-0408": "B",
    "X-0409": "B",
    "X-0410": "B",
    # C: A boxed relation with an empty left side (`\ge 3`, `> 3`, `\ne 3`) is read as th
    "X-0361": "C",
    "X-0412": "C",
    "X-0413": "C",
    "X-0414": "C",
    "X-0415": "C",
    # D: Qualifier words in `\text{}` or prose are dropped as units
    "X-0374": "D",
    "X-0417": "D",
    "X-0418": "D",
    "X-0419": "D",
    "X-0420": "D",
    "X-0421": "D",
    "X-0422": "D",
    "X-0423": "D",
    # E: Chinese scale suffix after Arabic digits (`2万`, `1.5亿`, `3万棵`) read as the bare 
    "X-0317": "E",
    "X-0424": "E",
    "X-0425": "E",
    "X-0426": "E",
    "X-0427": "E",
    "X-0559": "E",
    # F: `f^{-1}(x) = ...` / `g^{-1}(x) = ...` not recognised as a label naming the value
    "X-0115": "F",
    "X-0428": "F",
    "X-0429": "F",
    "X-0430": "F",
    # G: `\pm` inside one element of a set/list (`\{1\pm\sqrt5, -2\}`, `\{0, \pm 1\}`, `x
    "X-0129": "G",
    "X-0431": "G",
    "X-0432": "G",
    "X-0433": "G",
    "X-0434": "G",
    "X-0435": "G",
    # H: Set-builder notation `\{x \mid ...\}`, `\{x 
    # I: Angle-bracket vectors `\langle a, b \rangle` / `⟨a, b⟩` not read as tuples/vecto
    # J: Inequalities joined by 'and' are treated as a list (union) instead of a conjunct
    # K: An escaped dollar inside inline maths in a sentence (`pays $\$45$.`, `costs $\$1
    "X-0226": "K",
    "X-0446": "K",
    "X-0447": "K",
    "X-0448": "K",
    "X-0449": "K",
    # L: MC answer stated as subject ('Option E is correct.', 'Option (B) is the right on
    "X-0256": "L",
    "X-0450": "L",
    "X-0451": "L",
    "X-0452": "L",
    # M: Base-n numeral with parenthesised digits `(2516)_8` unparseable
    # N: Word answers with an article or in a pronoun sentence ('an ellipse', 'a parabola
    "X-0244": "N",
    "X-0457": "N",
    "X-0458": "N",
    "X-0459": "N",
    "X-0460": "N",
    "X-0461": "N",
    "X-0462": "N",
    # O: Hedge or retraction after the final box / answer tag / answer sentence ('But it 
    "X-0362": "O",
    "X-0464": "O",
    "X-0465": "O",
    "X-0466": "O",
    "X-0467": "O",
    "X-0468": "O",
    "X-0469": "O",
    "X-0470": "O",
    "X-0556": "O",
    "X-0557": "O",
    "X-0558": "O",
    # P: Answer sentence followed by a justification (', since ...', ' because ...', ', w
    "X-0471": "P",
    "X-0472": "P",
    "X-0473": "P",
    "X-0474": "P",
    "X-0475": "P",
    "X-0476": "P",
    "X-0477": "P",
    "X-0478": "P",
    "X-0479": "P",
    "X-0480": "P",
    "X-0481": "P",
    "X-0482": "P",
    "X-0483": "P",
    "X-0484": "P",
    # Q: A reference solution boxing the same value twice in two spellings (`15\frac{39}{
    "X-0486": "Q",
    "X-0487": "Q",
    "X-0488": "Q",
    # R: An expression with variables that is identically constant (`(x+1)^2-x^2-2x`, `\s
    # S: Square vs cubic imperial units not distinguished (`in^2` vs `in^3`, `ft^2` vs `f
    "X-0492": "S",
    "X-0493": "S",
    # T: Union of intervals written with 'or' (or ASCII U) not understood
    # U: Unicode vulgar fractions and superscripts (½ ¾ ⅓, x⁴, 10⁻³) not mapped
    # V: LaTeX `\degree` and `\textstyle` not normalised
    # W: Words for ℝ / ∅ (`\text{all real numbers}`, 'All real numbers.', `\text{no solut
    "X-0507": "W",
    "X-0508": "W",
    "X-0509": "W",
    "X-0510": "W",
    "X-0511": "W",
    "X-0512": "W",
    # X: ISO interval notation `]0, 1[`, `[0, 1[` not parsed
    # Y: Multiple-choice reference that carries the option text (`\text{(A) } 12`, `\text
    "X-0515": "Y",
    "X-0516": "Y",
    "X-0517": "Y",
    # Z: '**Final Answer**' header followed by a display-math block `$$ 42 $$` -> unparse
    "X-0519": "Z",
    "X-0520": "Z",
    "X-0521": "Z",
    # AA: Matrix written as a nested list `[[1, 2], [3, 4]]` not read as a matrix
    # AB: One-element set vs the value (`\{2\}` vs `x = 2`) (disputed)
    "X-0523": "AB",
    "X-0524": "AB",
    # AD: Number word + percent ('fifty percent') not parsed
    "X-0525": "AD",
    # AE: Full-width full stop '．' (U+FF0E, common in Chinese maths text) after the answer
    # AF: Set-operation names as a label (`A\cup B = \{1,2,3\}`, `A\cap B=\{1,2\}`) not re
    "X-0542": "AF",
    "X-0543": "AF",
    # AG: Doubled backslash (`\\cot`, `\\cup`, `\\emptyset`, `\\binom`) only undone for a 
    # AH: Unit lost inside an assignment
    "X-0551": "AH",
    "X-0552": "AH",
    "X-0553": "AH",
    "X-0554": "AH",
    # AK: Exact-vs-exact values compared numerically (40 digits, 1e-25 relative)
    # AL: Matrix power / inverse expressions (`M^{2}`, `M^{-1}`) not evaluated
    # AM: Inequalities sympy cannot solve (two variables, transcendental) compared only as
    # (X-0569 is fixed by the AM rule, but its reference `2^x > x^2` loses `> x^2` to the unit
    # stripping of kind A first: it is read as the value `2^x`)
    "X-0569": "AM",
    # DISP: Policy-dependent cases (same value in two spellings flagged as several answers; 
    "X-0526": "DISP",
    "X-0527": "DISP",
    "X-0534": "DISP",
    "X-0535": "DISP",
    "X-0570": "DISP",
}


def _params():
    for case in CASES:
        marks = ()
        if case["id"] in KNOWN_FAILURES:
            reason = f"kind {KNOWN_FAILURES[case['id']]}"
            marks = (pytest.mark.xfail(strict=True, reason=reason),)
        yield pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_break_case(case: dict) -> None:
    verdict = verify_math(case["response"], case["reference"])
    assert (verdict.status is Status.correct) == case["expected"], (
        f"{case['category']}: {verdict.status.value} extracted={verdict.extracted!r} "
        f"detail={verdict.detail!r} note={case['note']}")


def test_high_degree_inequality_is_fast() -> None:
    """Kind AJ: a polynomial inequality of high degree is solved from its real roots, not by
    sympy's solveset (20-40 s, a timeout in the reward pipeline's 2 s bound)."""
    import time
    start = time.perf_counter()
    verdict = verify_math("\\boxed{x^{23} + 5x^{13} - 2x^{7} + 3x > 0}", "(0, \\infty)")
    assert verdict.status is Status.correct
    assert time.perf_counter() - start < 2.0

"""Pathological and adversarial inputs: every call must never raise and never credit a wrong
answer, and each blow-up is stopped by a guard, asserted here by which guard fired (no
wall-clock bounds: speed is measured in benchmarks/, never asserted in tests).

Guards: ``max_input_chars`` (a completion that long is not searched at all), the extractor's
caps (markers, segments), ``max_answer_chars`` (a long answer is compared as a string only),
and :func:`rlvr.rewards.math.symbolic.is_safe` (power towers, huge exponents, factorials and
binomials never reach sympy)."""

from __future__ import annotations

import random

import pytest

from rlvr.rewards.math import symbolic
from rlvr.rewards.math.structure import parse_answer
from rlvr.rewards.math.verifier import MathVerifyConfig, verify_math
from rlvr.rewards.types import Status

DEFAULT = MathVerifyConfig()

# name -> (response, reference, the guard that stops it)
#   unsafe:    is_safe refuses the answer, so sympy never sees it
#   long:      the answer is over max_answer_chars and is compared as a string
#   input_cap: the completion is over max_input_chars and is not searched
#   no_answer: extraction finds no final answer
#   numeric:   small enough to evaluate exactly; compared by value
PATHOLOGICAL = {
    "power tower": (r"\boxed{9^{9^{9^{9}}}}", "1", "unsafe"),
    "tower of tens": (r"\boxed{10^{10^{10}}}", "1", "unsafe"),
    "python power tower": ("9**9**9**9", "1", "numeric"),
    "huge exponent": (r"\boxed{2^{1000000000}}", "1", "unsafe"),
    "huge symbolic exponent": (r"\boxed{x^{1000000000}}", "x", "unsafe"),
    "nested huge power": (r"\boxed{(2^{20000})^{20000}}", "1", "unsafe"),
    "e tower": (r"\boxed{e^{e^{e^{e^{10}}}}}", "1", "unsafe"),
    "huge factorial": (r"\boxed{100000000!}", "1", "unsafe"),
    "factorial of a power": (r"\boxed{(10^{5})!}", "1", "unsafe"),
    "huge binomial": (r"\boxed{\binom{1000000}{500000}}", "1", "unsafe"),
    "10k nested braces": (r"\boxed{" + "{" * 10_000 + "1" + "}" * 10_000 + "}", "1", "long"),
    "10k nested parens": (r"\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}", "1", "long"),
    "deep fractions": (r"\boxed{" + r"\frac{1}{" * 300 + "2" + "}" * 300 + "}", "1", "long"),
    "1 MB of letters": ("a" * 1_000_000, "1", "input_cap"),
    "1 MB of unclosed boxes": (r"\boxed{" * 150_000, "1", "input_cap"),
    "many markers": ("The answer is " * 30_000, "1", "no_answer"),
    "many dollars": ("$" * 400_000, "1", "no_answer"),
    "many answer tags": ("<answer>" * 50_000, "1", "no_answer"),
    "100k-digit number": (r"\boxed{" + "7" * 100_000 + "}", "8", "long"),
    "long list": (r"\boxed{" + ", ".join(map(str, range(600))) + "}", "3", "long"),
    "many sqrt(": (r"\boxed{" + r"\sqrt(" * 1000 + "}", "1", "long"),
    "big integer literal vs power": (r"\boxed{2^{100}}", "1267650600228229401496703205377",
                                     "numeric"),
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_inputs_are_stopped_by_a_guard_and_not_credited(name: str) -> None:
    response, reference, guard = PATHOLOGICAL[name]
    verdict = verify_math(response, reference)
    assert verdict.status is not Status.correct, (name, verdict)
    assert verdict.status is not Status.error, (name, verdict)
    if guard == "unsafe":
        assert verdict.status is Status.wrong, verdict
        assert verdict.detail == "unparseable or unsafe expression", verdict
        assert not symbolic.is_safe(parse_answer(verdict.extracted).text), verdict.extracted
    elif guard == "long":
        assert verdict.status is Status.wrong, verdict
        assert verdict.detail == "long answer: string comparison", verdict
        assert len(verdict.extracted) > DEFAULT.max_answer_chars
    elif guard == "input_cap":
        assert len(response) > DEFAULT.max_input_chars
        assert verdict.status is Status.unparsed and verdict.method == "none", verdict
        # not searched at all: even a right answer at the end is not looked for
        assert verify_math(response + r"\boxed{1}", "1").method == "none"
    elif guard == "no_answer":
        assert len(response) <= DEFAULT.max_input_chars  # searched, not capped
        assert verdict.status is Status.unparsed, verdict
        assert verdict.detail == "no final answer found", verdict
    else:
        assert guard == "numeric"
        assert verdict.status is Status.wrong, verdict
        assert verdict.detail.startswith("numeric"), verdict


def test_identical_huge_expression_is_still_accepted() -> None:
    # Too large for sympy (is_safe refuses it), yet accepted: identical text is matched as a
    # string before any evaluation.
    tower = r"\frac{5^{5^{5^{5}}} - 5}{16}"
    assert not symbolic.is_safe(parse_answer(tower).text)
    verdict = verify_math(rf"\boxed{{{tower}}}", tower)
    assert verdict.status is Status.correct
    assert verdict.detail == "string match"


def test_long_correct_output_with_single_box() -> None:
    filler = "Let me reconsider the problem. " * 4000
    response = filler + r"So the answer is \boxed{7}. " + filler
    assert verify_math(response, "7").status is Status.correct


def test_input_above_limit_is_unparsed() -> None:
    cfg = MathVerifyConfig(max_input_chars=1000)
    assert verify_math("x" * 2000 + r"\boxed{1}", "1", cfg).status is Status.unparsed


def test_input_above_limit_names_the_limit_in_detail() -> None:
    cfg = MathVerifyConfig(max_input_chars=1000)
    verdict = verify_math("x" * 2000 + r"\boxed{1}", "1", cfg)
    assert verdict.status is Status.unparsed and verdict.method == "none"
    assert verdict.detail == "completion longer than 1000 characters: not searched", verdict
    # at the limit it is searched as usual
    assert verify_math("x" * (1000 - 10) + r"\boxed{1}", "1", cfg).status is Status.correct
    assert verify_math("a" * 1_000_001, "1").detail == (
        "completion longer than 500000 characters: not searched")


@pytest.mark.parametrize("bad", [None, 12, b"\\boxed{1}", ["1"]])
def test_non_string_inputs_never_raise(bad) -> None:
    verdict = verify_math(bad, "1")  # type: ignore[arg-type]
    assert verdict.status in (Status.unparsed, Status.error, Status.wrong)


def test_empty_reference_is_an_error_not_a_pass() -> None:
    assert verify_math(r"\boxed{1}", "").status is Status.error


def test_random_garbage_never_raises_and_is_deterministic() -> None:
    rng = random.Random(1234)
    alphabet = list("0123456789+-*/^()[]{}\\$=<>,.;: abcxyz") + [
        r"\frac", r"\sqrt", r"\boxed{", r"\pi", r"\infty", r"\cup", r"\text{", r"\begin{pmatrix}",
        r"\end{pmatrix}", r"\\", "&", r"\pm", "</think>", "####", "答案是", "%", "!", "e", "i"]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        ref = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        first = verify_math(text, ref)
        assert first == verify_math(text, ref)
        assert not first.detail.startswith("internal error"), (text, ref, first)


def test_padding_does_not_change_the_reward() -> None:
    base = verify_math(r"\boxed{12}", "12")
    padded = verify_math("Let me think. " * 500 + r"\boxed{12}", "12")
    assert base.status is padded.status is Status.correct


@pytest.mark.parametrize("completion, reference", [
    ("#### 81 * 7", "567"), ("#### 48+24", "72"), ("The answer is 81*7.", "567"),
    ("81 * 7 = ", "567"), ("\\boxed{6-2}", "4"), ("#### 2^3", "8"), ("#### (3+4) \\cdot 2", "14"),
])
def test_repeating_the_questions_arithmetic_does_not_score_when_configured(completion, reference):
    from rlvr.rewards.math.verifier import MathVerifyConfig, verify_math

    strict = verify_math(completion, reference, MathVerifyConfig(accept_unevaluated=False))
    assert strict.status is Status.wrong and "unevaluated arithmetic" in strict.detail
    # the default follows Math-Verify / the shared cases: value-equal expressions count
    assert verify_math(completion, reference).status is Status.correct


@pytest.mark.parametrize("completion, reference", [
    ("#### 567", "567"), ("#### $1,200", "1200"), ("#### -5", "-5"), ("#### 1/2", "0.5"),
    ("\\boxed{\\frac{1}{2}}", "0.5"), ("#### 3 \\times 10^5", "300000"), ("#### 12%", "12"),
    ("#### 2+\\sqrt{3}", "2+\\sqrt{3}"),
])
def test_strict_mode_still_accepts_values(completion, reference):
    from rlvr.rewards.math.verifier import MathVerifyConfig, verify_math

    v = verify_math(completion, reference, MathVerifyConfig(accept_unevaluated=False))
    assert v.status is Status.correct, v.detail


@pytest.mark.parametrize("completion", ["9 - 1 = 9\n#### \n", "7  4 3 P 3", "#### "])
def test_no_answer_is_unparsed_not_wrong(completion):
    from rlvr.rewards.math.verifier import verify_math

    assert verify_math(completion, "8").status is Status.unparsed

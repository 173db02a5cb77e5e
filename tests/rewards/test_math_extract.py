"""Hand-made extraction checks: every answer form, reasoning handling, the multiple-answer rule."""

from __future__ import annotations

import pytest

from rlvr.rewards.math.verifier import (
    MathVerifyConfig,
    extract_answer,
    reference_answer,
    verify_math,
)
from rlvr.rewards.types import Status

C, W, M, U = Status.correct, Status.wrong, Status.multiple_answers, Status.unparsed

LONG_REASONING = (
    "We first compute the area of the rectangle, 6 times 7 gives 42, then subtract the "
    "triangle of area 12, and after checking the units we keep going with the remaining "
    "work until everything is consistent with the 30 squares drawn in the figure."
)


@pytest.mark.parametrize("completion,answer,method", [
    (r"so $x = \boxed{\frac{3}{4}}$.", r"\frac{3}{4}", "boxed"),
    (r"The result is \fbox{12}.", "12", "boxed"),
    (r"The answer is \boxed 7.", "7", "boxed"),
    (r"So \boxed{\frac{\sqrt{3}}{2}} is it", r"\frac{\sqrt{3}}{2}", "boxed"),
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72", "hash"),
    ("<answer>15</answer>", "15", "answer_tag"),
    (r"<answer>so it is \boxed{16}</answer>", "16", "answer_tag"),
    ("Adding up, the answer is 15.", "15", "phrase"),
    ("Final Answer: The final answer is $\\frac{1}{4}$. I hope it is correct.", r"\frac{1}{4}",
     "phrase"),
    ("**Final Answer:** 2.5", "2.5", "phrase"),
    ("Answer: $x = 7$", "x = 7", "phrase"),
    ("答案是 12", "12", "zh_marker"),
    ("最终答案：$\\frac{1}{2}$", r"\frac{1}{2}", "zh_marker"),
    ("计算得到面积。答案为18。", "18", "zh_marker"),
    ("42", "42", "bare"),
    ("$\\frac{1}{2}$", "$\\frac{1}{2}$", "bare"),
    (LONG_REASONING + " Therefore, the number of squares is 30.", "30", "phrase"),
])
def test_extraction_forms(completion: str, answer: str, method: str) -> None:
    ex = extract_answer(completion)
    assert ex.found, ex
    assert ex.answer == answer and ex.method == method, ex


def test_approx_marker_is_recorded() -> None:
    ex = extract_answer("答案约为3.14")
    assert ex.found and ex.approx and ex.answer == "3.14"


@pytest.mark.parametrize("completion", [
    "",
    "   ",
    r"The answer is \boxed{}.",
    r"So the answer is \boxed{\frac{1}{",           # truncated inside the box
    "<think>Let me try 5. That works, so",          # reasoning never closed
    "<think>The answer is \\boxed{5}</think>",      # nothing after the reasoning
    LONG_REASONING,                                 # prose only, no marked answer
])
def test_unparsed(completion: str) -> None:
    assert extract_answer(completion).status is U
    assert verify_math(completion, "5").status is U


def test_last_number_only_when_configured() -> None:
    assert verify_math(LONG_REASONING, "30").status is U
    verdict = verify_math(LONG_REASONING, "30", MathVerifyConfig(allow_last_number=True))
    assert verdict.status is C and verdict.method == "last_number"


def test_answer_inside_think_does_not_count() -> None:
    text = "<think>It is clearly \\boxed{5}.</think>\nThe answer is \\boxed{6}."
    assert verify_math(text, "5").status is W
    assert verify_math(text, "6").status is C
    ex = extract_answer(text)
    assert ex.reasoning is not None and "5" in ex.reasoning


def test_abandoned_box_then_final_box() -> None:
    text = "I first got \\boxed{3}. Wait, that double counts the corner. Fixed: \\boxed{4}."
    assert verify_math(text, "4").status is C
    assert verify_math(text, "3").status is W


def test_chat_template_residue_is_cut() -> None:
    text = "The answer is 9. <|im_start|>user\nWhat about \\boxed{10}?"
    assert verify_math(text, "9").status is C


@pytest.mark.parametrize("completion,reference", [
    ("The answer is 3 or 4.", "3"),
    (r"\boxed{3} \boxed{4}", "3"),
    (r"\boxed{3}, \boxed{4}", "4"),
    (r"\boxed{3, 4}", "3"),
    (r"\boxed{\pm 3}", "3"),
    (r"\boxed{3 \text{ or } 4}", "4"),
    ("<answer>7 or 8</answer>", "7"),
    ("It is maybe 5, possibly 6.", "5"),
    ("答案是5或6", "5"),
    ("The answer is 5, but it could also be 6.", "5"),
    ("The answer is 5. Alternatively, it might be 6.", "5"),
    ("我觉得可能是5，也可能是6", "5"),
    (" ".join(f"\\boxed{{{k}}}" for k in range(1, 30)) + " Final answer: \\boxed{7}", "7"),
])
def test_multiple_answers(completion: str, reference: str) -> None:
    assert verify_math(completion, reference).status is M


@pytest.mark.parametrize("completion,reference", [
    (r"\boxed{3} and \boxed{4}", "3, 4"),
    (r"The roots are \boxed{-1} and \boxed{2}.", r"\{2, -1\}"),
    (r"\boxed{2, -1}", "-1, 2"),
    (r"$x = 2$ or $x = -1$, so \boxed{x = 2 \text{ or } x = -1}", "-1, 2"),
    (r"\boxed{5}. The answer is 5 apples.", "5"),       # repeating the same answer is fine
])
def test_set_valued_reference_accepts_all_elements(completion: str, reference: str) -> None:
    assert verify_math(completion, reference).status is C


def test_set_valued_reference_rejects_partial_or_extra() -> None:
    assert verify_math(r"\boxed{2}", "-1, 2").status is W
    assert verify_math(r"\boxed{-1, 2, 3}", "-1, 2").status is W


@pytest.mark.parametrize("reference,answer", [
    ("Janet has 3 + 4 = 7.\n#### 1,234", "1,234"),
    (r"Thus the answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
    (r"First \boxed{5} then again \boxed{5}.", "5"),
    (r"$\boxed{1}$ and $\boxed{2}$", "1, 2"),
    ("x^2 + 1", "x^2 + 1"),
])
def test_reference_answer(reference: str, answer: str) -> None:
    assert reference_answer(reference) == answer


def test_chinese_outputs() -> None:
    assert verify_math("答案是十二", "12").status is C
    assert verify_math("答案是一百零五", "105").status is C
    assert verify_math("答案：负三", "-3").status is C
    assert verify_math("答案约为 0.67", r"\frac{2}{3}").status is W     # coarse approximation
    assert verify_math("答案约为 0.67", "0.67").status is C
    assert verify_math("结果约等于1.414", "1.41").status is C
    assert verify_math("答案是：百分之五十", r"50\%").status is C
    assert verify_math("答案：18元", "18").status is C
    assert verify_math("答案不是5，而是6", "6").status is C
    assert verify_math("答案不是5，而是6", "5").status is W

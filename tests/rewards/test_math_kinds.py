"""Answer kinds the verifier must handle by a rule, not by example.

Each table is one kind of answer: named tuples and solution lists, matrices in other
environments and matrix expressions, plain-text maths, Chinese and English number words,
units and currency, approximation signs, truncated completions, clock times, equations against
bare expressions, chat-template debris, references written in words. The cases are our own
construction in the styles of the public graders' tests (Math-Verify ``tests/test_all.py``, the
Qwen2.5-Math grader, PRM800K's grader, lm-eval's minerva_math, the requirements' 约为 example),
each labelled by the policy docs/guides/rewards.md states under "How math answers are judged".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.rewards.math.verifier import verify_math
from rlvr.rewards.types import Status

KINDS = {
    "named_tuple": [
        ("(3,4)", "So $(a,b)=(3,4)$.", True),
        ("(a,b)=(3,4)", "The answer is \\boxed{(3,4)}", True),
        ("(a,b)=(3,4)", "The answer is \\boxed{(4,3)}", False),
        ("(1,2)", "\\boxed{x=1, y=2}", True),
        ("(1,2)", "\\boxed{y=2, x=1}", True),
        ("(2,1)", "\\boxed{x=1, y=2}", False),
        ("x=1, y=2", "\\boxed{(1,2)}", True),
        ("x=1, y=2", "\\boxed{x = 1 \\text{ and } y = 2}", True),
        ("x=2, y=3, z=4", "\\boxed{(2,3,4)}", True),
        ("(a,b,c)=(2,3,4)", "\\boxed{a=2,b=3,c=4}", True),
        ("(a,b,c)=(2,3,4)", "\\boxed{a=2,c=3,b=4}", False),
    ],
    "solution_list": [
        ("(1,2),(3,4)", "\\boxed{(1,2) \\quad \\text{and} \\quad (3,4)}", True),
        ("(1,2),(3,4)", "\\boxed{(3,4),(1,2)}", True),
        ("\\{(1,2),(3,4)\\}", "\\boxed{(3,4),(1,2)}", True),
        ("(1,2),(3,4)", "The solutions are $(x,y)=(1,2)$ and $(x,y)=(3,4)$.", True),
        ("(1,2),(3,4)", "\\boxed{(x, y) = (3, 4) \\text{ or } (1, 2)}", True),
        ("(1,2),(3,4)", "\\boxed{(1,2)}", False),
        ("(1,2)", "\\boxed{(2,1)}", False),
    ],
    "matrix": [
        ("\\begin{pmatrix}1&-2\\\\3&0\\end{pmatrix}",
         "So $A + B = \\left[\\begin{array}{cc} 1 & -2 \\\\ 3 & 0 \\end{array}\\right]$.", True),
        ("\\begin{pmatrix}6&0\\\\0&6\\end{pmatrix}",
         "so\n$A^2 = 6\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}$.", True),
        ("\\begin{pmatrix}6&0\\\\0&6\\end{pmatrix}",
         "so\n$A^2 = 5\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}$.", False),
        ("-2", "\\boxed{\\begin{vmatrix}-3&1\\\\2&0\\end{vmatrix}}", True),
        ("\\begin{pmatrix}-3&1\\\\2&0\\end{pmatrix}",
         "\\boxed{\\begin{vmatrix}-3&1\\\\2&0\\end{vmatrix}}", False),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
         "\\boxed{\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]}", True),
        ("\\left[\\begin{array}{cc}1&2\\\\3&4\\end{array}\\right]",
         "\\boxed{\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}}", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
         "\\boxed{\\begin{pmatrix}1&2\\\\3&5\\end{pmatrix}}", False),
        ("\\begin{pmatrix}2&0\\\\0&2\\end{pmatrix}",
         "\\boxed{2\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}}", True),
        ("\\begin{pmatrix}2&0\\\\0&2\\end{pmatrix}",
         "\\boxed{3\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}}", False),
        ("\\begin{pmatrix}3\\\\4\\end{pmatrix}",
         "\\boxed{\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}"
         "\\begin{pmatrix}3\\\\4\\end{pmatrix}}", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
         "\\boxed{\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}"
         "+\\begin{pmatrix}0&2\\\\3&3\\end{pmatrix}}", True),
    ],
    "plain_text_math": [
        ("e^{16}", "So the population grows by a factor of e^16.", True),
        ("\\sqrt[3]{2}", "So x = 2^(1/3).", True),
        ("\\sqrt[3]{2}", "\\boxed{\\sqrt[3]2}", True),
        ("\\sqrt{2}+1", "The answer is sqrt(2+1)", False),
        ("\\frac{\\pi}{2}", "The answer is pi/2", True),
        ("-2\\pi", "The answer is -2*pi.", True),
        ("2\\pi", "The answer is 2pi.", True),
        ("e^{16}", "\\boxed{exp(16)}", True),
        ("e^{16}", "The answer is e^16.", True),
        ("e^{16}", "The answer is e^15.", False),
        ("\\frac{\\sqrt{2}}{2}", "The answer is sqrt(2)/2.", True),
        ("3\\sqrt{5}", "The answer is 3sqrt(5)", True),
        ("3\\sqrt{5}", "The answer is 5sqrt(3)", False),
        ("\\frac{1}{2\\pi}", "\\boxed{1/(2*pi)}", True),
        ("\\ln 2", "\\boxed{ln(2)}", True),
        ("x^2+1", "The answer is x^2+1", True),
    ],
    "chinese_numbers": [
        ("15", "解：9 + 6 = 15（千米）。\n答：他一共走了十五千米。", True),
        ("3.5", "每人分得七除以二千克，答案是三点五千克。", True),
        ("-3", "所以答案是负三。", True),
        ("-3", "所以答案是负3。", True),
        ("-5", "最后结果为负五。", True),
        ("\\frac{1}{2}", "答案是二分之一。", True),
        ("\\frac{2}{3}", "答：三分之二", True),
        ("\\frac{2}{3}", "答：三分之一", False),
        ("12", "答：一共有十二个。", True),
        ("105", "一共有一百零五人。", True),
        ("25\\%", "答案是百分之二十五", True),
        ("0.25", "答案是百分之二十五。", True),
        ("12", "共有12种方法。", True),
        ("13", "共有12种方法。", False),
        ("12", "经过计算，我们发现总共需要十二天。", True),
    ],
    "english_number_words": [
        ("12", "Each box holds 4 eggs and she buys 3 boxes.\n\nSo she has a dozen eggs.", True),
        ("\\frac{3}{4}",
         "Three of the 4 parts are shaded. Therefore, three-fourths of the square is shaded.",
         True),
        ("\\frac{2}{3}", "Therefore, three-fourths of the square is shaded.", False),
        ("5", "The answer is \\boxed{\\text{five}}", True),
        ("5", "The answer is five.", True),
        ("5", "The answer is six.", False),
        ("21", "The answer is twenty-one.", True),
        ("\\frac{1}{2}", "The answer is one half.", True),
    ],
    "reference_in_words": [
        ("five", "The answer is 5.", True),
        ("five", "The answer is 4.", False),
        ("two thirds", "\\boxed{\\frac{2}{3}}", True),
        ("negative three", "\\boxed{-3}", True),
        ("negative three", "\\boxed{3}", False),
    ],
    "units": [
        ("5 \\text{ cm}", "The answer is 5 m", False),
        ("5 \\text{ cm}", "\\boxed{5 \\text{ kg}}", False),
        ("5 \\text{ cm}", "\\boxed{5}", True),
        ("5 \\text{ cm}", "\\boxed{5 \\text{ centimeters}}", True),
        ("5 m", "\\boxed{5\\text{ m}}", True),
        ("12 \\text{ km/h}", "\\boxed{12 \\text{ m/s}}", False),
        ("12", "\\boxed{12 \\text{ apples}}", True),
    ],
    "currency_decimal_comma": [
        ("3.20", "Half a kilo at R$ 6,40 per kilo costs R$ 3,20.\n\n#### R$ 3,20", True),
        ("1250", "So the total cost is 500 × 2,50 €.\n\nThe total is 12,50 €.", False),
        ("7.5", "The area is 3 × 2,5 = 7,5.", True),
        ("(2,5)", "\\boxed{(2,5)}", True),
        ("3.50", "The total cost is €3,50.", True),
        ("3.5", "The total is 3,50 €.", True),
        ("3.05", "The total cost is €3,50.", False),
        ("1000", "The total is \\boxed{\\$1,000}", True),
        ("1234.56", "So she pays 1.234,56 €.", True),
    ],
    "approximation": [
        ("11", "\\boxed{x \\approx 11}", True),
        ("11", "\\boxed{x \\approx 12}", False),
        ("3.14", "\\boxed{\\pi \\approx 3.14}", True),
        ("7.5", "\\boxed{\\approx 7.5}", True),
        ("12", "答案约为12", True),
        ("3.14", "所以圆周率约为3.14。", True),
        ("7.5", "The answer is about 7.5", True),
        ("7.5", "So the speed is approximately 7.5 m/s.", True),
    ],
    "truncated": [
        ("42",
         "First we count the total: $6 \\times 7 = 42$. Then we add the leftover pieces, which "
         "gives $42 + \\frac{", False),
        ("7",
         "设这个数为 x，则 2x + 3 = 17，所以 x = 7。我们再验证一下：正确。接下来考虑第二个条件，",
         False),
        ("42", "We get 42 in total. I hope it is correct.", True),
        ("1000", "She saves $250 each month for 4 months. She saved $1,000 in total.", True),
        ("5", "Subtracting 7 from both sides gives 2x = 10. Solving, we find x = 5.", True),
        ("\\frac{\\sqrt{5}-1}{2}", "Taking the positive root, x = (-1 + sqrt(5))/2", True),
        ("42",
         "Let's think. We have 6 boxes with 7 apples each, so the total is 42 and then we need to",
         False),
        ("42", "So the total is 42 and then we", False),
        ("12", "First, 3 apples cost $6. Next, we have 12 pencils and", False),
        ("12", "There are 12 pencils in the box and the teacher", False),
        ("45", "Step 1: compute 9 * 5. That gives us 45. Step 2: Subtract", False),
        ("45", "Therefore, the answer", False),
        ("42", "The answer is 42. Wait, let me recheck the steps: so the final answer is", False),
        ("15", "She has 15 apples", True),
        ("5", "Is the answer 5?", False),
        ("5", "So is it 5? I am not sure", False),
    ],
    "clock_time": [
        ("12:00 PM", "They meet at noon.", True),
        ("12:00 AM", "They meet at noon.", False),
        ("3:45", "So the clock shows a quarter to four.", True),
        ("4:15", "So the clock shows a quarter to four.", False),
        ("6:30", "The show starts at half past six.", True),
        ("9:05", "The answer is 9:05 a.m.", True),
        ("3:45", "\\boxed{3:45 \\text{ PM}}", True),
        ("15:45", "\\boxed{3:45 PM}", True),
        ("15:45", "\\boxed{3:45 AM}", False),
        ("3:45 p.m.", "\\boxed{15:45}", True),
        ("9:05", "\\boxed{9:50}", False),
        ("12:00", "The answer is 12:00 PM", True),
    ],
    "equation_vs_expression": [
        ("7 = 11a+c", "\\boxed{11a+c}", False),
        ("7 = 11a+c", "\\boxed{11a+c=7}", True),
        ("y=2x+3", "\\boxed{2x+3}", True),
        ("2x+3", "\\boxed{y=2x+3}", True),
        ("2x+3", "\\boxed{2x+3=y}", True),
        ("y=2x+3", "\\boxed{y = 3 + 2x}", True),
        ("y=2x+3", "\\boxed{2x - y + 3 = 0}", True),
        ("y = 2x + 3", "\\boxed{2x+4}", False),
        ("x^2+y^2=1", "\\boxed{x^2+y^2-1}", False),
        ("x = 5", "The answer is 5", True),
        ("5", "\\boxed{x=5}", True),
        ("5", "\\boxed{x=6}", False),
        ("f(x) = x^2 - 1", "\\boxed{(x-1)(x+1)}", True),
    ],
    "multiple_choice_prose": [
        ("B", "Because B is valid", True),
        ("B", "I think it is B", True),
        ("B", "A good choice is B", True),
        ("B", "The answer is A or B", False),
        ("B", "A is correct", False),
        ("A", "A. Because B is not valid", True),
    ],
    "chat_template_debris": [
        ("18",
         "Half of 36 is 18.\n\n\\boxed{18}\n\nUser: What is 3 cubed?\nAssistant: \\boxed{27}",
         True),
        ("7", "\\boxed{7}<|im_end|>\n<|im_start|>user\nnext", True),
        ("7", "The answer is 7.<|im_start|>user hi", True),
        ("7", "\\boxed{7}<|eot_id|><|start_header_id|>user", True),
        ("7", "The answer is 7<｜end▁of▁sentence｜>", True),
        ("7", "The answer is 7.</s><s>[INST] next", True),
        ("7", "The answer is \\boxed{7}<end_of_turn>\n<start_of_turn>user\n\\boxed{8}", True),
        ("7", "<|im_start|>assistant\nThe answer is \\boxed{7}<|im_end|>", True),
        ("7", "The answer is \\boxed{7}.<|endoftext|>Human: what is \\boxed{9}", True),
        ("7", "The answer is \\boxed{7}<|end|><|user|>\\boxed{8}", True),
        ("8", "The answer is \\boxed{7}<|end|><|user|>\\boxed{8}", False),
    ],
    # A sentence rejecting the answer names the new value in a later clause: that value counts;
    # a bare "wait" before a check of the answer revises nothing.
    "retraction_later_clause": [
        ("567", "#### 567\nWait, that's wrong, it is 568.", False),
        ("568", "#### 567\nWait, that's wrong, it is 568.", True),
        ("3", "\\boxed{3} That is incorrect; the correct value is 4.", False),
        ("4", "The answer is 3. I made a mistake, so the answer is 4.", True),
        ("567", "#### 567\nWait, let me double-check: 80 * 7 = 560, plus 7 is 567.", True),
        ("567", "#### 567\nWait, let me check: 81 * 7 = 567, yes.", True),
        ("3", "\\boxed{3}\n\nI made an error in step 2, but the final answer is still 3.", True),
    ],
}

CASES = [pytest.param(ref, resp, exp, id=f"{kind}-{k}")
         for kind, rows in KINDS.items() for k, (ref, resp, exp) in enumerate(rows)]


@pytest.mark.parametrize("reference, response, expected", CASES)
def test_kind(reference: str, response: str, expected: bool) -> None:
    verdict = verify_math(response, reference)
    assert (verdict.status is Status.correct) == expected, (
        f"{verdict.status.value}: extracted={verdict.extracted!r} detail={verdict.detail!r}")


def test_every_kind_has_both_labels() -> None:
    """A kind tested only with true (or only false) cases cannot catch over- (under-) credit."""
    for kind, rows in KINDS.items():
        if kind not in ("chat_template_debris",):
            assert {exp for _, _, exp in rows} == {True, False}, kind


# A larger labelled set of the same kinds (345 cases: 21 real pairs from Math-Verify's tests and
# issues, the rest constructed in two independent passes, K- and B-), kept in
# tests/rewards/data/math_kinds.jsonl in the shared cases' format. Built by a separate pass
# from the rules above, so it checks that each rule covers its kind rather than its examples.
KIND_FILE = Path(__file__).with_name("data") / "math_kinds.jsonl"
KIND_ROWS = [json.loads(line) for line in KIND_FILE.read_text(encoding="utf-8").splitlines()
             if line.strip()]
# id -> why our verdict differs from the label (strict xfail: a fix is noticed)
KIND_KNOWN_FAILURES = {
    "K-0084": "disputed: '1.000 €' is read as the decimal 1.000, not European thousands",
    "K-0082": "'Soucis : 2,74 $ a..' has trailing debris the extractor does not drop",
    "B-0112": "disputed: a reference time without am/pm (7:30) matches either half of the day",
    "B-0091": "policy: a 1-decimal reference 0.5 is a rounded value and accepts 0.48 (rounds to "
              "0.5)",
    "B-0122": "policy: 'a + b = 3' is an equation in free variables, not the value 3 "
              "(Math-Verify's "
              "tests label it so, shared cases MV-0104 / MV-0261)",
}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c["id"],
                 marks=(pytest.mark.xfail(strict=True, reason=KIND_KNOWN_FAILURES[c["id"]]),)
                 if c["id"] in KIND_KNOWN_FAILURES else ()) for c in KIND_ROWS])
def test_kind_file_case(case: dict) -> None:
    verdict = verify_math(case["response"], case["reference"])
    assert (verdict.status is Status.correct) == case["expected"], (
        f"{case['category']}: {verdict.status.value} extracted={verdict.extracted!r} "
        f"detail={verdict.detail!r} note={case['note']}")


def test_kind_file_accuracy() -> None:
    """>= 97% of the non-disputed and >= 94% of all cases right (the issue's bar)."""
    right = [(verify_math(c["response"], c["reference"]).status is Status.correct) == c["expected"]
             for c in KIND_ROWS]
    nd = [ok for ok, c in zip(right, KIND_ROWS) if not c["disputed"]]
    assert sum(nd) / len(nd) >= 0.97 and sum(right) / len(right) >= 0.94


# Cases harvested from public graders' test suites (Math-Verify's tests at 0.9.0 and on GitHub
# main, the Qwen2.5-Math grader, lm-eval's minerva_math tests, hendrycks/math, TRL and open-r1
# reward tests), minus those already in the shared cases: 290 triples with their source, in
# tests/rewards/data/math_public.jsonl. Two files exist only on Math-Verify's main branch and
# test its newer extraction modes (mixed numbers across line breaks, a fallback past an
# unparseable LaTeX span); they are reported but held to a lower bar.
PUBLIC_ROWS = [json.loads(line) for line in (Path(__file__).with_name("data") / "math_public.jsonl")
               .read_text(encoding="utf-8").splitlines() if line.strip()]
NEWER_MODES = ("test_mixed_number_extraction.py", "test_failed_latex_span.py")


def test_public_grader_cases(capsys) -> None:
    right: dict[str, list[bool]] = {}
    for c in PUBLIC_ROWS:
        if c["disputed"]:
            continue
        ok = (verify_math(c["response"], c["reference"]).status is Status.correct) == c["expected"]
        mode = "newer" if c["source"].split("::")[0].endswith(NEWER_MODES) else "main"
        right.setdefault(mode, []).append(ok)
    with capsys.disabled():
        for key, oks in right.items():
            print(f"\n  public grader cases ({key}): {sum(oks)}/{len(oks)} "
                  f"{sum(oks) / len(oks):.1%}")
    assert sum(right["main"]) / len(right["main"]) >= 0.99
    assert sum(right["newer"]) / len(right["newer"]) >= 0.65

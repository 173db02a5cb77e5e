"""Hand-made equivalence checks, one group per class of answer (not taken from the case file)."""

from __future__ import annotations

import pytest

from rlvr.rewards.math.verifier import MathVerifyConfig, verify_math
from rlvr.rewards.types import Status

C, W, M = Status.correct, Status.wrong, Status.multiple_answers


def check(response: str, reference: str, expected: Status, **cfg) -> None:
    verdict = verify_math(response, reference, MathVerifyConfig(**cfg))
    assert verdict.status is expected, (response, reference, verdict)


NUMERIC = [
    (r"\boxed{1,234}", "1234", C),
    (r"\boxed{1234}", "1,234", C),
    (r"\boxed{12,345,678}", "12345678", C),
    (r"\boxed{10{,}000}", "10000", C),
    (r"\boxed{-7}", "-7", C),
    (r"\boxed{−7}", "-7", C),                   # unicode minus
    (r"\boxed{7}", "-7", W),
    (r"\boxed{3.50}", "3.5", C),
    (r"\boxed{0.125}", r"\frac{1}{8}", C),
    (r"\boxed{\frac{1}{8}}", "0.125", C),
    (r"\boxed{1/8}", r"\frac18", C),
    (r"\boxed{\frac{2}{6}}", r"\frac{1}{3}", C),
    (r"\boxed{2\frac{1}{2}}", r"\frac{5}{2}", C),   # mixed number
    (r"\boxed{1.5 \times 10^{3}}", "1500", C),
    (r"\boxed{1.5e3}", "1500", C),
    (r"\boxed{2^{10}}", "1024", C),
    (r"\boxed{2^{10}}", "1025", W),
    (r"\boxed{(3+4)\cdot 2}", "14", C),
    (r"\boxed{6!}", "720", C),
    (r"\boxed{\binom{5}{2}}", "10", C),
    (r"\boxed{100}", "99", W),
    (r"\boxed{0.\overline{3}}", r"\frac13", C),          # repeating decimal
    (r"\boxed{0.1\overline{6}}", r"\frac16", C),
    (r"\boxed{\frac{1}{2^{64}}}", "5.421010862427522e-20", C),   # rounded scientific reference
    (r"\boxed{5.42 \times 10^{-20}}", "5.421010862427522e-20", W),
]

TOLERANCE = [
    (r"\boxed{3.14159}", "3.14", C),             # rounds to the 2-decimal reference
    (r"\boxed{3.145}", "3.14", C),                # |x - ref| = 0.005 exactly
    (r"\boxed{3.146}", "3.14", W),
    (r"\boxed{3.1}", "3.14", W),                  # less precise than the reference
    (r"\boxed{\pi}", "3.14", C),
    (r"\boxed{\sqrt{3}}", "1.732", C),
    (r"\boxed{3.14}", r"\pi", W),                 # too coarse for an exact reference
    (r"\boxed{3.141592654}", r"\pi", C),
    (r"\boxed{0.333333333}", r"\frac{1}{3}", C),
    (r"\boxed{0.3333}", r"\frac{1}{3}", W),
    (r"\boxed{2.0000001}", "2", W),
    (r"\boxed{0.667}", "0.67", C),
]

PERCENT = [
    (r"\boxed{25\%}", "0.25", C),
    (r"\boxed{25\%}", "25", C),
    (r"\boxed{0.25}", r"25\%", C),
    (r"\boxed{25}", r"25\%", C),
    (r"\boxed{\frac{1}{4}}", r"25\%", C),
    (r"\boxed{2.5\%}", r"25\%", W),
    (r"\boxed{0.25}", "25", W),                   # no percent sign anywhere: different numbers
    ("The discount is 40 percent.", r"40\%", C),
]

LATEX = [
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", C),
    (r"\boxed{\dfrac{\sqrt{2}}{2}}", r"\frac{1}{\sqrt{2}}", C),
    (r"\boxed{\frac{\pi}{3}}", r"\dfrac{\pi}{3}", C),
    (r"\boxed{60^\circ}", "60", C),
    (r"\boxed{\cos 60^\circ}", r"\frac12", C),
    (r"\boxed{(x+1)^2}", "x^2+2x+1", C),
    (r"\boxed{x^2+2x}", "x^2+2x+1", W),
    (r"\boxed{\frac{x}{2}}", r"0.5x", C),
    (r"\boxed{e^{2}}", r"e^2", C),
    (r"\boxed{\ln 8}", r"3\ln 2", C),
    (r"\boxed{\left(2, 3\right)}", "(2,3)", C),
    (r"\boxed{4\sqrt{3}-1}", r"-1+4\sqrt3", C),
    (r"\boxed{4\sqrt{3}+1}", r"-1+4\sqrt3", W),
]

SETS_TUPLES_INTERVALS = [
    (r"\boxed{\{2, 1\}}", r"\{1, 2\}", C),
    (r"\boxed{1, 2}", r"\{1, 2\}", C),
    (r"\boxed{1, 2, 3}", r"\{1, 2\}", W),
    (r"\boxed{(2, 1)}", "(1, 2)", W),
    (r"\boxed{(1, 2)}", "(1, 2)", C),
    (r"\boxed{[1, 2)}", "[1, 2)", C),
    (r"\boxed{[1, 2]}", "[1, 2)", W),
    (r"\boxed{(1, 2]}", "[1, 2]", W),
    (r"\boxed{x \le 3}", r"(-\infty, 3]", C),
    (r"\boxed{x < 3}", r"(-\infty, 3]", W),
    (r"\boxed{(-\infty, 1) \cup (2, \infty)}", r"(-\infty,1)\cup(2,\infty)", C),
    (r"\boxed{(2, \infty) \cup (-\infty, 1)}", r"(-\infty,1)\cup(2,\infty)", C),
    (r"\boxed{x < 1 \text{ or } x > 2}", r"(-\infty,1)\cup(2,\infty)", C),
    (r"\boxed{\emptyset}", r"\varnothing", C),
    (r"\boxed{(1,2),(3,4)}", "(3,4),(1,2)", C),
    (r"\boxed{[1,2,3]}", "[1,2,3]", C),
]

EQUATIONS = [
    (r"\boxed{x = 3}", "3", C),
    (r"\boxed{3}", "x = 3", C),
    (r"\boxed{x = 4}", "3", W),
    (r"\boxed{y = 2x + 3}", "2x - y + 3 = 0", C),
    (r"\boxed{y = 2x - 3}", "2x - y + 3 = 0", W),
    (r"\boxed{x + y = 3}", "3", W),             # an equation with free variables is not a value
    (r"\boxed{x = 2, y = 5}", "(2, 5)", C),
    (r"\boxed{x = 2 \text{ or } x = -3}", "-3, 2", C),
    (r"\boxed{x = \pm 2}", r"\pm 2", C),
    (r"\boxed{-2, 2}", r"x = \pm 2", C),
    (r"\boxed{x > 2}", "2 < x", C),
    (r"\boxed{x \geq 2}", "x > 2", W),
]

MATRICES = [
    (r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}",
     r"\begin{bmatrix}1&2\\3&4\end{bmatrix}", C),
    (r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}}",
     r"\begin{pmatrix}1&2\\4&3\end{pmatrix}", W),
    (r"\boxed{\begin{pmatrix} 0.5 \\ 1 \end{pmatrix}}",
     r"\begin{pmatrix}\frac12\\1\end{pmatrix}", C),
    (r"\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}", r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", W),
    (r"\boxed{\begin{pmatrix} -1 \\ 2 \end{pmatrix}}", "(-1, 2)", C),      # vector as a tuple
    (r"\boxed{(2, -1)}", r"\begin{pmatrix} -1 \\ 2 \end{pmatrix}", W),
]

CHOICES_TEXT_MISC = [
    ("The answer is (B).", "B", C),
    (r"\boxed{\text{(B)}}", "B", C),
    ("Answer: B", "(B)", C),
    (r"\boxed{C}", "B", W),
    ("The answer is B or C.", "B", M),
    (r"\boxed{\text{Yes}}", r"\text{yes}", C),
    (r"\boxed{\text{no}}", r"\text{yes}", W),
    (r"\boxed{\text{Monday}}", "Monday", C),
    (r"\boxed{1 - i}", "-i + 1", C),
    (r"\boxed{1 + i}", "1 - i", W),
    (r"\boxed{2+3j}", "2+3i", C),
    (r"\boxed{101_2}", "101_2", C),
    (r"\boxed{101}", "101_2", C),
    (r"\boxed{110_2}", "101_2", W),
    (r"\boxed{5 \text{ cm}}", "5", C),
    (r"\boxed{\$ 12.50}", "12.5", C),
    (r"\boxed{45 \text{ degrees}}", r"45^\circ", C),
    (r"\boxed{6 \text{ m}^2}", "6", C),
]


@pytest.mark.parametrize("response,reference,expected",
                         NUMERIC + TOLERANCE + PERCENT + LATEX + SETS_TUPLES_INTERVALS + EQUATIONS
                         + MATRICES + CHOICES_TEXT_MISC)
def test_equivalence(response: str, reference: str, expected: Status) -> None:
    check(response, reference, expected)


def test_rounded_reference_tolerance_can_be_disabled() -> None:
    check(r"\boxed{3.14159}", "3.14", W, rounded_reference_tolerance=False)
    check(r"\boxed{3.14}", "3.14", C, rounded_reference_tolerance=False)


def test_exact_sig_digits_is_configurable() -> None:
    check(r"\boxed{0.3333}", r"\frac13", C, exact_sig_digits=4)
    check(r"\boxed{0.333}", r"\frac13", W, exact_sig_digits=4)


def test_detail_names_the_rule() -> None:
    verdict = verify_math(r"\boxed{0.5}", r"\frac{1}{2}")
    assert verdict.status is C and "numeric" in verdict.detail

"""rlvr.exact: one parser, four grammars, each as its callers have always read expressions."""

from fractions import Fraction

import pytest

from rlvr import exact
from rlvr.exact import COUNTDOWN, DECIMAL, INTEGER, LATEX, ExactSyntaxError, TooLarge


@pytest.mark.parametrize("text, value", [
    ("37 + 58", 95), ("3 + 4 * 5", 23), ("-7 // 2", -4), ("5 - (-5)", 10), ("84 / 7", 12),
    ("6 × 7", 42), ("8 ÷ 2 · 3", 12), ("1_000 + 0x10", 1016), ("00", 0),
    ("2 + 3  # a comment", 5)])
def test_integer_grammar(text, value):
    assert exact.evaluate_tree(exact.parse(text, INTEGER), INTEGER) == value
    assert type(exact.evaluate(text, INTEGER)) is int


@pytest.mark.parametrize("text", ["7 / 2", "05 + 1", "2 ** 3", "1.5", "9" * 31, "(1).real",
                                  "1 +", "", "abs(-1)"])
def test_integer_grammar_rejects(text):
    with pytest.raises(ExactSyntaxError):
        exact.evaluate(text, INTEGER)


def test_integer_nesting_bound_is_pythons():
    ok, deep = "(" * 200 + "1" + ")" * 200, "(" * 201 + "1" + ")" * 201
    assert exact.evaluate(ok, INTEGER) == 1
    assert exact.evaluate("1*(" * 199 + "1" + ")" * 199, INTEGER) == 1  # no RecursionError
    with pytest.raises(ExactSyntaxError, match="nested deeper than 200"):
        exact.parse(deep, INTEGER)


def test_countdown_grammar_has_no_signs_and_true_division():
    assert exact.parse("(50 - 25) * 3 / 7", COUNTDOWN) == ("/", ("*", ("-", 50, 25), 3), 7)
    assert exact.evaluate("7 / 2", COUNTDOWN) == Fraction(7, 2)
    with pytest.raises(ExactSyntaxError, match="unexpected '-' where a number"):
        exact.parse("-3 + 7", COUNTDOWN)
    with pytest.raises(ExactSyntaxError, match="unexpected 4 after a full expression"):
        exact.parse("3 4", COUNTDOWN)


def test_decimal_grammar_and_replacement_values():
    assert exact.evaluate("2*-3", DECIMAL) == -6
    assert exact.evaluate("2-.5", DECIMAL) == Fraction(3, 2)
    assert exact.evaluate("48/2+48", DECIMAL, [36, 2, 36]) == 54
    spans = [(lit.start, lit.end, lit.value) for lit in exact.literals(" 3*(1.5+.5)", DECIMAL)]
    assert spans == [(1, 2, 3), (4, 7, Fraction(3, 2)), (8, 10, Fraction(1, 2))]


def test_evaluation_errors_surface_in_reading_order():
    # evaluate computes as it reads: the division by zero comes before the syntax error ...
    with pytest.raises(ZeroDivisionError):
        exact.evaluate("5/0+", DECIMAL)
    # ... while parse reads everything first
    with pytest.raises(ExactSyntaxError):
        exact.parse("5/0+", DECIMAL)


@pytest.mark.parametrize("text, value", [
    ("\\frac{3}{4} \\cdot 2^{10}", 768), ("-2^2", -4), ("2^3^2", 512), ("2^-1", Fraction(1, 2)),
    ("3!^2", 36), ("2 ** 3!", 64), ("\\left(1+2\\right) \\times 3", 9),
    ("6 \\div 4", Fraction(3, 2))])
def test_latex_grammar(text, value):
    assert exact.evaluate(text, LATEX) == value


def test_latex_bounds():
    with pytest.raises(TooLarge):
        exact.evaluate("9^{9^{9^{9}}}", LATEX)
    with pytest.raises(TooLarge):
        exact.evaluate("5000!", LATEX)
    with pytest.raises(ExactSyntaxError, match="more than 400 tokens"):
        exact.evaluate("1" + "+1" * 200, LATEX)
    with pytest.raises(ExactSyntaxError, match="fractional exponent"):
        exact.evaluate("2^{1/2}", LATEX)

"""The calculator: exact values of hand-worked expressions, and every refusal."""

import re
from fractions import Fraction

import pytest

from rlvr.tools import ToolLimits, ToolStatus, get_tool, run_calls
from rlvr.tools.calculator import MAX_BITS, CalculatorError, calculate, format_value


@pytest.mark.parametrize("expression, value", [
    ("2 + 3 * 4", 14),
    ("(2 + 3) * 4", 20),
    ("1234 * 5678", 7_006_652),
    ("7 // 2", 3),
    ("-7 // 2", -4),           # floor division rounds down
    ("7 % 3", 1),
    ("-7 % 3", 2),             # Python's modulo takes the divisor's sign
    ("2 ** 10", 1024),
    ("2 ^ 10", 1024),          # ^ is a power here, not XOR
    ("2 ** 3 ** 2", 512),      # right associative: 2 ** 9
    ("-2 ** 2", -4),           # unary minus binds looser than **
    ("--3", 3),
    ("1,000 * 3", 3000),       # digit groups
    ("1_000 + 1", 1001),
    ("12 × 3 ÷ 4", 9),
    ("5 − 7", -2),             # the minus sign
    ("1e3 + 1", 1001),
])
def test_integer_values(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize("expression, value", [
    ("0.1 + 0.2", Fraction(3, 10)),   # exact: the written decimals, not binary floats
    ("10 / 4", Fraction(5, 2)),
    ("1 / 3", Fraction(1, 3)),
    ("2 ** -3", Fraction(1, 8)),
    ("3.5 % 2", Fraction(3, 2)),
    (".5 * 3", Fraction(3, 2)),
    ("(1234 * 5678 - 9) / 3", Fraction(7_006_643, 3)),
])
def test_fraction_values(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize("value, shown", [
    (Fraction(42), "42"),
    (Fraction(-7, 2), "-3.5"),
    (Fraction(-1, 8), "-0.125"),
    (Fraction(3, 10), "0.3"),
    (Fraction(1, 3), "1/3 ≈ 0.3333333333"),
    (Fraction(-7, 3), "-7/3 ≈ -2.333333333"),
    (Fraction(7_006_643, 3), "7006643/3 ≈ 2335547.667"),
    (Fraction(1, 2 ** 40), f"1/{2 ** 40} ≈ 9.094947018E-13"),  # 40 decimal places: a fraction
])
def test_format(value, shown):
    assert format_value(value) == shown


@pytest.mark.parametrize("expression, message", [
    ("1 / 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("5 // (2 - 2)", "division by zero"),
    ("0 ** -1", "division by zero"),
    ("2 ** 0.5", "exponent must be an integer"),
    ("2 ** 10000", "result too large"),        # 10001 bits
    ("9 ** 9 ** 9", "result too large"),       # refused before it is computed
    ("10 ** 10 ** 100", "result too large"),
    ("x + 1", "unsupported: Name"),
    ("__import__('os').system('ls')", "unsupported: Call"),
    ("1 < 2", "unsupported: Compare"),
    ("1, 2", "unsupported: Tuple"),
    ("'a' * 3", "unsupported: str literal 'a'"),
    ("True + 1", "unsupported: bool literal True"),
    ("2j", "unsupported: complex literal 2j"),
    ("3 & 1", "unsupported: operator BitAnd"),
    ("", "empty expression"),
    ("1 +", "cannot parse '1 +'"),
    ("-" * 150 + "1", "more than 100 nested operations"),
    ("1" + "+1" * 150, "more than 100 nested operations"),
    ("1" * 1001, "longer than 1000 characters"),
])
def test_refusals(expression, message):
    with pytest.raises(CalculatorError, match=re.escape(message)):
        calculate(expression)


def test_results_up_to_the_bit_bound():
    assert calculate("2 ** 9999").numerator.bit_length() == MAX_BITS   # 10000 bits: allowed
    assert calculate("3 ** 6000") == 3 ** 6000                          # 9510 bits
    with pytest.raises(CalculatorError, match="too large"):
        calculate("(2 ** 9999) * 2")


def test_the_tool_answers_with_text_and_errors_as_observations():
    tool = get_tool("calculator")
    assert tool.argument == "expression" and tool.timeout_s == 2.0
    ok, bad = run_calls([(tool, {"expression": "(1234 * 5678 - 9) / 3"}),
                         (tool, {"expression": "1/0"})], ToolLimits())
    assert (ok.status, ok.text) == (ToolStatus.ok, "7006643/3 ≈ 2335547.667")
    assert (bad.status, bad.text) == (ToolStatus.error, "Error: division by zero")

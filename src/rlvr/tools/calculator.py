"""The ``calculator`` tool: exact arithmetic on an expression, never ``eval``.

Grammar: Python's expression syntax restricted to numbers, ``+ - * / // % **`` (binary),
unary ``+ -`` and parentheses. The text is parsed with :mod:`ast` and only those nodes are
walked; anything else (names, calls, attributes, comparisons, tuples ...) is an error that
names what was found. Numbers are exact: integers, decimals (``1.5``, ``.5``, ``1e3``: read
from their source text as :class:`~fractions.Fraction`, so ``0.1 + 0.2`` is exactly ``0.3``),
and fractions are what ``/`` makes (``1/3``). For a model's convenience ``^`` means ``**``,
``×`` / ``·`` mean ``*``, ``÷`` means ``/``, the minus sign ``−`` means ``-``, and ``_`` or a
comma between digit groups (``1,000``) is dropped.

Bounds, so no input is expensive: at most :data:`MAX_CHARS` characters, :data:`MAX_DEPTH`
nested operations, an exponent must be an integer, and no operand or result may exceed
:data:`MAX_BITS` bits in its numerator or denominator (a power is refused before it is
computed when ``bits(base) * |exponent|`` would). Results print as an integer, an exact
decimal (``3.5``, ``-0.125``), or a fraction with a 10-digit approximation
(``1/3 ≈ 0.3333333333``).
"""

from __future__ import annotations

import ast
import operator
import re
from decimal import Context, Decimal
from fractions import Fraction

from rlvr.tools.registry import register_tool
from rlvr.tools.types import ToolError

MAX_CHARS = 1000
MAX_DEPTH = 100
MAX_BITS = 10_000  # about 3,000 decimal digits
MAX_DECIMAL_PLACES = 30  # an exact decimal longer than this prints as a fraction

_SPELLINGS = str.maketrans({"^": "**", "×": "*", "·": "*", "÷": "/", "−": "-"})
_DIGIT_GROUPS = re.compile(r"(?<=\d)[_,](?=\d{3}\b)")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(ValueError):
    """The expression is outside the grammar or over a bound; the message says which."""


def calculate(expression: str) -> Fraction:
    """The exact value of ``expression`` (see the module doc for the grammar and bounds).

    Raises:
        CalculatorError: empty or too long text, a syntax error, a construct outside the
            grammar (named), a division or modulo by zero, a non-integer exponent, or a value
            over :data:`MAX_BITS`.
    """
    if not isinstance(expression, str):
        raise CalculatorError(f"expected the expression as text, got {type(expression).__name__}")
    text = _DIGIT_GROUPS.sub("", expression.strip().translate(_SPELLINGS))
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_CHARS:
        raise CalculatorError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise CalculatorError(f"cannot parse {expression.strip()!r}") from None
    return _value(tree.body, text, 0)


def _value(node: ast.AST, text: str, depth: int) -> Fraction:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"more than {MAX_DEPTH} nested operations")
    if isinstance(node, ast.Constant):
        return _number(node, text)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, text, depth + 1))
    if isinstance(node, ast.BinOp) and (type(node.op) in _BINARY or isinstance(node.op, ast.Pow)):
        left = _value(node.left, text, depth + 1)
        right = _value(node.right, text, depth + 1)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            raise CalculatorError("division by zero")
        return _checked(_BINARY[type(node.op)](left, right))
    raise CalculatorError(f"unsupported: {_what(node)} (numbers, + - * / // % ** and "
                          "parentheses only)")


def _number(node: ast.Constant, text: str) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError(f"unsupported: {_what(node)} (numbers, + - * / // % ** and "
                              "parentheses only)")
    if isinstance(value, int):
        return _checked(Fraction(value))
    source = (ast.get_source_segment(text, node) or repr(value)).replace("_", "")
    return _checked(Fraction(source))  # the written decimal, not the float it rounds to


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("the exponent must be an integer (a fractional power is not exact)")
    e = int(exponent)
    if base == 0 and e < 0:
        raise CalculatorError("division by zero")
    if base in (0, 1, -1):
        return base ** e
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())  # >= 2 here
    # The larger part of base ** e has at least (bits - 1) * |e| bits: refuse what surely
    # exceeds the bound before computing it; what passes has at most 2 * MAX_BITS bits.
    if (bits - 1) * abs(e) > MAX_BITS:
        raise CalculatorError(f"result too large (more than {MAX_BITS} bits)")
    return _checked(base ** e)


def _checked(value: Fraction | int) -> Fraction:
    value = Fraction(value)  # // gives an int
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise CalculatorError(f"result too large (more than {MAX_BITS} bits)")
    return value


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"{type(node.value).__name__} literal {node.value!r}"[:80]
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return f"operator {type(node.op).__name__}"
    return type(node).__name__


def format_value(value: Fraction) -> str:
    """``value`` as the calculator prints it: an integer (``42``), an exact decimal when the
    denominator has no prime factor but 2 and 5 and it has at most
    :data:`MAX_DECIMAL_PLACES` places (``3.5``, ``-0.125``), else the reduced
    fraction and a 10-significant-digit approximation (``1/3 ≈ 0.3333333333``)."""
    if value.denominator == 1:
        return str(value.numerator)
    d, twos, fives = value.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d == 1 and max(twos, fives) <= MAX_DECIMAL_PLACES:
        places = max(twos, fives)
        scaled = abs(value.numerator) * 10 ** places // value.denominator
        digits = str(scaled).rjust(places + 1, "0")
        sign = "-" if value < 0 else ""
        return f"{sign}{digits[:-places]}.{digits[-places:]}"
    approx = Context(prec=10).divide(Decimal(value.numerator), Decimal(value.denominator))
    return f"{value.numerator}/{value.denominator} ≈ {approx}"


@register_tool("calculator", timeout_s=2.0,
               description="exact arithmetic: numbers, + - * / // % ** (or ^) and parentheses, "
                           "e.g. (1234 * 5678 - 9) / 3")
def calculator(expression: str) -> str:
    """The ``calculator`` tool: :func:`format_value` of :func:`calculate`.

    Raises:
        ToolError: ``Error: <why>`` for any :class:`CalculatorError`.
    """
    try:
        return format_value(calculate(expression))
    except CalculatorError as exc:
        raise ToolError(f"Error: {exc}") from None

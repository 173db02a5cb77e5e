"""Arithmetic expression trees (:mod:`rlvr.tasks.arithmetic`): exact evaluation of expression
text (:func:`evaluate`, :data:`rlvr.exact.INTEGER`'s grammar, never Python's ``eval``), the
generator's own evaluation of a tree (:func:`value_of`) and its text (:func:`render`).
"""

from __future__ import annotations

import functools
import re

from rlvr import exact

# An expression tree: an int leaf, or (operator, left, right).
Expr = int | tuple

OPERATORS = "+-*/"
PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


class ExpressionError(ValueError):
    """An expression could not be evaluated (syntax outside the grammar, inexact division,
    division by zero, oversize number)."""


# ----------------------------------------------------------------------------- evaluation


_MAX_LITERAL_DIGITS = 30
_INT_LITERAL = re.compile(r"\s*-?\d+\s*")


def evaluate(expression: str) -> int:
    """Exact integer value of an arithmetic expression, without ``eval``.

    Grammar: integer literals, unary ``+``/``-``, binary ``+ - * /`` and ``//``, parentheses;
    Python precedence. ``/`` must divide exactly (``7 / 2`` is an error, not 3.5); ``//`` is
    floor division. Used to recompute every written step of a worked solution.

    Args:
        expression: e.g. ``"37 * 50 + 37 * 8"``; ``×``, ``·`` and ``÷`` are accepted too.

    Returns:
        The value, an int.

    Raises:
        ExpressionError: for anything outside the grammar, a non-exact or zero division, or a
            literal longer than 30 digits.
    """
    if _INT_LITERAL.fullmatch(expression):  # fast path: most equation sides are a number
        text = expression.strip()
        if len(text.lstrip("-")) > _MAX_LITERAL_DIGITS:
            raise ExpressionError(f"number too long in {expression!r}")
        return int(text)
    return _evaluate_cached(expression)


@functools.lru_cache(maxsize=65536)
def _evaluate_cached(expression: str) -> int:
    # Step lines repeat a lot (7 * 6 = 42); parsing them once is the generator's main cost.
    # The whole expression is read before anything is computed, so a syntax error is
    # reported as such even after a division by zero.
    try:
        return exact.evaluate_tree(exact.parse(expression, exact.INTEGER), exact.INTEGER)
    except exact.ExactSyntaxError as exc:
        raise ExpressionError(f"{exc} in {expression!r}") from None
    except ZeroDivisionError:
        raise ExpressionError(f"division by zero in {expression!r}") from None


def apply_operator(op: str, a: int, b: int) -> int | None:
    """``a op b`` for one of ``+ - * /``: the generator's own evaluator; None for an inexact or
    zero division."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0 or a % b:
        return None
    return a // b


def value_of(expr: Expr) -> int | None:
    """The value of an expression tree (:func:`apply_operator` at every node); None when a
    division in it is inexact or by zero."""
    if isinstance(expr, int):
        return expr
    op, left, right = expr
    a, b = value_of(left), value_of(right)
    if a is None or b is None:
        return None
    return apply_operator(op, a, b)


# ----------------------------------------------------------------------------- rendering


def number_text(value: int) -> str:
    """An integer as an operand: parenthesised when negative (``(-5)``)."""
    return f"({value})" if value < 0 else str(value)


def render(expr: Expr) -> str:
    """The expression as text with minimal parentheses, e.g. ``"(4 + 7) * 3"``.

    A right operand of equal precedence keeps its parentheses unless the operator is
    associative and the same (``a + (b - c)`` stays as written; ``a + b + c`` needs none).
    Negative literals are parenthesised: ``4 - (-5)``.
    """
    if isinstance(expr, int):
        return number_text(expr)
    op, left, right = expr
    p = PRECEDENCE[op]
    ls = render(left)
    if not isinstance(left, int) and PRECEDENCE[left[0]] < p:
        ls = f"({ls})"
    rs = render(right)
    if not isinstance(right, int):
        rp = PRECEDENCE[right[0]]
        if rp < p or (rp == p and not (op == right[0] and op in "+*")):
            rs = f"({rs})"
    return f"{ls} {op} {rs}"

"""Worked solutions of arithmetic problems (:mod:`rlvr.tasks.arithmetic`): the reasoning lines
(:func:`solution_steps`) and their check by recomputation (:func:`check_solution`, R17, R27).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.tasks.arithmetic.expressions import (
    Expr,
    ExpressionError,
    apply_operator,
    evaluate,
    number_text,
)


def _multiplication_steps(a: int, b: int) -> list[str]:
    """Place-value long multiplication of two positive numbers of >= 2 digits each:
    ``37 * 58 = 37 * 50 + 37 * 8``, the partial products, then their sum."""
    parts = [int(d) * 10**i for i, d in enumerate(reversed(str(b))) if d != "0"][::-1]
    if len(parts) < 2:
        return [f"{a} * {b} = {a * b}"]
    products = [a * p for p in parts]
    lines = [f"{a} * {b} = " + " + ".join(f"{a} * {p}" for p in parts)]
    lines += [f"{a} * {p} = {a * p}" for p in parts]
    lines.append(" + ".join(str(x) for x in products) + f" = {a * b}")
    return lines


def solution_steps(expr: Expr, long_multiplication: bool = True) -> list[str]:
    """Reasoning lines computing ``expr`` one operation at a time, innermost first, in the
    usual order (left operand, right operand, then the operation), e.g. for ``3 + 4 * 5``:
    ``["4 * 5 = 20", "3 + 20 = 23"]``. A bare number gives no steps.

    Args:
        expr: an expression tree whose divisions are exact.
        long_multiplication: write products of two multi-digit positive numbers by place
            value (see :func:`_multiplication_steps`), which small models follow more reliably.

    Raises:
        ExpressionError: if a division is not exact.
    """
    lines: list[str] = []

    def walk(e: Expr) -> int:
        if isinstance(e, int):
            return e
        op, left, right = e
        a, b = walk(left), walk(right)
        value = apply_operator(op, a, b)
        if value is None:
            raise ExpressionError(f"{a} / {b} is not an integer")
        if op == "*" and long_multiplication and a >= 10 and b >= 10:
            lines.extend(_multiplication_steps(a, b))
        else:
            lines.append(f"{a} {op} {number_text(b)} = {value}")
        return value

    walk(expr)
    return lines


#: The final-answer line of the default solution template, ``#### N`` (group 1: N).
HASH_ANSWER = re.compile(r"^####\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class SolutionCheck:
    """Result of :func:`check_solution`.

    Attributes:
        ok: every equation holds, a final answer was found and it equals the expected one.
        answer: the final answer found, or None.
        errors: human-readable reasons, empty when ``ok``.
    """

    ok: bool
    answer: int | None
    errors: tuple[str, ...]


def check_solution(
    solution: str, expected: int, answer_pattern: re.Pattern | str = HASH_ANSWER
) -> SolutionCheck:
    """Verify a worked solution by recomputation (R17, R27).

    Every line containing ``=`` is an equation ``e1 = e2 = ...``; each side is recomputed with
    :func:`evaluate` and all must agree. The final answer is taken from the last line matching
    ``answer_pattern`` (group 1; default ``#### N``), must be unique, and must equal
    ``expected``. The last equation's value must equal the final answer too.

    Args:
        solution: the solution text.
        expected: the correct integer answer.
        answer_pattern: regex (full line) capturing the final answer.

    Returns:
        :class:`SolutionCheck`.
    """
    pattern = re.compile(answer_pattern) if isinstance(answer_pattern, str) else answer_pattern
    errors: list[str] = []
    answers: list[int] = []
    last_value: int | None = None
    for line in solution.splitlines():
        m = pattern.match(line.strip())
        if m:
            answers.append(int(m.group(1)))
            continue
        if "=" not in line:
            continue
        try:
            values = [evaluate(side) for side in line.split("=")]
        except ExpressionError as exc:
            errors.append(f"cannot evaluate {line.strip()!r}: {exc}")
            continue
        if len(set(values)) != 1:
            errors.append(f"false equation {line.strip()!r}")
        last_value = values[-1]
    if not answers:
        errors.append("no final answer line")
    elif len(set(answers)) > 1:
        errors.append(f"several final answers: {answers}")
    answer = answers[-1] if answers else None
    if answer is not None and answer != expected:
        errors.append(f"final answer {answer} != expected {expected}")
    if answer is not None and last_value is not None and last_value != answer:
        errors.append(f"last step gives {last_value}, final answer says {answer}")
    return SolutionCheck(not errors, answer, tuple(errors))

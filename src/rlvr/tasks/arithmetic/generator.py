"""The arithmetic task generator (:mod:`rlvr.tasks.arithmetic`): leak-free train / validation
splits (:func:`split_of`, R25), sampling an expression of a level (:func:`sample_expression`),
one task with its verified worked solution (:func:`make_task`) and the entry point
:func:`generate`.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
import re

from rlvr.records import Task
from rlvr.tasks.arithmetic.expressions import PRECEDENCE, Expr, render, value_of
from rlvr.tasks.arithmetic.levels import Level, MixtureSpec, parse_mixture
from rlvr.tasks.arithmetic.solutions import HASH_ANSWER, check_solution, solution_steps
from rlvr.tasks.mixture import check_generator_args

DEFAULT_PROMPT_TEMPLATE = "What is {expression}?"
#: ``{steps}`` is the reasoning lines joined by newlines, ``{answer}`` the integer answer.
DEFAULT_SOLUTION_TEMPLATE = "{steps}\n#### {answer}"
DEFAULT_VAL_FRACTION = 0.2
TASK_TYPE = "math"
SOURCE = "arithmetic"

# ----------------------------------------------------------------------------- splits


def split_key(expr: Expr) -> str:
    """A key equal for expressions that differ only by the order of terms of a sum or the
    factors of a product (``37 + 58`` and ``58 + 37``; ``a * b * c`` in any order); the split
    is decided by this key, so such near-duplicates share a split (R25)."""

    def norm(e: Expr) -> str:
        if isinstance(e, int):
            return str(e)
        op = e[0]
        if op in "+*":
            parts: list[str] = []
            stack = [e]
            while stack:  # flatten a chain of the same associative operator
                node = stack.pop()
                if not isinstance(node, int) and node[0] == op:
                    stack.extend((node[1], node[2]))
                else:
                    parts.append(norm(node))
            return f"{op}({','.join(sorted(parts))})"
        return f"{op}({norm(e[1])},{norm(e[2])})"

    return norm(expr)


def split_of(
    expr: Expr, val_fraction: float = DEFAULT_VAL_FRACTION, salt: str = "rlvr-arith-v1"
) -> str:
    """``"validation"`` for a ``val_fraction`` share of all problems, else ``"train"``; a pure
    function of :func:`split_key` (and the salt), independent of seeds."""
    digest = hashlib.blake2b(f"{salt}|{split_key(expr)}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2**64
    return "validation" if u < val_fraction else "train"


# ----------------------------------------------------------------------------- sampling


def _operand(rng: random.Random, digits: int) -> int:
    # rng.random() rather than randint: 3x faster, and the generator draws a lot.
    lo = 1 if digits == 1 else 10 ** (digits - 1)
    return lo + int(rng.random() * (10**digits - lo))


def _build_flat(operands: list[Expr], ops: list[str]) -> Expr:
    # Standard precedence, left-associative: * and / bind tighter than + and -.
    terms: list[Expr] = [operands[0]]
    term_ops: list[str] = []
    for op, x in zip(ops, operands[1:], strict=True):
        if PRECEDENCE[op] == 2:
            terms[-1] = (op, terms[-1], x)
        else:
            term_ops.append(op)
            terms.append(x)
    expr = terms[0]
    for op, x in zip(term_ops, terms[1:], strict=True):
        expr = (op, expr, x)
    return expr


def _build_tree(rng: random.Random, operands: list[Expr], ops: list[str]) -> Expr:
    # A random binary bracketing of the operand sequence (ops[i] sits between operands i, i+1).
    if len(operands) == 1:
        return operands[0]
    k = rng.randrange(len(ops))
    return (
        ops[k],
        _build_tree(rng, operands[: k + 1], ops[:k]),
        _build_tree(rng, operands[k + 1 :], ops[k + 1 :]),
    )


def _exact_leaf_divisions(rng: random.Random, expr: Expr) -> Expr:
    # For a division of two literals, redraw the dividend as divisor * quotient within the
    # dividend's digit range, so exact division does not have to be found by rejection.
    if isinstance(expr, int):
        return expr
    op, left, right = expr
    left = _exact_leaf_divisions(rng, left)
    right = _exact_leaf_divisions(rng, right)
    if op == "/" and isinstance(left, int) and isinstance(right, int):
        d_left = len(str(left))
        lo, hi = (1 if d_left == 1 else 10 ** (d_left - 1)), 10**d_left - 1
        divisor = right if right >= 2 else 2 + int(rng.random() * 8)  # no division by 1
        qlo, qhi = -(-lo // divisor), hi // divisor
        if qlo <= qhi:
            left = divisor * rng.randint(qlo, qhi)
            right = divisor
    return (op, left, right)


def sample_expression(rng: random.Random, level: Level, max_tries: int = 1000) -> tuple[Expr, int]:
    """Draw one expression of ``level`` and its value.

    Raises:
        RuntimeError: if no valid expression is found in ``max_tries`` draws (a level whose
            constraints cannot be met).
    """
    n = len(level.digits)
    for _ in range(max_tries):
        operands: list[Expr] = [_operand(rng, d) for d in level.digits]
        k = len(level.operators)
        ops = [level.operators[int(rng.random() * k)] for _ in range(n - 1)]
        if level.parentheses:
            expr = _build_tree(rng, operands, ops)
        else:
            expr = _build_flat(operands, ops)
        expr = _exact_leaf_divisions(rng, expr)
        value = value_of(expr)
        if value is None or (value < 0 and not level.allow_negative):
            continue
        if level.parentheses and "(" not in render(expr):
            continue
        return expr, value
    raise RuntimeError(f"level {level.name!r}: no valid expression in {max_tries} draws")


def make_task(
    expr: Expr,
    value: int,
    level: Level,
    *,
    split: str,
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
    solution_template: str = DEFAULT_SOLUTION_TEMPLATE,
    long_multiplication: bool = True,
    answer_pattern: re.Pattern | str = HASH_ANSWER,
    metadata: dict | None = None,
) -> Task:
    """Build the :class:`Task` for one expression, with its verified worked solution.

    Raises:
        ValueError: if the worked solution fails :func:`check_solution` (never expected; it
            guards the generator and custom templates).
    """
    text = render(expr)
    steps = solution_steps(expr, long_multiplication=long_multiplication)
    solution = solution_template.format(steps="\n".join(steps), answer=value)
    check = check_solution(solution, value, answer_pattern)
    if not check.ok:
        raise ValueError(f"worked solution for {text!r} does not verify: {'; '.join(check.errors)}")
    digest = hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return Task(
        id=f"arith-{digest}",
        prompt=prompt_template.format(expression=text),
        reference=str(value),
        task_type=TASK_TYPE,
        source=SOURCE,
        difficulty=level.name,
        category=level.name,
        solution=solution,
        metadata={"expression": text, "level": level.name, "split": split, **(metadata or {})},
    )


def generate(
    spec: MixtureSpec,
    n: int,
    *,
    seed: int = 0,
    split: str = "train",
    val_fraction: float = DEFAULT_VAL_FRACTION,
    unique: bool = True,
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
    solution_template: str = DEFAULT_SOLUTION_TEMPLATE,
    long_multiplication: bool = True,
    answer_pattern: re.Pattern | str = HASH_ANSWER,
    salt: str = "rlvr-arith-v1",
) -> list[Task]:
    """Generate ``n`` arithmetic tasks of one split, deterministically from ``seed``.

    The same arguments always give the same list. Problems are drawn level by level from the
    mixture and kept only if :func:`split_of` assigns them to ``split``; so a train set and a
    validation set never share an expression (nor a reordered sum / product), for any seeds.

    Args:
        spec: a preset name, a :class:`Level` or a mixture spec (see :func:`parse_mixture`).
        n: number of tasks (>= 0).
        seed: random seed.
        split: ``"train"`` or ``"validation"``.
        val_fraction: share of the problem space reserved for validation, in (0, 1).
        unique: no expression twice within the returned list.
        prompt_template: question text with an ``{expression}`` placeholder.
        solution_template: worked-solution text with ``{steps}`` and ``{answer}``
            placeholders (default ``"{steps}\\n#### {answer}"``).
        long_multiplication: see :func:`solution_steps`.
        answer_pattern: regex matching the final-answer line of ``solution_template``.
        salt: changes the split assignment (e.g. to refresh the validation set, R25).

    Returns:
        ``n`` tasks with ``reference`` (the answer as a string), ``prompt``, ``solution``,
        ``difficulty`` / ``category`` (the level name) and ``metadata`` (``expression``,
        ``level``, ``split``, ``seed``, ``index``).

    Raises:
        ValueError: for a bad split, fraction or n, or when a level has too few distinct
            problems in this split to give ``n`` unique ones (use a larger level, a mixture,
            or ``unique=False``).
    """
    check_generator_args(split, val_fraction, n)
    mixture = parse_mixture(spec)
    levels = [lv for lv, _ in mixture]
    cumulative = list(itertools.accumulate(w for _, w in mixture))
    rng = random.Random(f"rlvr-arithmetic|{seed}|{split}")
    tasks: list[Task] = []
    seen: set[str] = set()
    # Per level, count draws that repeat an expression already taken. In a large problem space
    # they are rare; once they outnumber the level's new problems (+ slack), the level has
    # used up most (~80%) of its distinct problems in this split, and drawing on would only
    # skew the mixture or spin, so stop and say so.
    taken, repeats = [0] * len(levels), [0] * len(levels)
    while len(tasks) < n:
        i = min(bisect.bisect_right(cumulative, rng.random()), len(levels) - 1)
        level = levels[i]
        expr, value = sample_expression(rng, level)
        if split_of(expr, val_fraction, salt) != split:
            continue
        text = render(expr)
        if unique and text in seen:
            repeats[i] += 1
            if repeats[i] > taken[i] + 200:
                raise ValueError(
                    f"level {level.name!r} ran out of distinct {split} problems after {taken[i]} "
                    f"(of {n} tasks from {spec!r}); its problem space is too small for that share "
                    "(use unique=False, fewer tasks, a larger level, or a lower weight)"
                )
            continue
        taken[i] += 1
        seen.add(text)
        tasks.append(
            make_task(
                expr,
                value,
                level,
                split=split,
                prompt_template=prompt_template,
                solution_template=solution_template,
                long_multiplication=long_multiplication,
                answer_pattern=answer_pattern,
                metadata={"seed": seed, "index": len(tasks)},
            )
        )
    return tasks


def train_val_split(
    spec: MixtureSpec, n_train: int, n_val: int, *, seed: int = 0, **options
) -> tuple[list[Task], list[Task]]:
    """``(generate(spec, n_train, split="train"), generate(spec, n_val, split="validation"))``
    with the same seed and options; disjoint by construction."""
    return (
        generate(spec, n_train, seed=seed, split="train", **options),
        generate(spec, n_val, seed=seed, split="validation", **options),
    )

"""Integer arithmetic problems, deterministic by seed, with verified worked solutions.

Each problem is an expression over integers with ``+ - *`` and optionally exact division
``/``, parentheses and several operands, e.g. ``37 + 58`` or ``(4 + 7) * 3``. A problem becomes
a :class:`~rlvr.records.Task` whose ``reference`` is the integer answer as a string, whose
``prompt`` is the question text (``"What is 37 + 58?"``), and whose ``solution`` is a
step-by-step worked solution in the target output format, by default GSM8K's::

    37 + 58 = 95
    #### 95

Every solution is checked before it is emitted: each written equation is recomputed by
:func:`evaluate` (exact integer ``+ - * / //`` in :data:`rlvr.exact.INTEGER`'s grammar, never
Python's ``eval``) and the final line must equal the answer (R17, R27).

Train / validation hygiene (R25): the split of a problem is a function of the problem itself
(a hash of its commutativity-normalised expression), not of the seed or of the draw order, so
the same expression, or a reordering of a sum or product like ``58 + 37`` for ``37 + 58``, can
never land in both splits, whatever seeds the two sets were generated with.

Difficulty (R24) is a :class:`Level`: digits per operand, operators, parentheses. Named presets
live in :data:`PRESETS` (``1d+1d``, ``1dop1d``, ``2d+-2d``, ``2dx1d``, ``2dx2d``, ``3ops``,
``3ops-paren``, ``div``); a mixture spec such as ``"2d+-2d:0.6,2dx1d:0.4"`` draws levels by
weight.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rlvr import exact
from rlvr.records import Task

# An expression tree: an int leaf, or (operator, left, right).
Expr = int | tuple

OPERATORS = "+-*/"
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
DEFAULT_PROMPT_TEMPLATE = "What is {expression}?"
#: ``{steps}`` is the reasoning lines joined by newlines, ``{answer}`` the integer answer.
DEFAULT_SOLUTION_TEMPLATE = "{steps}\n#### {answer}"
DEFAULT_VAL_FRACTION = 0.2
TASK_TYPE = "math"
SOURCE = "arithmetic"
SPLITS = ("train", "validation")


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


def _apply(op: str, a: int, b: int) -> int | None:
    # The generator's own evaluator: None for an inexact or zero division.
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0 or a % b:
        return None
    return a // b


def _value(expr: Expr) -> int | None:
    if isinstance(expr, int):
        return expr
    op, left, right = expr
    a, b = _value(left), _value(right)
    if a is None or b is None:
        return None
    return _apply(op, a, b)


# ----------------------------------------------------------------------------- rendering


def _num(value: int) -> str:
    return f"({value})" if value < 0 else str(value)


def render(expr: Expr) -> str:
    """The expression as text with minimal parentheses, e.g. ``"(4 + 7) * 3"``.

    A right operand of equal precedence keeps its parentheses unless the operator is
    associative and the same (``a + (b - c)`` stays as written; ``a + b + c`` needs none).
    Negative literals are parenthesised: ``4 - (-5)``.
    """
    if isinstance(expr, int):
        return _num(expr)
    op, left, right = expr
    p = _PRECEDENCE[op]
    ls = render(left)
    if not isinstance(left, int) and _PRECEDENCE[left[0]] < p:
        ls = f"({ls})"
    rs = render(right)
    if not isinstance(right, int):
        rp = _PRECEDENCE[right[0]]
        if rp < p or (rp == p and not (op == right[0] and op in "+*")):
            rs = f"({rs})"
    return f"{ls} {op} {rs}"


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


# ----------------------------------------------------------------------------- solutions


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
        value = _apply(op, a, b)
        if value is None:
            raise ExpressionError(f"{a} / {b} is not an integer")
        if op == "*" and long_multiplication and a >= 10 and b >= 10:
            lines.extend(_multiplication_steps(a, b))
        else:
            lines.append(f"{a} {op} {_num(b)} = {value}")
        return value

    walk(expr)
    return lines


_HASH_ANSWER = re.compile(r"^####\s*(-?\d+)\s*$")


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
    solution: str, expected: int, answer_pattern: re.Pattern | str = _HASH_ANSWER
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


# ----------------------------------------------------------------------------- levels


@dataclass(frozen=True)
class Level:
    """A difficulty level of the generator.

    Attributes:
        name: label, stored as the task's ``difficulty`` and ``category``.
        digits: digits of each operand, e.g. ``(2, 1)``; its length is the number of operands
            (>= 2). A d-digit operand is uniform in [10^(d-1), 10^d - 1] (1-digit: 1..9).
        operators: subset of ``"+-*/"``; ``/`` is exact integer division.
        parentheses: if true, the operands are grouped by a random binary tree and every
            problem shows at least one pair of parentheses (needs >= 3 operands).
        allow_negative: if false, problems whose answer is negative are not drawn
            (intermediate results may still be negative).
    """

    name: str
    digits: tuple[int, ...]
    operators: str
    parentheses: bool = False
    allow_negative: bool = False

    def __post_init__(self) -> None:
        if len(self.digits) < 2 or any(not 1 <= d <= 9 for d in self.digits):
            raise ValueError(
                f"level {self.name!r}: need >= 2 operands of 1..9 digits, got {self.digits}"
            )
        if not self.operators or set(self.operators) - set(OPERATORS):
            raise ValueError(f"level {self.name!r}: operators must be a subset of {OPERATORS!r}")
        if self.parentheses and len(self.digits) < 3:
            raise ValueError(f"level {self.name!r}: parentheses need >= 3 operands")


#: Named presets. The issue's measured baselines (one-shot SmolLM2-135M) were 1-digit op
#: 1-digit 69.5%, 2-digit +/- 2-digit 21.5%, 2-digit x 1-digit 26.5%, three operands 1%,
#: 2-digit x 2-digit 3.5%.
PRESETS: dict[str, Level] = {
    level.name: level
    for level in (
        Level("1d+1d", (1, 1), "+"),
        Level("1dop1d", (1, 1), "+-*"),
        Level("2d+-2d", (2, 2), "+-"),
        Level("2dx1d", (2, 1), "*"),
        Level("2dx2d", (2, 2), "*"),
        Level("3ops", (2, 1, 1), "+-*"),
        Level("3ops-paren", (1, 1, 1), "+-*", parentheses=True),
        Level("div", (2, 1), "/"),
    )
}


def get_level(level: str | Level) -> Level:
    """A :class:`Level` from a preset name (or the level itself).

    Raises:
        KeyError: for an unknown name, listing the presets.
    """
    if isinstance(level, Level):
        return level
    try:
        return PRESETS[level]
    except KeyError:
        raise KeyError(
            f"unknown arithmetic level {level!r}; presets: {', '.join(PRESETS)}"
        ) from None


MixtureSpec = str | Level | Mapping[str, float] | Iterable[tuple[str | Level, float]]


def parse_mixture(spec: MixtureSpec) -> list[tuple[Level, float]]:
    """Levels and normalised weights from a mixture spec (R26).

    Accepted forms: a preset name (``"2d+-2d"``), a :class:`Level`, a string
    ``"2d+-2d:0.6,2dx1d:0.4"`` (a name without ``:w`` weighs 1), a mapping name -> weight, or
    an iterable of (name or Level, weight) pairs.

    Raises:
        ValueError: for a malformed spec, a negative weight or weights summing to 0.
        KeyError: for an unknown level name.
    """
    if isinstance(spec, Level):
        pairs: list[tuple[str | Level, float]] = [(spec, 1.0)]
    elif isinstance(spec, str):
        pairs = []
        for item in filter(None, (s.strip() for s in spec.split(","))):
            name, sep, weight = item.rpartition(":")
            if not sep:
                name, weight = item, "1"
            try:
                pairs.append((name.strip(), float(weight)))
            except ValueError:
                raise ValueError(f"bad weight {weight!r} in mixture spec {spec!r}") from None
    elif isinstance(spec, Mapping):
        pairs = [(k, float(v)) for k, v in spec.items()]
    else:
        pairs = [(k, float(v)) for k, v in spec]
    if not pairs:
        raise ValueError(f"empty mixture spec {spec!r}")
    if any(w < 0 for _, w in pairs) or sum(w for _, w in pairs) <= 0:
        raise ValueError(f"mixture weights must be >= 0 and sum to > 0: {spec!r}")
    total = sum(w for _, w in pairs)
    return [(get_level(name), w / total) for name, w in pairs if w > 0]


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
        if _PRECEDENCE[op] == 2:
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
        value = _value(expr)
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
    answer_pattern: re.Pattern | str = _HASH_ANSWER,
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
    answer_pattern: re.Pattern | str = _HASH_ANSWER,
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
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
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

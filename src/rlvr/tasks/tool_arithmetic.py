"""Arithmetic a small model cannot do in its head but can with a calculator: the
``tool_arithmetic`` task source.

Five kinds of problem (the source's levels; a mixture spec such as
``"3dx3d:1,4dx2d:1,mixed3:1,words1:1,words2:1"`` draws them by weight, as ``data.mixture`` /
``sft.mixture``):

- ``3dx3d``: ``What is 347 * 628?`` (two 3-digit factors);
- ``4dx2d``: ``What is 4721 * 38?``;
- ``mixed3``: three operands, one product and a sum or difference, e.g. ``347 * 28 + 1593``,
  ``4210 - 53 * 71`` (never negative);
- ``words1``: one-step word problems whose expression the model must compose itself, e.g.
  "Each box holds 347 pens. How many pens are in 28 boxes?" (``347 * 28``);
- ``words2``: two-step word problems, e.g. "A store had 2823 apples and sold 39 bags of 16
  apples each. How many apples are left?" (``2823 - 39 * 16``); templates in
  :data:`WORD_TEMPLATES`.

SmolLM2-135M solves almost none of them unaided (3-digit products are far past its mental
arithmetic); with the ``calculator`` tool the direct kinds need one call with the question's
expression, the word problems the right expression. Every task's ``reference`` is the integer
answer, its ``metadata["expression"]`` the expression that computes it (what a tool-use
demonstration passes to the calculator, :mod:`rlvr.train.demonstrations`), and its
``solution`` a verified worked solution (place-value long multiplication, then ``#### N``) as
the arithmetic source's, for a single-turn SFT.

Splits are leak-free as the arithmetic generator's (:func:`rlvr.tasks.arithmetic.split_of`: a
hash of the commutativity-normalised expression, here salted with the kind and template), so
the same problem never lands in both splits whatever the seeds.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from rlvr.records import Task
from rlvr.tasks.arithmetic.expressions import Expr, render, value_of
from rlvr.tasks.arithmetic.generator import DEFAULT_VAL_FRACTION, make_task, split_of
from rlvr.tasks.arithmetic.levels import Level
from rlvr.tasks.mixture import check_generator_args, check_weights, split_weighted

SOURCE = "tool_arithmetic"
TASK_TYPE = "math"
SALT = "rlvr-tool-arith-v1"


def _number(rng: random.Random, digits: int) -> int:
    lo = 10 ** (digits - 1)
    return lo + int(rng.random() * (10**digits - lo))


#: Word problems by kind: (template over a, b, c; expression shape; digits of a, b, c). The
#: shape's operand order is the template's, so the demonstrated call reads the numbers as
#: written. ``words1``: one product; ``words2``: a product and a sum or difference.
WORD_TEMPLATES: dict[str, tuple[tuple[str, str, tuple[int, ...]], ...]] = {
    "words1": (
        ("Each box holds {a} pens. How many pens are in {b} boxes?", "a * b", (3, 2)),
        ("A farm has {a} rows of {b} trees. How many trees are there?", "a * b", (2, 3)),
        ("A bus trip costs {a} dollars per person. How many dollars do {b} people pay?",
         "a * b", (3, 2)),
        ("A printer prints {a} pages a day. How many pages does it print in {b} days?",
         "a * b", (3, 2)),
    ),
    "words2": (
        ("Tickets cost {a} dollars each. A club buys {b} tickets and pays a {c} dollar fee. "
         "How many dollars does it pay in all?", "a * b + c", (3, 2, 3)),
        ("A school has {c} pencils and orders {a} boxes of {b} pencils. How many pencils does "
         "it have now?", "c + a * b", (2, 3, 4)),
        ("A theater has {a} rows of {b} seats, and {c} seats are taken. How many seats are "
         "free?", "a * b - c", (2, 3, 3)),
        ("A store had {c} apples and sold {a} bags of {b} apples each. How many apples are "
         "left?", "c - a * b", (2, 2, 4)),
    ),
}

#: The ``mixed3`` shapes: (shape, digits of a, b, c).
MIXED_SHAPES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("a * b + c", (3, 2, 4)),
    ("a * b - c", (3, 2, 3)),
    ("c + a * b", (4, 3, 2)),
    ("c - a * b", (4, 2, 2)),
)


def _tree(shape: str, a: int, b: int, c: int | None) -> Expr:
    """The expression tree of a shape (``a * b``, ``a * b + c``, ``a * b - c``, ``c + a * b``,
    ``c - a * b``)."""
    product = ("*", a, b)
    return {"a * b": product, "a * b + c": ("+", product, c), "a * b - c": ("-", product, c),
            "c + a * b": ("+", c, product), "c - a * b": ("-", c, product)}[shape]


@dataclass(frozen=True)
class Problem:
    """One drawn problem: its expression tree, value, question text and split salt."""

    expr: Expr
    value: int
    question: str
    salt: str


def _direct(digits: tuple[int, int]) -> Callable[[random.Random, str], Problem]:
    def draw(rng: random.Random, kind: str) -> Problem:
        expr = _tree("a * b", _number(rng, digits[0]), _number(rng, digits[1]), None)
        return Problem(expr, value_of(expr), f"What is {render(expr)}?", f"{SALT}|{kind}")
    return draw


def _mixed(rng: random.Random, kind: str) -> Problem:
    while True:
        shape, digits = MIXED_SHAPES[int(rng.random() * len(MIXED_SHAPES))]
        expr = _tree(shape, *(_number(rng, d) for d in digits))
        value = value_of(expr)
        if value >= 0:
            return Problem(expr, value, f"What is {render(expr)}?", f"{SALT}|{kind}")


def _words(rng: random.Random, kind: str) -> Problem:
    templates = WORD_TEMPLATES[kind]
    while True:
        k = int(rng.random() * len(templates))
        template, shape, digits = templates[k]
        values = dict(zip("abc", (_number(rng, d) for d in digits)))
        expr = _tree(shape, values["a"], values["b"], values.get("c"))
        value = value_of(expr)
        if value > 0:
            return Problem(expr, value, template.format(**values), f"{SALT}|{kind}|{k}")


#: Kind name -> drawing function ``(rng, kind) -> Problem``.
KINDS: dict[str, Callable[[random.Random, str], Problem]] = {
    "3dx3d": _direct((3, 3)),
    "4dx2d": _direct((4, 2)),
    "mixed3": _mixed,
    "words1": _words,
    "words2": _words,
}
DEFAULT_MIXTURE = "3dx3d:1,4dx2d:1,mixed3:1,words1:1,words2:1"


def parse_mixture(spec: str) -> list[tuple[str, float]]:
    """Kinds and normalised weights of a mixture spec (``"3dx3d:1,words2:2"``; a kind without
    ``:w`` weighs 1).

    Raises:
        KeyError: an unknown kind (the message lists :data:`KINDS`).
        ValueError: a malformed spec or weights (negative, summing to 0).
    """
    pairs = split_weighted(spec, "tool_arithmetic mixture")
    total = check_weights(pairs, spec, "tool_arithmetic mixture")
    for name, _ in pairs:
        if name not in KINDS:
            raise KeyError(f"unknown tool_arithmetic kind {name!r}; kinds: {', '.join(KINDS)}")
    return [(name, w / total) for name, w in pairs if w > 0]


def make_problem_task(problem: Problem, kind: str, split: str, seed: int, index: int) -> Task:
    """The :class:`Task` of one problem: the arithmetic source's task (verified worked
    solution, ``metadata["expression"]``) with this source's id, prompt, kind and source.

    Raises:
        ValueError: the worked solution does not verify (never expected: a generator guard).
    """
    level = Level(kind, (1, 1), "*")  # only its name is used: the task's difficulty/category
    task = make_task(problem.expr, problem.value, level, split=split,
                     prompt_template=problem.question.replace("{", "{{").replace("}", "}}"),
                     metadata={"seed": seed, "index": index, "kind": kind})
    digest = hashlib.blake2b(f"{kind}|{problem.question}".encode(), digest_size=6).hexdigest()
    return replace(task, id=f"toolarith-{digest}", source=SOURCE)


def generate(spec: str, n: int, *, seed: int = 0, split: str = "train",
             val_fraction: float = DEFAULT_VAL_FRACTION, unique: bool = True) -> list[Task]:
    """``n`` tasks of ``split`` drawn from the mixture ``spec``, deterministically from
    ``seed`` (the same arguments always give the same list; train and validation never share
    a problem).

    Args:
        spec: a mixture spec over :data:`KINDS`.
        n: number of tasks (>= 0).
        seed: random seed.
        split: ``"train"`` or ``"validation"``.
        val_fraction: share of the problem space reserved for validation, in (0, 1).
        unique: no question twice within the returned list (the spaces are large: at 3-digit
            operands there are ~800k products).

    Raises:
        ValueError / KeyError: bad arguments or spec (see :func:`parse_mixture`).
    """
    check_generator_args(split, val_fraction, n)
    mixture = parse_mixture(spec)
    cumulative = list(itertools.accumulate(w for _, w in mixture))
    rng = random.Random(f"rlvr-tool-arithmetic|{seed}|{split}")
    tasks: list[Task] = []
    seen: set[str] = set()
    while len(tasks) < n:
        kind = mixture[min(bisect.bisect_right(cumulative, rng.random()), len(mixture) - 1)][0]
        problem = KINDS[kind](rng, kind)
        if split_of(problem.expr, val_fraction, problem.salt) != split:
            continue
        if unique and problem.question in seen:
            continue
        seen.add(problem.question)
        tasks.append(make_problem_task(problem, kind, split, seed, len(tasks)))
    return tasks

"""Logic and constraint tasks (R5), task type ``"logic"``: generators with difficulty levels and
solver-backed verifiers for two families.

**Countdown** (levels ``countdown-3``, ``countdown-4``, ``countdown-5``: how many numbers are
offered). "Using the numbers [3, 7, 25, 50] (each at most once) and + - * / with parentheses,
make 75." Reference::

    {"kind": "countdown", "numbers": [3, 7, 25, 50], "target": 75}

The answer is an expression on a final line ``#### (50 - 25) * 3``. It is read in
:data:`rlvr.exact.COUNTDOWN`'s grammar (integers, ``+ - * /``, parentheses, whitespace; no
unary minus) and evaluated exactly with :class:`fractions.Fraction`; it is never passed to
``eval`` or ``ast``.

**Knights and knaves** (levels ``kk-2``, ``kk-3``, ``kk-4``: how many inhabitants). Each
inhabitant is a knight (always tells the truth) or a knave (always lies) and makes one
structured statement, rendered to English in the prompt. Reference::

    {"kind": "knights_knaves", "people": ["Alice", "Bob"],
     "statements": [{"speaker": "Alice", "claim": {"op": "is", "who": "Bob", "role": "knave"}},
                    ...]}

Claims (see :func:`claim_holds`): ``is`` (who, role), ``not`` (claim), ``and`` / ``or``
(claims), ``same`` / ``different`` (who: list of names), ``at_least_one`` / ``exactly_one``
(who: list, role). Every generated puzzle has exactly one consistent assignment (checked by
brute force over all 2^N assignments). The answer is a final line
``#### Alice: knight, Bob: knave``.

:func:`generate_logic` builds the tasks (deterministic by seed, leak-free train / validation
split). The verifier side (answer parsing, claim semantics, the brute-force solver and
:func:`verify_logic`, registered for task type ``"logic"`` with the ``hash_line`` format rule)
lives in :mod:`rlvr.rewards.logic`, a lower layer: this module generates, re-exports those
names, and registers nothing.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rlvr.records import Task
from rlvr.rewards.logic import (  # noqa: F401  (the verifier side, re-exported)
    CLAIM_OPS,
    COUNTDOWN,
    KNIGHTS_KNAVES,
    ROLES,
    TASK_TYPE,
    LogicParseError,
    claim_holds,
    evaluate_countdown,
    final_answer_line,
    first_contradiction,
    join_names,
    parse_assignment,
    parse_countdown,
    render_claim,
    solve_knights_knaves,
    statement_text,
    verify_logic,
)
from rlvr.rewards.types import Status
from rlvr.tasks.arithmetic.expressions import Expr, render
from rlvr.tasks.arithmetic.solutions import solution_steps
from rlvr.tasks.mixture import check_generator_args, check_weights, split_weighted

SOURCE = "logic"
DEFAULT_VAL_FRACTION = 0.2


# ----------------------------------------------------------------------------- levels


@dataclass(frozen=True)
class LogicLevel:
    """A difficulty level.

    Attributes:
        name: the level's label, stored as the task's ``difficulty``.
        family: ``"countdown"`` or ``"knights_knaves"``, stored as the task's ``category``.
        size: numbers offered (countdown) or inhabitants (knights and knaves).
    """

    name: str
    family: str
    size: int


LEVELS: dict[str, LogicLevel] = {
    lv.name: lv
    for lv in (
        LogicLevel("countdown-3", COUNTDOWN, 3),
        LogicLevel("countdown-4", COUNTDOWN, 4),
        LogicLevel("countdown-5", COUNTDOWN, 5),
        LogicLevel("kk-2", KNIGHTS_KNAVES, 2),
        LogicLevel("kk-3", KNIGHTS_KNAVES, 3),
        LogicLevel("kk-4", KNIGHTS_KNAVES, 4),
    )
}


def parse_mixture(spec: str) -> list[tuple[LogicLevel, float]]:
    """Levels and normalised weights from a mixture spec.

    Args:
        spec: a level name (``"kk-3"``) or ``"countdown-3:0.5,kk-2:0.5"``; a name without
            ``:weight`` weighs 1.

    Returns:
        ``(level, weight)`` pairs with positive weights summing to 1, in spec order.

    Raises:
        ValueError: a malformed or empty spec, a negative weight, or weights summing to 0.
        KeyError: an unknown level name (the message lists the known ones).
    """
    pairs = split_weighted(spec, "logic mixture")
    total = check_weights(pairs, spec, "logic mixture")
    unknown = [name for name, _ in pairs if name not in LEVELS]
    if unknown:
        raise KeyError(f"unknown logic level {unknown[0]!r}; levels: {', '.join(LEVELS)}")
    return [(LEVELS[name], w / total) for name, w in pairs if w > 0]


# ----------------------------------------------------------------------------- countdown

# Classic Countdown cards: two of each small number, one of each large one.
_DECK = tuple(range(1, 11)) * 2 + (25, 50, 75, 100)
TARGET_RANGE = (10, 999)


def _random_tree(rng: random.Random, leaves: list[int]) -> Expr:
    if len(leaves) == 1:
        return leaves[0]
    k = rng.randrange(1, len(leaves))
    op = "+-*/"[rng.randrange(4)]
    return (op, _random_tree(rng, leaves[:k]), _random_tree(rng, leaves[k:]))


def _positive_int_value(tree: Expr) -> int | None:
    # Generated solutions keep every step a positive integer so the worked solution reads
    # naturally; answers to verify may use fractions and negatives freely.
    if isinstance(tree, int):
        return tree
    op, left, right = tree
    a, b = _positive_int_value(left), _positive_int_value(right)
    if a is None or b is None:
        return None
    if op == "/":
        value = a // b if a % b == 0 else None
    else:
        value = a + b if op == "+" else a - b if op == "-" else a * b
    return value if value is not None and value > 0 else None


def sample_countdown(
    rng: random.Random, size: int, max_tries: int = 10_000
) -> tuple[list[int], int, Expr]:
    """Draw one solvable countdown puzzle.

    ``size`` numbers are dealt from the Countdown deck (1-10 twice, 25, 50, 75, 100); a random
    expression tree over ``size`` or ``size - 1`` of them (all if ``size`` is 2), with every
    step a positive integer, gives the target, which must lie in ``TARGET_RANGE`` and not be
    one of the numbers. The tree is a solution, so at least one exists by construction.

    Returns:
        ``(numbers sorted ascending, target, solution tree)``.

    Raises:
        RuntimeError: no puzzle found in ``max_tries`` draws (a size too small to reach the
            target range).
    """
    lo, hi = TARGET_RANGE
    for _ in range(max_tries):
        numbers = rng.sample(_DECK, size)
        k = size if size <= 2 else size - rng.randrange(2)
        tree = _random_tree(rng, rng.sample(numbers, k))
        value = _positive_int_value(tree)
        if value is None or not lo <= value <= hi or value in numbers:
            continue
        return sorted(numbers), value, tree
    raise RuntimeError(f"no countdown puzzle with {size} numbers in {max_tries} draws")


def countdown_prompt(numbers: list[int], target: int) -> str:
    """The question text of a countdown puzzle, stating the answer format."""
    return (
        f"Using the numbers {numbers} (each at most once) and + - * / with parentheses, "
        f"make {target}.\n"
        "You do not have to use every number. / is exact division (intermediate results may "
        "be fractions); there is no unary minus (write 7 - 3, not -3 + 7). Work it out, then "
        "give the expression alone on a final line of the form:\n"
        "#### <expression>"
    )


def _countdown_task(level: LogicLevel, rng: random.Random) -> tuple[str, dict, str, dict]:
    numbers, target, tree = sample_countdown(rng, level.size)
    expression = render(tree)
    steps = solution_steps(tree, long_multiplication=False)
    solution = "\n".join(steps) + f"\n#### {expression}"
    reference = {"kind": COUNTDOWN, "numbers": numbers, "target": target}
    key = f"countdown|{numbers}|{target}"
    return key, reference, solution, {"expression": expression}


# ----------------------------------------------------------------------------- knights and knaves


# Distinct, single-word, distinct-initial names; a pool (rather than A, B, C) makes the small
# levels' problem spaces large enough for thousands of distinct puzzles.
NAMES = (
    "Alice", "Bob", "Carol", "Dave", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy",
    "Kevin", "Lena", "Mallory", "Nina", "Oscar", "Peggy", "Quinn", "Rupert", "Sybil", "Trent",
    "Uma", "Victor", "Walter", "Xena", "Yusuf", "Zoe",
)
_CLAIM_WEIGHTS = (4, 1, 2, 2, 2, 2, 2, 1)


def _atom(rng: random.Random, who: str) -> dict:
    return {"op": "is", "who": who, "role": rng.choice(ROLES)}


def _random_claim(rng: random.Random, speaker: str, people: list[str]) -> dict:
    op = rng.choices(CLAIM_OPS, _CLAIM_WEIGHTS)[0]
    others = [p for p in people if p != speaker]
    if op == "is":  # about oneself alone it is either empty or a paradox
        return _atom(rng, rng.choice(others))
    if op == "not":
        return {"op": "not", "claim": _atom(rng, rng.choice(others))}
    if op in ("and", "or"):
        return {"op": op, "claims": [_atom(rng, p) for p in rng.sample(people, 2)]}
    if op in ("same", "different"):
        pair = rng.sample(people, 2)
        return {"op": op, "who": [p for p in people if p in pair]}
    group = rng.sample(people, rng.randint(2, len(people)))
    return {"op": op, "who": [p for p in people if p in group], "role": rng.choice(ROLES)}


def sample_knights_knaves(
    rng: random.Random, size: int, max_tries: int = 10_000
) -> tuple[list[str], list[dict], dict[str, str]]:
    """Draw one puzzle with ``size`` inhabitants and a unique solution.

    Names come from :data:`NAMES`; a random assignment is drawn; each inhabitant makes one
    random statement that is true iff they are a knight under that assignment; the puzzle is
    kept only if :func:`solve_knights_knaves` finds exactly one consistent assignment.

    Returns:
        ``(people, statements, solution)``, the solution as ``{name: role}``.

    Raises:
        RuntimeError: no unique puzzle found in ``max_tries`` draws.
    """
    if not 2 <= size <= len(NAMES):
        raise ValueError(f"knights and knaves needs 2..{len(NAMES)} people, got {size}")
    for _ in range(max_tries):
        people = rng.sample(NAMES, size)
        knights = {p: rng.random() < 0.5 for p in people}
        statements = []
        for speaker in people:
            claim = _random_claim(rng, speaker, people)
            while claim_holds(claim, knights) != knights[speaker]:
                claim = _random_claim(rng, speaker, people)
            statements.append({"speaker": speaker, "claim": claim})
        solutions = solve_knights_knaves(people, statements)
        if len(solutions) == 1:
            return people, statements, solutions[0]
    raise RuntimeError(f"no unique knights-and-knaves puzzle with {size} people")


def knights_knaves_prompt(people: list[str], statements: list[dict]) -> str:
    """The question text of a knights-and-knaves puzzle, stating the answer format."""
    lines = "\n".join(statement_text(s) for s in statements)
    template = ", ".join(f"{p}: <role>" for p in people)
    return (
        "On an island, every inhabitant is either a knight, who always tells the truth, or a "
        f"knave, who always lies. You meet {len(people)} inhabitants: {join_names(people)}.\n"
        f"{lines}\n"
        "(\"or\" means at least one of the two.) Who is a knight and who is a knave? Work it "
        "out, then give everyone's role (knight or knave) on a final line of the form:\n"
        f"#### {template}"
    )


def _assignment_text(assignment: dict[str, str]) -> str:
    return ", ".join(f"{p}: {role}" for p, role in assignment.items())


def _case_line(statements: list[dict], knights: dict[str, bool]) -> str:
    case = _assignment_text({p: ROLES[0] if k else ROLES[1] for p, k in knights.items()})
    bad = first_contradiction(statements, knights)
    if bad is None:
        return (f"Suppose {case}. Every statement is true exactly when its speaker is a knight. "
                "Consistent.")
    speaker = bad["speaker"]
    role, truth = ("knight", "false") if knights[speaker] else ("knave", "true")
    return (f"Suppose {case}. Then {speaker} is a {role}, yet {speaker}'s statement is {truth}. "
            "Impossible.")


def _knights_knaves_solution(
    people: list[str], statements: list[dict], solution: dict[str, str]
) -> str:
    cases = [
        _case_line(statements, dict(zip(people, values)))
        for values in itertools.product((True, False), repeat=len(people))
    ]
    return "\n".join(
        [f"Check all {len(cases)} possible assignments; a knight's statement must be true "
         "and a knave's false."]
        + cases
        + ["Exactly one assignment is consistent.", f"#### {_assignment_text(solution)}"]
    )


def _anonymised(value: Any, index: dict[str, str]) -> Any:
    # Names replaced by their position, so a renamed copy of a puzzle gets the same split key.
    if isinstance(value, dict):
        return {k: _anonymised(v, index) for k, v in value.items()}
    if isinstance(value, list):
        return [_anonymised(v, index) for v in value]
    return index.get(value, value) if isinstance(value, str) else value


def _knights_knaves_task(level: LogicLevel, rng: random.Random) -> tuple[str, dict, str, dict]:
    people, statements, solution = sample_knights_knaves(rng, level.size)
    reference = {"kind": KNIGHTS_KNAVES, "people": people, "statements": statements}
    index = {p: f"#{i}" for i, p in enumerate(people)}
    key = "kk|" + json.dumps(_anonymised(statements, index), sort_keys=True)
    text = _knights_knaves_solution(people, statements, solution)
    return key, reference, text, {"solution": solution}


# ----------------------------------------------------------------------------- generation

_SAMPLERS = {COUNTDOWN: _countdown_task, KNIGHTS_KNAVES: _knights_knaves_task}


def split_of(
    key: str, val_fraction: float = DEFAULT_VAL_FRACTION, salt: str = "rlvr-logic-v1"
) -> str:
    """``"validation"`` for a ``val_fraction`` share of puzzle keys, else ``"train"``: a pure
    function of the puzzle (and the salt), independent of seeds, so splits never overlap."""
    digest = hashlib.blake2b(f"{salt}|{key}".encode(), digest_size=8).digest()
    return "validation" if int.from_bytes(digest, "big") / 2**64 < val_fraction else "train"


def _make_task(level: LogicLevel, key: str, reference: dict, solution: str, meta: dict) -> Task:
    verdict = verify_logic(solution, reference)
    if verdict.status is not Status.correct:  # guards the generator, never expected
        raise RuntimeError(f"generated {level.name} solution does not verify: {verdict.detail}")
    if level.family == COUNTDOWN:
        prompt = countdown_prompt(reference["numbers"], reference["target"])
    else:
        prompt = knights_knaves_prompt(reference["people"], reference["statements"])
    # The id hashes the reference, not the split key: renamed copies share a key, not an id.
    text = json.dumps(reference, sort_keys=True)
    digest = hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return Task(
        id=f"logic-{level.name}-{digest}",
        prompt=prompt,
        reference=reference,
        task_type=TASK_TYPE,
        source=SOURCE,
        difficulty=level.name,
        category=level.family,
        solution=solution,
        metadata={"level": level.name, **meta},
    )


def generate_logic(
    mixture: str,
    n: int,
    seed: int,
    split: str = "train",
    *,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    salt: str = "rlvr-logic-v1",
) -> list[Task]:
    """Generate ``n`` logic tasks of one split, deterministically from ``seed``.

    Levels are drawn by weight from the mixture; a puzzle is kept only if :func:`split_of` its
    key (countdown: sorted numbers and target; knights and knaves: the statements with names
    replaced by positions) is ``split`` and its reference is new in this list. So a train and
    a validation set never share a puzzle, nor a renamed copy of one, whatever their seeds.
    (Within one list, ``kk-2``'s few hundred statement patterns recur under different names.)

    Args:
        mixture: a level name or ``"countdown-3:0.5,kk-2:0.5"`` (see :func:`parse_mixture`);
            levels: ``countdown-3``, ``countdown-4``, ``countdown-5``, ``kk-2``, ``kk-3``,
            ``kk-4``.
        n: number of tasks (>= 0).
        seed: random seed; the same arguments give the same list.
        split: ``"train"`` or ``"validation"``.
        val_fraction: share of puzzles reserved for validation, in (0, 1).
        salt: changes the split assignment.

    Returns:
        Tasks with ``task_type="logic"``, ``source="logic"``, ``difficulty`` = level name,
        ``category`` = ``"countdown"`` or ``"knights_knaves"``, ``reference`` as in the module
        docs, ``solution`` a worked solution ending in its ``#### ...`` line (checked with
        :func:`verify_logic`), and ``metadata`` (``level``, ``split``, ``seed``, ``index``;
        countdown: ``expression``; knights and knaves: ``solution`` as ``{name: role}``).

    Raises:
        ValueError: a bad split, fraction, n or mixture, or a level that runs out of distinct
            puzzles in this split.
        KeyError: an unknown level name.
    """
    check_generator_args(split, val_fraction, n)
    levels = parse_mixture(mixture)
    cumulative = list(itertools.accumulate(w for _, w in levels))
    rng = random.Random(f"rlvr-logic|{seed}|{split}")
    tasks: list[Task] = []
    seen: set[str] = set()
    taken: Counter[str] = Counter()
    repeats: Counter[str] = Counter()
    while len(tasks) < n:
        i = min(bisect.bisect_right(cumulative, rng.random()), len(levels) - 1)
        level = levels[i][0]
        key, reference, solution, meta = _SAMPLERS[level.family](level, rng)
        if split_of(key, val_fraction, salt) != split:
            continue
        puzzle = json.dumps(reference, sort_keys=True)
        if puzzle in seen:
            repeats[level.name] += 1
            # Repeats outnumbering new puzzles mean the level's space in this split is mostly
            # used up; drawing on would spin or skew the mixture.
            if repeats[level.name] > taken[level.name] + 200:
                raise ValueError(
                    f"level {level.name!r} ran out of distinct {split} puzzles after "
                    f"{taken[level.name]}; ask for fewer tasks or give it a lower weight"
                )
            continue
        seen.add(puzzle)
        taken[level.name] += 1
        meta = {**meta, "split": split, "seed": seed, "index": len(tasks)}
        tasks.append(_make_task(level, key, reference, solution, meta))
    return tasks

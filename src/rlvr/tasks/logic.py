"""Logic and constraint tasks (R5), task type ``"logic"``: generators with difficulty levels and
solver-backed verifiers for two families.

**Countdown** (levels ``countdown-3``, ``countdown-4``, ``countdown-5``: how many numbers are
offered). "Using the numbers [3, 7, 25, 50] (each at most once) and + - * / with parentheses,
make 75." Reference::

    {"kind": "countdown", "numbers": [3, 7, 25, 50], "target": 75}

The answer is an expression on a final line ``#### (50 - 25) * 3``. It is read by a small
recursive-descent parser (integers, ``+ - * /``, parentheses, whitespace; no unary minus) and
evaluated exactly with :class:`fractions.Fraction`; it is never passed to ``eval`` or ``ast``.

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
split); :func:`verify_logic` is the verifier registered for task type ``"logic"`` with the
``hash_line`` format rule.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from rlvr.records import Task
from rlvr.rewards.registry import register_verifier
from rlvr.rewards.types import Status, Verdict
from rlvr.tasks.arithmetic import Expr, render, solution_steps

TASK_TYPE = "logic"
SOURCE = "logic"
SPLITS = ("train", "validation")
DEFAULT_VAL_FRACTION = 0.2
COUNTDOWN = "countdown"
KNIGHTS_KNAVES = "knights_knaves"
ROLES = ("knight", "knave")
_CLAIM_OPS = ("is", "not", "and", "or", "same", "different", "at_least_one", "exactly_one")


class LogicParseError(ValueError):
    """An answer could not be read: outside the grammar, too long, too deeply nested, or (for
    knights and knaves) a name missing, unknown or given twice. Scored ``unparsed``."""


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
    # rlvr.tasks.arithmetic.parse_mixture resolves names against the arithmetic presets only,
    # so it cannot be reused for these levels.
    pairs: list[tuple[str, float]] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, weight = item.rpartition(":")
        if not sep:
            name, weight = item, "1"
        try:
            pairs.append((name.strip(), float(weight)))
        except ValueError:
            raise ValueError(f"bad weight {weight!r} in logic mixture {spec!r}") from None
    if not pairs:
        raise ValueError(f"empty logic mixture {spec!r}")
    total = sum(w for _, w in pairs)
    if any(w < 0 for _, w in pairs) or total <= 0:
        raise ValueError(f"mixture weights must be >= 0 and sum to > 0: {spec!r}")
    unknown = [name for name, _ in pairs if name not in LEVELS]
    if unknown:
        raise KeyError(f"unknown logic level {unknown[0]!r}; levels: {', '.join(LEVELS)}")
    return [(LEVELS[name], w / total) for name, w in pairs if w > 0]


# ----------------------------------------------------------------------------- answers


def final_answer_line(completion: str) -> str | None:
    """The text after ``####`` on the last line that starts with ``####`` (leading whitespace
    allowed), stripped; ``None`` if there is no such line or it is empty."""
    for line in reversed(completion.splitlines()):
        stripped = line.strip()
        if stripped.startswith("####"):
            return stripped[4:].strip() or None
    return None


def _verdict(status: Status, answer: str, detail: str) -> Verdict:
    shown = answer if len(answer) <= 200 else answer[:200] + "..."
    return Verdict(status, extracted=shown, method="hash", detail=detail)


# ----------------------------------------------------------------------------- countdown: parser

MAX_EXPRESSION_CHARS = 200
MAX_NESTING = 50
_TOKEN = re.compile(r"\s*(?:([0-9]+)|([-+*/()]))")


def _tokenize(text: str) -> list[int | str]:
    tokens: list[int | str] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if not m:
            bad = text[pos:].lstrip()[:1]
            raise LogicParseError(f"unexpected character {bad!r}")
        tokens.append(int(m[1]) if m[1] is not None else m[2])
        pos = m.end()
    return tokens


class _Parser:
    # expr := term (("+" | "-") term)* ; term := factor (("*" | "/") factor)* ;
    # factor := INT | "(" expr ")".  No unary minus: "-" only ever appears between terms.

    def __init__(self, tokens: list[int | str]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    def peek(self) -> int | str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def parse(self) -> Expr:
        tree = self.expr()
        if self.i != len(self.tokens):
            raise LogicParseError(f"unexpected {self.tokens[self.i]!r} after a full expression")
        return tree

    def expr(self) -> Expr:
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.tokens[self.i]
            self.i += 1
            node = (op, node, self.term())
        return node

    def term(self) -> Expr:
        node = self.factor()
        while self.peek() in ("*", "/"):
            op = self.tokens[self.i]
            self.i += 1
            node = (op, node, self.factor())
        return node

    def factor(self) -> Expr:
        tok = self.peek()
        if isinstance(tok, int):
            self.i += 1
            return tok
        if tok == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise LogicParseError(f"parentheses nested deeper than {MAX_NESTING}")
            self.i += 1
            node = self.expr()
            if self.peek() != ")":
                raise LogicParseError("missing ')'")
            self.i += 1
            self.depth -= 1
            return node
        if tok is None:
            raise LogicParseError("expression ends where a number or '(' is expected")
        raise LogicParseError(f"unexpected {tok!r} where a number or '(' is expected")


def parse_countdown(expression: str) -> Expr:
    """Parse a countdown answer into an expression tree (an int, or ``(op, left, right)``).

    Grammar: non-negative integer literals, binary ``+ - * /`` with the usual precedence (left
    associative), parentheses, whitespace. Unary minus is NOT allowed (write ``7 - 3``, not
    ``-3 + 7``); nor is anything else (letters, ``**``, ``_``, ``,``, ``=``, ``.``), so text such
    as ``__import__('os')`` is rejected by the tokenizer and never executed.

    Args:
        expression: the answer text, e.g. ``"(50 - 25) * 3 / 7"``.

    Returns:
        The tree, e.g. ``("/", ("*", ("-", 50, 25), 3), 7)``.

    Raises:
        LogicParseError: empty, longer than 200 characters, parentheses nested deeper than
            50, or outside the grammar.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise LogicParseError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tokens = _tokenize(expression)
    if not tokens:
        raise LogicParseError("empty expression")
    return _Parser(tokens).parse()


def _leaves(tree: Expr) -> list[int]:
    if isinstance(tree, int):
        return [tree]
    return _leaves(tree[1]) + _leaves(tree[2])


def evaluate_countdown(tree: Expr) -> Fraction:
    """Exact value of a parsed countdown expression; ``/`` is true division (``7 / 2`` is 7/2).

    No exponentiation exists and answers are at most 200 characters, so every intermediate
    value has fewer than ~200 digits: the work is bounded without a separate size cap.

    Raises:
        ZeroDivisionError: on division by zero.
    """
    if isinstance(tree, int):
        return Fraction(tree)
    op, left, right = tree
    a, b = evaluate_countdown(left), evaluate_countdown(right)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return a / b


def _check_countdown(answer: str, reference: dict) -> Verdict:
    numbers, target = _countdown_reference(reference)
    try:
        tree = parse_countdown(answer)
    except LogicParseError as exc:
        return _verdict(Status.unparsed, answer, f"countdown: {exc}")
    over = Counter(_leaves(tree)) - Counter(numbers)
    if over:
        x = min(over)
        why = "is not one of" if x not in numbers else "is used more often than it appears in"
        return _verdict(Status.wrong, answer, f"countdown: {x} {why} {numbers}")
    try:
        value = evaluate_countdown(tree)
    except ZeroDivisionError:
        return _verdict(Status.wrong, answer, "countdown: division by zero")
    if value == target:
        return _verdict(Status.correct, answer, f"countdown: {answer} = {target}")
    return _verdict(Status.wrong, answer, f"countdown: {answer} = {value}, target {target}")


def _countdown_reference(reference: dict) -> tuple[list[int], int]:
    numbers, target = reference.get("numbers"), reference.get("target")
    if not isinstance(numbers, list) or not all(type(x) is int and x >= 0 for x in numbers):
        raise ValueError(f"countdown reference needs 'numbers': a list of ints, got {numbers!r}")
    if type(target) is not int:
        raise ValueError(f"countdown reference needs an int 'target', got {target!r}")
    return numbers, target


# ----------------------------------------------------------------------------- countdown: generator

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


def claim_holds(claim: dict, knights: dict[str, bool]) -> bool:
    """Whether a structured claim is true under an assignment.

    Args:
        claim: one of ``{"op": "is", "who": name, "role": "knight"|"knave"}``,
            ``{"op": "not", "claim": claim}``, ``{"op": "and"|"or", "claims": [claim, ...]}``
            (``or`` is inclusive), ``{"op": "same"|"different", "who": [name, name, ...]}``
            (all of one kind / not all of one kind), ``{"op": "at_least_one"|"exactly_one",
            "who": [name, ...], "role": role}``.
        knights: name -> True for a knight, False for a knave.

    Raises:
        ValueError: an unknown op or role, or a name not in ``knights``.
    """
    op = claim.get("op")
    if op not in _CLAIM_OPS:
        raise ValueError(f"unknown knights-and-knaves claim op {op!r}")
    if op == "not":
        return not claim_holds(claim["claim"], knights)
    if op in ("and", "or"):
        values = [claim_holds(c, knights) for c in claim["claims"]]
        return all(values) if op == "and" else any(values)
    if op in ("same", "different"):
        kinds = {_is_knight(knights, name) for name in claim["who"]}
        return (len(kinds) == 1) == (op == "same")
    is_role = _role_is_knight(claim.get("role"))
    if op == "is":
        return _is_knight(knights, claim["who"]) == is_role
    count = sum(_is_knight(knights, name) == is_role for name in claim["who"])
    return count >= 1 if op == "at_least_one" else count == 1


def _is_knight(knights: dict[str, bool], name: str) -> bool:
    try:
        return knights[name]
    except KeyError:
        raise ValueError(f"claim names {name!r}, who is not among {sorted(knights)}") from None


def _role_is_knight(role: Any) -> bool:
    if role not in ROLES:
        raise ValueError(f"role must be 'knight' or 'knave', got {role!r}")
    return role == "knight"


def solve_knights_knaves(people: list[str], statements: list[dict]) -> list[dict[str, str]]:
    """All consistent assignments, by brute force over the 2^N assignments.

    An assignment is consistent iff every statement's claim is true exactly when its speaker
    is a knight.

    Args:
        people: the inhabitants' names.
        statements: ``[{"speaker": name, "claim": claim}, ...]`` (claims: :func:`claim_holds`).

    Returns:
        Each consistent assignment as ``{name: "knight" | "knave"}``, knights-first order.

    Raises:
        ValueError: a malformed claim or an unknown speaker.
    """
    solutions = []
    for values in itertools.product((True, False), repeat=len(people)):
        knights = dict(zip(people, values))
        if _consistent(statements, knights):
            solutions.append({p: ROLES[0] if k else ROLES[1] for p, k in knights.items()})
    return solutions


def _consistent(statements: list[dict], knights: dict[str, bool]) -> bool:
    return _first_contradiction(statements, knights) is None


def _first_contradiction(statements: list[dict], knights: dict[str, bool]) -> dict | None:
    for statement in statements:
        if claim_holds(statement["claim"], knights) != _is_knight(knights, statement["speaker"]):
            return statement
    return None


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def render_claim(claim: dict) -> str:
    """A claim in English, e.g. ``"Bob is a knave or Carol is a knight"``; compound parts of
    ``and`` / ``or`` are parenthesised.

    Raises:
        ValueError: an unknown op.
    """
    op = claim.get("op")
    if op == "is":
        return f"{claim['who']} is a {claim['role']}"
    if op == "not":
        inner = claim["claim"]
        if inner.get("op") == "is":
            return f"{inner['who']} is not a {inner['role']}"
        return f"it is not true that {render_claim(inner)}"
    if op in ("and", "or"):
        parts = [
            f"({render_claim(c)})" if c.get("op") in ("and", "or") else render_claim(c)
            for c in claim["claims"]
        ]
        return f" {op} ".join(parts)
    if op == "same":
        return f"{_names(claim['who'])} are of the same kind"
    if op == "different":
        kinds = "not all of the same kind" if len(claim["who"]) > 2 else "of different kinds"
        return f"{_names(claim['who'])} are {kinds}"
    if op in ("at_least_one", "exactly_one"):
        quantity = "at least one" if op == "at_least_one" else "exactly one"
        return f"{quantity} of {_names(claim['who'])} is a {claim['role']}"
    raise ValueError(f"unknown knights-and-knaves claim op {op!r}")


def _statement_text(statement: dict) -> str:
    text = render_claim(statement["claim"])
    return f'{statement["speaker"]} says: "{text[0].upper()}{text[1:]}."'


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
    op = rng.choices(_CLAIM_OPS, _CLAIM_WEIGHTS)[0]
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
    lines = "\n".join(_statement_text(s) for s in statements)
    template = ", ".join(f"{p}: <role>" for p in people)
    return (
        "On an island, every inhabitant is either a knight, who always tells the truth, or a "
        f"knave, who always lies. You meet {len(people)} inhabitants: {_names(people)}.\n"
        f"{lines}\n"
        "(\"or\" means at least one of the two.) Who is a knight and who is a knave? Work it "
        "out, then give everyone's role (knight or knave) on a final line of the form:\n"
        f"#### {template}"
    )


def _assignment_text(assignment: dict[str, str]) -> str:
    return ", ".join(f"{p}: {role}" for p, role in assignment.items())


def _case_line(statements: list[dict], knights: dict[str, bool]) -> str:
    case = _assignment_text({p: ROLES[0] if k else ROLES[1] for p, k in knights.items()})
    bad = _first_contradiction(statements, knights)
    if bad is None:
        return f"Suppose {case}. Every statement is true exactly when its speaker is a knight. " \
            "Consistent."
    speaker = bad["speaker"]
    role, truth = ("knight", "false") if knights[speaker] else ("knave", "true")
    return f"Suppose {case}. Then {speaker} is a {role}, yet {speaker}'s statement is {truth}. " \
        "Impossible."


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


# ----------------------------------------------------------------------------- kk: answers

MAX_ASSIGNMENT_CHARS = 2000
_ITEM = re.compile(r"([^:]+?)\s*:\s*([A-Za-z]+)")


def parse_assignment(answer: str, people: list[str]) -> dict[str, bool]:
    """Read ``"Alice: knight, Bob: knave"`` into ``{"Alice": True, "Bob": False}``.

    Items are ``name: role`` separated by ``,`` or ``;`` in any order; names match the
    puzzle's case-insensitively, roles are ``knight`` / ``knave`` in any case; a trailing
    ``.`` and empty items are ignored.

    Raises:
        LogicParseError: an unreadable item, an unknown role or name, a name given twice, a
            missing name, or more than 2000 characters.
    """
    if len(answer) > MAX_ASSIGNMENT_CHARS:
        raise LogicParseError(f"answer longer than {MAX_ASSIGNMENT_CHARS} characters")
    lookup = {p.casefold(): p for p in people}
    knights: dict[str, bool] = {}
    for item in re.split(r"[,;]", answer.strip().removesuffix(".")):
        if not item.strip():
            continue
        m = _ITEM.fullmatch(item.strip())
        if not m:
            raise LogicParseError(f"cannot read {item.strip()!r} as 'name: knight|knave'")
        name, role = lookup.get(m[1].casefold()), m[2].lower()
        if name is None:
            raise LogicParseError(f"{m[1]!r} is not one of {people}")
        if role not in ROLES:
            raise LogicParseError(f"role of {name} is {m[2]!r}, not knight or knave")
        if name in knights:
            raise LogicParseError(f"{name} is named twice")
        knights[name] = role == "knight"
    missing = [p for p in people if p not in knights]
    if missing:
        raise LogicParseError(f"no role given for {', '.join(missing)}")
    return knights


def _check_knights_knaves(answer: str, reference: dict) -> Verdict:
    people, statements = reference.get("people"), reference.get("statements")
    if not isinstance(people, list) or not isinstance(statements, list):
        raise ValueError("knights_knaves reference needs 'people' and 'statements' lists")
    try:
        knights = parse_assignment(answer, people)
    except LogicParseError as exc:
        return _verdict(Status.unparsed, answer, f"knights_knaves: {exc}")
    bad = _first_contradiction(statements, knights)
    if bad is None:
        return _verdict(Status.correct, answer, "knights_knaves: consistent with every statement")
    return _verdict(
        Status.wrong, answer, f"knights_knaves: contradicts {_statement_text(bad)}"
    )


# ----------------------------------------------------------------------------- verifier

_CHECKERS: dict[str, Callable[[str, dict], Verdict]] = {
    COUNTDOWN: _check_countdown,
    KNIGHTS_KNAVES: _check_knights_knaves,
}


@register_verifier(TASK_TYPE, format_rule="hash_line")
def verify_logic(completion: str, reference: dict, **options: Any) -> Verdict:
    """Verify a logic-task completion against its reference (task type ``"logic"``).

    The answer is the text of the LAST line starting with ``####`` (none, or an empty one:
    ``unparsed``). Dispatch on ``reference["kind"]``:

    - ``"countdown"`` (``numbers``, ``target``): the answer is parsed by
      :func:`parse_countdown` (never executed); outside the grammar, over 200 characters or
      nested over 50 -> ``unparsed``; a number not in ``numbers`` or used more often than it
      appears there, or a division by zero -> ``wrong``; exact value == ``target`` ->
      ``correct``, else ``wrong``.
    - ``"knights_knaves"`` (``people``, ``statements``): the answer is read by
      :func:`parse_assignment` (malformed, missing, unknown or duplicate names ->
      ``unparsed``); ``correct`` iff every statement is true exactly when its speaker is a
      knight, else ``wrong``. Generated puzzles have one consistent assignment, so this is
      the solution; for a hand-made puzzle with several, any of them is accepted.

    Args:
        completion: the model's whole output.
        reference: the task's reference dict.
        options: accepted for the pipeline's interface; none are used.

    Returns:
        A :class:`Verdict` with ``method="hash"`` when a ``####`` line was found.

    Raises:
        ValueError: the reference is not a dict, has an unknown ``kind`` (named in the
            message) or is malformed. The pipeline reports it as status ``error``.
    """
    if not isinstance(reference, dict):
        raise ValueError(f"logic reference must be a dict, got {type(reference).__name__}")
    kind = reference.get("kind")
    checker = _CHECKERS.get(kind)
    if checker is None:
        raise ValueError(f"unknown logic reference kind {kind!r}; known: {', '.join(_CHECKERS)}")
    answer = final_answer_line(completion)
    if answer is None:
        return Verdict(Status.unparsed, detail=f"{kind}: no final '#### ...' line")
    return checker(answer, reference)


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
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
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

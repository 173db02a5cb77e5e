"""Finding the calculation steps of a text and judging each one: annotations ``<<a=b>>`` and
equations of a line, chains ``a = b = c`` link by link, the visible restatement of an annotation
counted once (the rules are in the package docstring).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from rlvr import exact

from .arith import CANON, canonical, evaluate, matches
from .bounds import MAX_ANNOTATION_CHARS, MAX_LINKS, MAX_STEPS
from .tokens import (
    Tok,
    binary_ops,
    clean_after,
    clean_before,
    depth_ok,
    dollar_start,
    number_text,
    split_at_breaks,
    tokenize,
)


@dataclass(frozen=True)
class Step:
    """One written calculation and its verdict.

    Attributes:
        expression: the expression as written, e.g. ``"48/2"``, ``"$5 + $7"``, ``"12 x 3"``.
        claimed: the claimed result as written, e.g. ``"24"``, ``"$12"``, ``"1,200"``, or
            an expression (``"37 * 50 + 37 * 8"``) for a chain link.
        value: exact value of ``expression``; None when it divides by zero.
        claimed_value: exact value of ``claimed`` (``25%`` reads 25); None when it divides
            by zero.
        correct: whether the claim matches the value (package docstring: judging).
        source: ``"annotation"`` (a ``<<...>>`` calculator annotation) or ``"equation"``
            (written in the text).
    """

    expression: str
    claimed: str
    value: Fraction | None
    claimed_value: Fraction | None
    correct: bool
    source: str


_ANNOTATION = re.compile(r"<<([^<>\n]*)>>")
_LATEX_OPS = re.compile(r"\\(?:times|cdot|div)(?![A-Za-z])")
_LATEX_MAP = {"\\times": "×", "\\cdot": "·", "\\div": "÷"}
# A run of characters that can belong to an equation, starting with a non-space. Linear: a
# greedy class repetition with nothing after it never backtracks.
_RUN = re.compile(r"[\d.,$+\-*/×÷·−–xX()=][\d.,$+\-*/×÷·−–xX()= \t]*")
# "4 / 3 = 1 and 1/3": a mixed number written with "and".
_AND_FRACTION = re.compile(r"[ \t]+and[ \t]+\(?(\d{1,6})/(\d{1,6})\)?")
_SPACES_AND_DOLLARS = re.compile(r"[\s$]*")


class _Budget:
    """Links examined so far in one text (:data:`MAX_LINKS`)."""

    def __init__(self) -> None:
        self.links = 0

    def spent(self) -> bool:
        return self.links >= MAX_LINKS


def _value(toks: list[Tok]) -> tuple[bool, Fraction | None]:
    """``(parsed, value)``; value None for a division by zero."""
    if not toks or not depth_ok(toks):
        return False, None
    try:
        return True, evaluate(canonical(toks))
    except exact.ExactSyntaxError:
        return False, None
    except ZeroDivisionError:
        return True, None


def _left(line: str, toks: list[Tok], check_start: bool, line_start: bool) -> list[Tok] | None:
    """The expression of a link from its side's tokens, or None if it is not a calculation.

    ``check_start``: the side begins a chain (after prose or a break), so it must start at a
    clean boundary. ``line_start``: nothing but spaces precede it on the line (bullets)."""
    # A ')' that closes nothing ends a label such as "1)" or "(a)": the expression follows it.
    depth, cut = 0, -1
    for i, t in enumerate(toks):
        depth += (t.kind == "lp") - (t.kind == "rp")
        if depth < 0:
            depth, cut, check_start, line_start = 0, i, True, False
    toks = toks[cut + 1:]
    if not toks or check_start and not clean_before(line, toks[0].start):
        return None
    if line_start and toks[0].text in "-*+" and len(toks) > 1 and toks[1].start > toks[0].end:
        toks = toks[1:]  # a bullet: "- 2 + 3 = 5"
    elif (len(toks) > 2 and toks[0].text == "*" and toks[1].text == "*"
          and toks[1].start == toks[0].end and toks[2].start == toks[1].end):
        toks = toks[2:]  # bold: "**2 + 3 = 5**"
    opening = sum(t.kind == "lp" for t in toks) - sum(t.kind == "rp" for t in toks)
    while opening > 0 and toks and toks[0].kind == "lp":
        toks, opening = toks[1:], opening - 1  # "(so 2 + 3 = 5)"
    if not toks:
        return None
    first = toks[0]
    if first.kind == "op":
        # Only a unary minus glued to its operand: "- 3 + 4" after prose is a cut expression.
        if first.text not in "-−–" or len(toks) < 2 or toks[1].start != first.end:
            return None
    return toks if binary_ops(toks) else None


def _decimals(tok: Tok) -> int:
    return len(tok.text.partition(".")[2])


def _leading_number(line: str, toks: list[Tok]) -> tuple[Fraction, str, int, int] | None:
    """The claim's leading number: (value, text as written, decimals, tokens used), with a
    glued unary minus and any ``$``."""
    sign, i = 1, 0
    if len(toks) > 1 and toks[0].text in "-−–" and toks[1].start == toks[0].end:
        sign, i = -1, 1
    if i >= len(toks) or toks[i].kind != "num":
        return None
    text = line[dollar_start(line, toks[0].start):toks[i].end]
    return sign * Fraction(number_text(toks[i])), text, _decimals(toks[i]), i + 1


def _judge(line: str, expr: list[Tok], claim: list[Tok], claim_ends: bool,
           source: str) -> tuple[Step, int] | None:
    """The step of one link ``expr = claim`` and where its claim starts, or None when the
    link is not a step.

    ``claim_ends``: prose (or nothing) follows the claim, so trailing markdown and brackets
    are dropped and what is glued after it is checked."""
    parsed, value = _value(expr)
    if not parsed:
        return None
    expression = line[dollar_start(line, expr[0].start):expr[-1].end]
    percent, extra, end = False, None, claim[-1].end
    if claim_ends:
        # Trailing markdown and brackets: "= 8**", "= 8)", "= 8 (".
        while len(claim) > 1 and (
                claim[-1].text == "*" and claim[-2].end == claim[-1].start
                or claim[-1].kind == "lp"
                or claim[-1].kind == "rp" and sum(t.kind == "lp" for t in claim)
                < sum(t.kind == "rp" for t in claim)):
            claim = claim[:-1]
        end = claim[-1].end
        # An expression cut by prose ("= 30 + M trees", "= 90/x") or a glued letter.
        if claim[-1].kind == "op" or not clean_after(line, end):
            return None
        percent = line.startswith("%", end) or line.startswith(" %", end)
        if len(claim) == 1 and claim[0].text.isdigit():
            m = _AND_FRACTION.match(line, end)
            if m and 0 < int(m.group(1)) < int(m.group(2)):
                extra, end = Fraction(int(m.group(1)), int(m.group(2))), m.end()
    lead = _leading_number(line, claim)
    bare = lead is not None and lead[3] == len(claim)
    c_parsed, c_value = _value(claim) if not bare else (True, None)
    if not bare and c_parsed:
        if percent:
            return None
        # An expression claim: the same value, or a running total led by the value so far.
        text = line[dollar_start(line, claim[0].start):claim[-1].end]
        if value is not None and c_value is not None and matches(value, c_value):
            return Step(expression, text, value, c_value, True, source), claim[0].start
        if value is not None and lead is not None and matches(value, lead[0], lead[2]):
            return Step(expression, lead[1], value, lead[0], True, source), claim[0].start
        return Step(expression, text, value, c_value, False, source), claim[0].start
    if lead is None:
        return None
    claimed, text, decimals, _ = lead
    if extra is not None:
        claimed, text, decimals = claimed + extra, line[dollar_start(line, claim[0].start):end], 0
    correct = value is not None and (
        matches(value, claimed, decimals)
        or percent and matches(value * 100, claimed, decimals))
    step = Step(expression, text + ("%" if percent else ""), value, claimed, correct, source)
    return step, claim[0].start


def _sides(line: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Bounds of the ``=``-separated sides of ``line[start:end]``, lazily."""
    pos = start
    while True:
        eq = line.find("=", pos, end)
        if eq < 0:
            yield pos, end
            return
        yield pos, eq
        pos = eq + 1


def _chain_steps(line: str, start: int, end: int, source: str, line_start: bool,
                 budget: _Budget) -> list[tuple[Step, int]]:
    """Steps of the equation chain(s) in ``line[start:end]`` (a run of arithmetic
    characters, or the inside of an annotation), each with the offset of its claim: one
    step per ``=`` link whose left side is a calculation and whose right side is a claim."""
    steps: list[tuple[Step, int]] = []
    sides = _sides(line, start, end)
    toks = tokenize(line, *next(sides))
    k = 0
    for bounds in sides:
        if budget.spent():
            break
        budget.links += 1
        right = tokenize(line, *bounds)
        if toks is not None and right is not None:
            pieces, right_pieces = split_at_breaks(toks), split_at_breaks(right)
            broken = len(pieces) > 1
            check = (k == 0 and source == "equation") or broken
            left = _left(line, pieces[-1], check, line_start and k == 0 and not broken)
            claim_ends = bounds[1] == end or len(right_pieces) > 1
            if left is not None and right_pieces[0]:
                found = _judge(line, left, right_pieces[0], claim_ends, source)
                if found is not None:
                    steps.append(found)
        toks = right
        k += 1
    return steps


def _canon_text(expression: str) -> str:
    return re.sub(r"[\s$,]", "", expression).translate(CANON)


def step_key(step: Step) -> tuple[str, Fraction | None]:
    """What makes two steps the same calculation: the expression without spaces, ``$`` and
    thousands commas, operators in one spelling, and the claimed value (``48 / 2 = 24`` and
    ``48/2 = $24`` are one step)."""
    return _canon_text(step.expression), step.claimed_value


def _line_steps(line: str, budget: _Budget) -> list[Step]:
    """Steps of one line: its annotations, then the equations of its visible text (the line
    with the annotations removed), less the visible restatements of annotations."""
    if "\\" in line:
        line = _LATEX_OPS.sub(lambda m: _LATEX_MAP[m.group()], line)
    found: list[tuple[int, int, Step]] = []  # (offset in the visible text, order, step)
    anchors: list[tuple[int, Fraction | None]] = []  # (offset, the annotation's result)
    visible, pos, offset = [], 0, 0
    for m in _ANNOTATION.finditer(line):
        visible.append(line[pos:m.start()])
        offset += m.start() - pos
        pos = m.end()
        if len(m.group(1)) <= MAX_ANNOTATION_CHARS and not budget.spent():
            steps = _chain_steps(line, m.start(1), m.end(1), "annotation", False, budget)
            found.extend((offset, 1, step) for step, _ in steps)
            if steps:
                anchors.append((offset, steps[-1][0].claimed_value))
    text = "".join(visible) + line[pos:] if pos else line
    if "=" not in text:
        return [step for *_, step in found]
    annotated = Counter((_canon_text(s.expression), s.claimed_value) for *_, s in found)
    first = len(text) - len(text.lstrip())
    for m in _RUN.finditer(text):
        if budget.spent():
            break
        if "=" not in m.group():
            continue
        for step, claim_at in _chain_steps(text, m.start(), m.end(), "equation",
                                           m.start() == first, budget):
            # "48/2 = <<48/2=24>>24" reads "48/2 = 24": the annotation's own calculation.
            anchor = next((a for a in anchors if a[0] <= claim_at and a[1] == step.claimed_value
                           and _SPACES_AND_DOLLARS.fullmatch(text, a[0], claim_at)), None)
            if anchor is not None:
                anchors.remove(anchor)
                continue
            key = (_canon_text(step.expression), step.claimed_value)
            if annotated[key]:
                annotated[key] -= 1
                continue
            found.append((m.start(), 0, step))
    found.sort(key=lambda f: (f[0], f[1]))
    return [step for *_, step in found]


def calculation_steps(text: str) -> list[Step]:
    """The calculations ``text`` writes, each recomputed and judged, in text order.

    A step is a GSM8K annotation ``<<expr=result>>`` or an arithmetic equation
    ``expr = result`` on one line; chains ``a = b = c`` give one step per ``=``. See the
    package docstring for exactly what counts, how chains and claims are judged, and the
    bounds. Numbers are compared as written, without units.

    Args:
        text: a completion or a reference solution, of any length (only the first
            :data:`MAX_STEPS` steps and :data:`MAX_LINKS` ``=`` links are examined).

    Returns:
        The :class:`Step` list, empty when the text writes no calculation.

    Raises:
        Nothing for any string: what cannot be read is not a step.
    """
    return scan_steps(text)[0]


def scan_steps(text: str) -> tuple[list[Step], bool]:
    """``(calculation_steps(text), complete)``: ``complete`` is False when a bound
    (:data:`MAX_STEPS`, :data:`MAX_LINKS`) stopped the reading before the text's last ``=``,
    so later calculations were never judged."""
    budget = _Budget()
    steps: list[Step] = []
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if "=" in line:
            steps.extend(_line_steps(line, budget))
            if len(steps) >= MAX_STEPS or budget.spent():
                rest = any("=" in later for later in lines[k + 1:])
                return steps[:MAX_STEPS], not (rest or budget.spent())
    return steps, True

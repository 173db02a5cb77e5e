"""Process reward (R4): check every calculation a solution writes, not only its final answer.

:func:`calculation_steps` finds the calculations of a completion and recomputes each one
exactly; :func:`process_score` is the share that is right. The reward pipeline adds it as the
``process`` component when ``RewardConfig.weights`` gives ``process`` a positive weight (off by
default; see :meth:`rlvr.rewards.pipeline.RewardPipeline._result`).

What counts as a step
---------------------
* A GSM8K calculator annotation ``<<48/2=24>>``: expression left of the ``=``, result right
  of it (``<<a=b=c>>`` is a chain, see below).
* A plain equation on one line: ``48/2 = 24``, ``3 * 4 = 12``, ``$5 + $7 = $12``,
  ``12 x 3 = 36``, ``1,000 + 200 = 1,200``, ``0.5 * 8 = 4``, ``4 - (-5) = 9``,
  ``3 1/2 - 2 = 1 1/2``. The expression is arithmetic over numbers with
  ``+ - * / × x ÷ ·`` and parentheses (``x`` only as a times sign before an operand;
  ``−`` and ``–`` are minus signs; ``\\times``, ``\\cdot``, ``\\div`` are read too) and
  has at least one operator. Numbers may carry ``$``, thousands separators (``1,200``,
  ``18 000``) and decimals (``0.5``, ``.5``). Not steps: algebra (``x = 5``,
  ``2x + 3 = 7``, ``100/5 = 5A/5``, ``= 30 + M``), a bare number (``12 = 12``), ratios and
  times (``3:4``, ``10:30``, ``0900``: integers with a leading zero are codes, not
  numbers), a decimal comma (``0,5``), percentages inside an expression, and prose.
* The expression must start at a clean boundary (line start, a space, a quote, an opening
  bracket), so the tail of a longer expression interrupted by words is never judged as if
  it were the whole calculation: ``20% of 50 = 10`` (only ``50`` is arithmetic: no
  operator), ``3 apples + 4 = 7`` and ``15 pages x 1/3 = 5`` (start with an operator) are
  not steps. List markers (``- 2 + 3 = 5``, ``1) 2 + 3 = 5``) and bold (``**2 + 3 = 5**``)
  are skipped.
* The visible restatement of an annotation, ``48/2 = <<48/2=24>>24`` (``48/2 = 24`` once
  the annotation is removed), is the annotation's own calculation and counts once: a plain
  equation is dropped when its claim directly follows an annotation with the same result,
  or when an annotation of the line has the same expression and result. A different
  visible result (``<<48/2=24>>25``) is a second, wrong step.

Fractions written inline follow the writer's grouping: ``3 1/2`` is a mixed number
(3.5), and a tight fraction after a spaced division is one operand, ``60 / 3/4`` = 80
(``60/3/4`` and ``60 / 3 / 4`` keep Python's left-to-right reading, 5). A claim
``1 and 1/3`` is the mixed number.

Chains ``a = b = c`` are judged link by link, left to right: each ``=`` is one step whose
expression is the side left of it and whose claim is the side right of it. A claim that is
itself an expression is right when it has the same value (``37 * 58 = 37 * 50 + 37 * 8``) or,
as a running total, when its leading number is the value so far: ``2 + 3 = 5 + 1 = 6`` is two
right steps (``2 + 3 = 5`` and ``5 + 1 = 6``); ``2 + 3 = 6 + 1 = 7`` has one wrong step. A
link whose left side is a bare number (``= 5 = 5``) is not a step.

Judging: arithmetic is exact (:class:`~fractions.Fraction`, :data:`rlvr.exact.DECIMAL`'s grammar,
never ``eval``). A claimed number is right when it equals the value exactly, within 1e-6
relative, or after rounding the value to the claim's number of decimals when the claim has
decimals (``10/3 = 3.33`` and ``2/3 = 0.667`` are right; ``2/3 = 0.66`` truncates and is wrong;
``10/3 = 3`` is wrong: an integer claim must be exact, so floor division written as ``13 / 6
= 2`` is wrong too). A claim written with ``%`` (``1/4 = 25%``, ``0.25 * 100 = 25%``) is right
when it matches the value read either way. A division by zero is a wrong step.

Units: none. Numbers are compared as written, whatever they count (``$1 / 2 = 50`` cents is
wrong).

GSM8K: of the 1,319 test reference answers, 1,296 (98.3%) score 1.0, 22 write no calculation
that is read here (algebra, ``27(1/3)=9``) and 1 scores less because the reference is wrong
(``$32 - $20 = $300``). On the 7,473 training answers, 7,292 score 1.0 and 27 less: about 20
reference errors (``2*8 = 24``, ``70 + 40 = 100``), unit changes (``$1 / 2 = 50``), floor
division, ranges (``Weeks 1-2 = 96 - 70``) and ``14 / 1 / 4 = 14 * 4``.

Limits: only what is written is judged; a completion may write one easy right step and
compute the rest in prose. Keep the ``process`` weight small (the outcome-dominance check of
``RewardConfig.weights`` enforces outcome > format + process).

Bounds (the score runs in the trainer's process, without the verifier pool's timeout): at most
:data:`MAX_STEPS` steps per text, :data:`MAX_LINKS` ``=`` links examined, sides of at most
:data:`MAX_SIDE_CHARS` characters, parentheses nested at most :data:`MAX_DEPTH` deep,
literals of at most :data:`MAX_DIGITS` digits, annotations of at most
:data:`MAX_ANNOTATION_CHARS` characters. Anything beyond a bound is skipped, never an error:
a 100,000-character line or 10,000 ``=`` signs take milliseconds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from rlvr import exact

__all__ = [
    "MAX_ANNOTATION_CHARS",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_LINKS",
    "MAX_SIDE_CHARS",
    "MAX_STEPS",
    "Step",
    "calculation_steps",
    "process_score",
]

#: At most this many steps are returned (and scored) per text.
MAX_STEPS = 64
#: At most this many ``=`` links are examined per text (steps or not).
MAX_LINKS = 256
#: A side of an equation longer than this (characters) is not read.
MAX_SIDE_CHARS = 200
#: Parentheses nested deeper than this are not read.
MAX_DEPTH = 16
#: A number with more digits than this is not read.
MAX_DIGITS = 30
#: An annotation ``<<...>>`` longer than this (characters inside) is not read.
MAX_ANNOTATION_CHARS = 300

_REL_TOL = Fraction(1, 10**6)


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
        correct: whether the claim matches the value (module docstring: judging).
        source: ``"annotation"`` (a ``<<...>>`` calculator annotation) or ``"equation"``
            (written in the text).
    """

    expression: str
    claimed: str
    value: Fraction | None
    claimed_value: Fraction | None
    correct: bool
    source: str


# ----------------------------------------------------------------------------- scanning

_ANNOTATION = re.compile(r"<<([^<>\n]*)>>")
_LATEX_OPS = re.compile(r"\\(?:times|cdot|div)(?![A-Za-z])")
_LATEX_MAP = {"\\times": "×", "\\cdot": "·", "\\div": "÷"}
# A run of characters that can belong to an equation, starting with a non-space. Linear: a
# greedy class repetition with nothing after it never backtracks.
_RUN = re.compile(r"[\d.,$+\-*/×÷·−–xX()=][\d.,$+\-*/×÷·−–xX()= \t]*")
_TOKEN = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)|\d+(?:\.\d+)?|\.\d+)"
    r"|(?P<op>[-+*/×÷·−–])|(?P<x>[xX])|(?P<lp>\()|(?P<rp>\))|(?P<skip>[ \t$]+)|(?P<brk>[.,])"
)
_GROUPED = re.compile(r"\d{1,3}(?: \d{3})*")
_CANON = str.maketrans(
    {"×": "*", "·": "*", "x": "*", "X": "*", "÷": "/", "−": "-", "–": "-"})
# Characters after which an expression may start (besides whitespace and line start).
_CLEAN_BEFORE = frozenset("\"'`([{\\*—")
# "4 / 3 = 1 and 1/3": a mixed number written with "and".
_AND_FRACTION = re.compile(r"[ \t]+and[ \t]+\(?(\d{1,6})/(\d{1,6})\)?")
_SPACES_AND_DOLLARS = re.compile(r"[\s$]*")


@dataclass
class _Tok:
    kind: str  # num, op, lp, rp, brk (x is resolved to op or brk)
    text: str
    start: int  # offsets in the line
    end: int


class _Budget:
    """Links examined so far in one text (:data:`MAX_LINKS`)."""

    def __init__(self) -> None:
        self.links = 0

    def spent(self) -> bool:
        return self.links >= MAX_LINKS


def _tokenize(line: str, start: int, end: int) -> list[_Tok] | None:
    """Tokens of ``line[start:end]`` (one side of an equation), spaces and ``$`` dropped,
    or None if the side is over a bound.

    ``17 000`` (thousands grouped by spaces) is one number; an integer with a leading zero
    (``0900``, a time or a code) is a break, as is ``x`` unless it is a times sign."""
    if end - start > MAX_SIDE_CHARS:
        return None
    toks: list[_Tok] = []
    for m in _TOKEN.finditer(line, start, end):
        kind, text = m.lastgroup, m.group()
        if kind == "skip":
            continue
        if kind == "num" and sum(c.isdigit() for c in text) > MAX_DIGITS:
            return None
        prev = toks[-1] if toks else None
        if (kind == "num" and prev is not None and prev.kind == "num" and len(text) == 3
                and text.isdigit() and line[prev.end:m.start()] == " "
                and _GROUPED.fullmatch(prev.text)):
            prev.text, prev.end = f"{prev.text} {text}", m.end()
            continue
        toks.append(_Tok(kind, text, m.start(), m.end()))  # type: ignore[arg-type]
    for tok in toks:
        if tok.kind == "num" and tok.text[0] == "0" and tok.text[1:2].isdigit():
            tok.kind = "brk"
    for i, tok in enumerate(toks):
        if tok.kind == "x":
            # A times sign before an operand, unless it ends a word ("box", "2x"): "pages x
            # 1/3" is a product whose left operand is prose, so what follows is no expression.
            before = toks[i - 1].kind if i else None
            after = toks[i + 1].kind if i + 1 < len(toks) else None
            glued = tok.start > 0 and (line[tok.start - 1].isalpha()
                                       or before == "num" and toks[i - 1].end == tok.start)
            tok.kind = ("op" if after in ("num", "lp") and (before in ("num", "rp") or not glued)
                        else "brk")
    return toks


def _pieces(toks: list[_Tok]) -> list[list[_Tok]]:
    """``toks`` split at breaks."""
    out: list[list[_Tok]] = [[]]
    for tok in toks:
        if tok.kind == "brk":
            out.append([])
        else:
            out[-1].append(tok)
    return out


def _dollar_start(line: str, pos: int) -> int:
    while pos > 0 and line[pos - 1] == "$":
        pos -= 1
    return pos


def _clean_before(line: str, pos: int) -> bool:
    """Whether an expression may start at ``line[pos]`` (nothing glued before it)."""
    pos = _dollar_start(line, pos)
    return pos == 0 or line[pos - 1].isspace() or line[pos - 1] in _CLEAN_BEFORE


def _clean_after(line: str, pos: int) -> bool:
    """Whether a claim may end at ``line[pos]``: not ``12:30``, ``1.2.3`` or ``0,5``, and
    not a single glued letter (``5A``, ``3r``: algebra; ``36cm`` is a unit and is fine)."""
    nxt = line[pos + 1] if pos + 1 < len(line) else ""
    if pos < len(line) and line[pos] in ".,:" and nxt.isdigit():
        return False
    return not (pos < len(line) and line[pos].isalpha() and not nxt.isalpha())


def _binary_ops(toks: list[_Tok]) -> int:
    return sum(1 for i, t in enumerate(toks)
               if t.kind == "op" and i and toks[i - 1].kind in ("num", "rp"))


def _depth_ok(toks: list[_Tok]) -> bool:
    depth = 0
    for t in toks:
        if t.kind == "lp":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif t.kind == "rp":
            depth -= 1
    return True


def _tight_fraction(toks: list[_Tok], i: int) -> bool:
    """``toks[i:i+3]`` is ``a/b`` written without spaces, not part of a longer tight term."""
    if i + 2 >= len(toks):
        return False
    a, slash, b = toks[i:i + 3]
    return (a.kind == "num" and slash.text == "/" and b.kind == "num"
            and a.end == slash.start and slash.end == b.start
            and (i + 3 == len(toks) or toks[i + 3].start > b.end))


def _number_text(tok: _Tok) -> str:
    return tok.text.replace(",", "").replace(" ", "")


def _canonical(toks: list[_Tok]) -> str:
    """The expression in :data:`rlvr.exact.DECIMAL`'s grammar.

    Commas, spaces of grouped thousands and ``$`` are dropped; ``× x · ÷ − –`` become
    ``* * * / - -``. Two readings follow how people write fractions inline: a mixed number
    ``3 1/2`` is ``(3+1/2)``, and a tight fraction after a spaced division, ``60 / 3/4``
    or ``25 / 1/3``, is one operand: ``60/(3/4)``. Tokens stay separated, so ``3 4`` is a
    syntax error, never ``34``."""
    out: list[str] = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if (t.kind == "num" and t.text.isdigit() and i + 1 < n and _tight_fraction(toks, i + 1)
                and toks[i + 1].text.isdigit() and toks[i + 3].text.isdigit()
                and int(toks[i + 1].text) < int(toks[i + 3].text)
                and (i == 0 or toks[i - 1].text not in "/÷")):
            out.append(f"({t.text}+{toks[i + 1].text}/{toks[i + 3].text})")  # mixed number
            i += 4
            continue
        if (t.text in "/÷" and i and _tight_fraction(toks, i + 1)
                and not (toks[i - 1].end == t.start and t.end == toks[i + 1].start)):
            out.append(f"/ ({_number_text(toks[i + 1])}/{_number_text(toks[i + 3])})")
            i += 4
            continue
        out.append(_number_text(t) if t.kind == "num" else t.text)
        i += 1
    return " ".join(out).translate(_CANON)


def evaluate(expression: str) -> Fraction:
    """Exact value of ``expression`` in :data:`rlvr.exact.DECIMAL`'s grammar.

    Raises:
        rlvr.exact.ExactSyntaxError: outside the grammar.
        ZeroDivisionError: a division by zero.
    """
    return exact.evaluate(expression, exact.DECIMAL)


def _value(toks: list[_Tok]) -> tuple[bool, Fraction | None]:
    """``(parsed, value)``; value None for a division by zero."""
    if not toks or not _depth_ok(toks):
        return False, None
    try:
        return True, evaluate(_canonical(toks))
    except exact.ExactSyntaxError:
        return False, None
    except ZeroDivisionError:
        return True, None


def _left(line: str, toks: list[_Tok], check_start: bool, line_start: bool) -> list[_Tok] | None:
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
    if not toks or check_start and not _clean_before(line, toks[0].start):
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
    return toks if _binary_ops(toks) else None


def _decimals(tok: _Tok) -> int:
    return len(tok.text.partition(".")[2])


def _matches(value: Fraction, claimed: Fraction, decimals: int = 0) -> bool:
    """``claimed`` is ``value``: exactly, within 1e-6 relative, or rounded to ``decimals``
    (> 0) places."""
    if value == claimed:
        return True
    if abs(value - claimed) <= _REL_TOL * max(abs(value), abs(claimed)):
        return True
    return decimals > 0 and abs(value - claimed) * 2 * 10**decimals <= 1


def _leading_number(line: str, toks: list[_Tok]) -> tuple[Fraction, str, int, int] | None:
    """The claim's leading number: (value, text as written, decimals, tokens used), with a
    glued unary minus and any ``$``."""
    sign, i = 1, 0
    if len(toks) > 1 and toks[0].text in "-−–" and toks[1].start == toks[0].end:
        sign, i = -1, 1
    if i >= len(toks) or toks[i].kind != "num":
        return None
    text = line[_dollar_start(line, toks[0].start):toks[i].end]
    return sign * Fraction(_number_text(toks[i])), text, _decimals(toks[i]), i + 1


def _judge(line: str, expr: list[_Tok], claim: list[_Tok], claim_ends: bool,
           source: str) -> tuple[Step, int] | None:
    """The step of one link ``expr = claim`` and where its claim starts, or None when the
    link is not a step.

    ``claim_ends``: prose (or nothing) follows the claim, so trailing markdown and brackets
    are dropped and what is glued after it is checked."""
    parsed, value = _value(expr)
    if not parsed:
        return None
    expression = line[_dollar_start(line, expr[0].start):expr[-1].end]
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
        if claim[-1].kind == "op" or not _clean_after(line, end):
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
        text = line[_dollar_start(line, claim[0].start):claim[-1].end]
        if value is not None and c_value is not None and _matches(value, c_value):
            return Step(expression, text, value, c_value, True, source), claim[0].start
        if value is not None and lead is not None and _matches(value, lead[0], lead[2]):
            return Step(expression, lead[1], value, lead[0], True, source), claim[0].start
        return Step(expression, text, value, c_value, False, source), claim[0].start
    if lead is None:
        return None
    claimed, text, decimals, _ = lead
    if extra is not None:
        claimed, text, decimals = claimed + extra, line[_dollar_start(line, claim[0].start):end], 0
    correct = value is not None and (
        _matches(value, claimed, decimals)
        or percent and _matches(value * 100, claimed, decimals))
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
    toks = _tokenize(line, *next(sides))
    k = 0
    for bounds in sides:
        if budget.spent():
            break
        budget.links += 1
        right = _tokenize(line, *bounds)
        if toks is not None and right is not None:
            pieces, right_pieces = _pieces(toks), _pieces(right)
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
    return re.sub(r"[\s$,]", "", expression).translate(_CANON)


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


# ----------------------------------------------------------------------------- public API


def calculation_steps(text: str) -> list[Step]:
    """The calculations ``text`` writes, each recomputed and judged, in text order.

    A step is a GSM8K annotation ``<<expr=result>>`` or an arithmetic equation
    ``expr = result`` on one line; chains ``a = b = c`` give one step per ``=``. See the
    module docstring for exactly what counts, how chains and claims are judged, and the
    bounds. Numbers are compared as written, without units.

    Args:
        text: a completion or a reference solution, of any length (only the first
            :data:`MAX_STEPS` steps and :data:`MAX_LINKS` ``=`` links are examined).

    Returns:
        The :class:`Step` list, empty when the text writes no calculation.

    Raises:
        Nothing for any string: what cannot be read is not a step.
    """
    budget = _Budget()
    steps: list[Step] = []
    for line in text.splitlines():
        if "=" in line:
            steps.extend(_line_steps(line, budget))
            if len(steps) >= MAX_STEPS or budget.spent():
                break
    return steps[:MAX_STEPS]


def process_score(text: str) -> float | None:
    """Share of the calculations in ``text`` that are right, in [0, 1].

    Args:
        text: a completion or a reference solution.

    Returns:
        ``correct steps / steps`` over :func:`calculation_steps`, or None when the text
        writes no calculation (the reward pipeline scores that 0.0, so that leaving the
        work out cannot earn the process reward).

    Raises:
        Nothing for any string.
    """
    steps = calculation_steps(text)
    if not steps:
        return None
    return sum(step.correct for step in steps) / len(steps)

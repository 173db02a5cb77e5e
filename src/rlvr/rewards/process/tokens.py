"""Scanning one side of an equation into tokens (numbers, operators, parentheses, breaks), and
where an expression may start and a claim may end in its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bounds import MAX_DEPTH, MAX_DIGITS, MAX_SIDE_CHARS

_TOKEN = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)|\d+(?:\.\d+)?|\.\d+)"
    r"|(?P<op>[-+*/×÷·−–])|(?P<x>[xX])|(?P<lp>\()|(?P<rp>\))|(?P<skip>[ \t$]+)|(?P<brk>[.,])"
)
_GROUPED = re.compile(r"\d{1,3}(?: \d{3})*")
# Characters after which an expression may start (besides whitespace and line start).
# ">" ends a tag: "<think>48/2 = 24" starts a calculation.
_CLEAN_BEFORE = frozenset("\"'`([{\\*—>")


@dataclass
class Tok:
    """A token of one side of an equation; ``start`` and ``end`` are offsets in the line."""

    kind: str  # num, op, lp, rp, brk (x is resolved to op or brk)
    text: str
    start: int  # offsets in the line
    end: int


def tokenize(line: str, start: int, end: int) -> list[Tok] | None:
    """Tokens of ``line[start:end]`` (one side of an equation), spaces and ``$`` dropped,
    or None if the side is over a bound.

    ``17 000`` (thousands grouped by spaces) is one number; an integer with a leading zero
    (``0900``, a time or a code) is a break, as is ``x`` unless it is a times sign."""
    if end - start > MAX_SIDE_CHARS:
        return None
    toks: list[Tok] = []
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
        toks.append(Tok(kind, text, m.start(), m.end()))  # type: ignore[arg-type]
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


def split_at_breaks(toks: list[Tok]) -> list[list[Tok]]:
    """``toks`` split at breaks."""
    out: list[list[Tok]] = [[]]
    for tok in toks:
        if tok.kind == "brk":
            out.append([])
        else:
            out[-1].append(tok)
    return out


def dollar_start(line: str, pos: int) -> int:
    """``pos`` moved left over the ``$`` signs written right before it."""
    while pos > 0 and line[pos - 1] == "$":
        pos -= 1
    return pos


def clean_before(line: str, pos: int) -> bool:
    """Whether an expression may start at ``line[pos]`` (nothing glued before it)."""
    pos = dollar_start(line, pos)
    return pos == 0 or line[pos - 1].isspace() or line[pos - 1] in _CLEAN_BEFORE


def clean_after(line: str, pos: int) -> bool:
    """Whether a claim may end at ``line[pos]``: not ``12:30``, ``1.2.3`` or ``0,5``, and
    not a single glued letter (``5A``, ``3r``: algebra; ``36cm`` is a unit and is fine)."""
    nxt = line[pos + 1] if pos + 1 < len(line) else ""
    if pos < len(line) and line[pos] in ".,:" and nxt.isdigit():
        return False
    return not (pos < len(line) and line[pos].isalpha() and not nxt.isalpha())


def binary_ops(toks: list[Tok]) -> int:
    """How many operators of ``toks`` have an operand on their left (not a unary sign)."""
    return sum(1 for i, t in enumerate(toks)
               if t.kind == "op" and i and toks[i - 1].kind in ("num", "rp"))


def depth_ok(toks: list[Tok]) -> bool:
    """Whether the parentheses of ``toks`` nest at most :data:`MAX_DEPTH` deep."""
    depth = 0
    for t in toks:
        if t.kind == "lp":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif t.kind == "rp":
            depth -= 1
    return True


def number_text(tok: Tok) -> str:
    """A number token as :data:`rlvr.exact.DECIMAL` reads it: thousands separators (commas,
    grouping spaces) dropped."""
    return tok.text.replace(",", "").replace(" ", "")

"""The value of a written expression: its tokens as text in :data:`rlvr.exact.DECIMAL`'s grammar
(how people write fractions inline), evaluated exactly, and whether a claimed number matches it.
"""

from __future__ import annotations

from fractions import Fraction

from rlvr import exact

from .tokens import Tok, number_text

_REL_TOL = Fraction(1, 10**6)
CANON = str.maketrans(
    {"×": "*", "·": "*", "x": "*", "X": "*", "÷": "/", "−": "-", "–": "-"})


def _tight_fraction(toks: list[Tok], i: int) -> bool:
    """``toks[i:i+3]`` is ``a/b`` written without spaces, not part of a longer tight term."""
    if i + 2 >= len(toks):
        return False
    a, slash, b = toks[i:i + 3]
    return (a.kind == "num" and slash.text == "/" and b.kind == "num"
            and a.end == slash.start and slash.end == b.start
            and (i + 3 == len(toks) or toks[i + 3].start > b.end))


def canonical(toks: list[Tok]) -> str:
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
            out.append(f"/ ({number_text(toks[i + 1])}/{number_text(toks[i + 3])})")
            i += 4
            continue
        out.append(number_text(t) if t.kind == "num" else t.text)
        i += 1
    return " ".join(out).translate(CANON)


def evaluate(expression: str) -> Fraction:
    """Exact value of ``expression`` in :data:`rlvr.exact.DECIMAL`'s grammar.

    Raises:
        rlvr.exact.ExactSyntaxError: outside the grammar.
        ZeroDivisionError: a division by zero.
    """
    return exact.evaluate(expression, exact.DECIMAL)


def matches(value: Fraction, claimed: Fraction, decimals: int = 0) -> bool:
    """``claimed`` is ``value``: exactly; or, for a claim written with ``decimals`` (> 0)
    places, within 1e-6 relative or rounded to that many places. An integer claim must be
    exact at any size (``1000000 / 3 = 333333`` is floor division, wrong, though within
    1e-6 relative)."""
    if value == claimed:
        return True
    if decimals == 0 and claimed.denominator == 1:
        return False
    if abs(value - claimed) <= _REL_TOL * max(abs(value), abs(claimed)):
        return True
    return decimals > 0 and abs(value - claimed) * 2 * 10**decimals <= 1

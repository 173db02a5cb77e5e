"""Fast exact parsing of numeric answers, in plain Python (no sympy).

Most answers in practice are numbers: integers with thousands separators, decimals, fractions,
percentages, scientific notation, numbers written in Chinese. These are parsed here into exact
:class:`fractions.Fraction` values together with how they were written (how many decimals, was
there a percent sign), because the tolerance policy depends on the writing: ``3.14`` is a
rounded value, ``\\frac{157}{50}`` is exact.

A small arithmetic evaluator (:func:`eval_arith`) also handles ``(9+1)``, ``2^{100}``,
``1 \\times 10^{3}``, ``\\frac{3}{3}`` exactly; it refuses anything whose result would be huge
(:class:`TooLarge`) so adversarial towers such as ``9^{9^{9^{9}}}`` cost microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rlvr import exact
from rlvr.exact import TooLarge  # noqa: F401  (re-exported: callers catch it from here)

from .numwords import chinese_number, english_number

MAX_BITS = exact.LATEX.max_bits          # largest exact integer we build (~60k digits)
MAX_FACTORIAL = exact.LATEX.max_factorial


@dataclass(frozen=True)
class Num:
    """A parsed numeric answer.

    Attributes:
        value: the exact value (a percent is kept as written: ``25%`` has value 25).
        decimals: number of digits after the decimal point when written as a decimal
            (``3.14`` -> 2, ``18.00`` -> 2), ``None`` when written exactly (integer, fraction).
        percent: a percent sign (or word) was attached.
    """

    value: Fraction
    decimals: int | None = None
    percent: bool = False

    @property
    def is_decimal(self) -> bool:
        return self.decimals is not None


_PLAIN_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_THOUSANDS_RE = re.compile(r"[+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_SCI_RE = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*"
                     r"(?:[eE]\s*([+-]?\d+)|(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?)")
_FRAC_RE = re.compile(r"([+-]?)\\frac\{\s*([+-]?\d+)\s*\}\{\s*([+-]?\d+)\s*\}")
_SLASH_RE = re.compile(r"([+-]?\d+)\s*/\s*([+-]?\d+)")
_MIXED_RE = re.compile(r"([+-]?)(\d{1,3}(?:[ ,]\d{3})+|\d+)[ \t]+(\d+)\s*/\s*(\d+)")
_REPEATING_RE = re.compile(r"([+-]?)(\d*)\.(\d*)\\overline\{(\d+)\}")
_PERCENT_RE = re.compile(r"\s*(?:%|\\%|percent|per cent|pct)\s*$", re.I)
_SCALE_WORDS = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "万": 4, "亿": 8}


def _words(t: str) -> Num | None:
    parsed = chinese_number(t) or english_number(t)
    return None if parsed is None else Num(parsed[0], parsed[1])


def _decimal(text: str) -> Num | None:
    t = text.replace(" ", "")
    if _THOUSANDS_RE.fullmatch(t):
        t = t.replace(",", "")
    if not _PLAIN_RE.fullmatch(t):
        return None
    dec = len(t.split(".")[1]) if "." in t else None
    try:
        return Num(Fraction(t if not t.endswith(".") else t[:-1]), dec)
    except (ValueError, ZeroDivisionError):
        return None


def parse_number(text: str) -> Num | None:
    """Parse ``text`` if it is exactly one number, else return ``None``.

    Accepted: ``-1,234.5``, ``.5``, ``1e-3``, ``1.5 \\times 10^{3}``, ``3/4``, ``\\frac{-1}{2}``,
    ``-\\frac{1}{2}``, trailing ``%`` / ``percent``, ``5 million``, Chinese numerals
    (``三点一四``, ``百分之二十五``). Division by zero, words and expressions return ``None``.
    """
    t = text.strip()
    if not t or len(t) > 200:
        return None
    percent = False
    m = _PERCENT_RE.search(t)
    if m:
        percent, t = True, t[:m.start()].strip()
    if t.startswith("百分之"):
        percent, t = True, t[3:]
    n = _parse_core(t)
    if n is None:
        return None
    return Num(n.value, n.decimals, percent or n.percent)


def _parse_core(t: str) -> Num | None:
    n = _decimal(t)
    if n is not None:
        return n
    m = _SCI_RE.fullmatch(t)
    if m:
        exp = int(m.group(2) or m.group(3))
        if abs(exp) > 400:
            return None
        mant = _decimal(m.group(1))
        if mant is None:
            return None
        # 5.42e-20 is rounded at the 22nd decimal; 1 \times 10^3 is exact
        dec = None if mant.decimals is None else mant.decimals - exp
        return Num(mant.value * Fraction(10) ** exp, dec)
    m = _REPEATING_RE.fullmatch(t)
    if m:
        return _repeating(m)
    for rx in (_FRAC_RE,):
        m = rx.fullmatch(t)
        if m:
            num, den = int(m.group(2)), int(m.group(3))
            if den == 0:
                return None
            v = Fraction(num, den)
            return Num(-v if m.group(1) == "-" else v)
    m = _SLASH_RE.fullmatch(t)
    if m and int(m.group(2)) != 0:
        return Num(Fraction(int(m.group(1)), int(m.group(2))))
    m = _MIXED_RE.fullmatch(t)
    if m and int(m.group(3)) < int(m.group(4)):
        # "4 4/9", "-11 5/6", "1 000 4/9": a whole number and a proper fraction (mixed number)
        v = int(re.sub(r"[ ,]", "", m.group(2))) + Fraction(int(m.group(3)), int(m.group(4)))
        return Num(-v if m.group(1) == "-" else v)
    m = re.fullmatch(r"(.+?)\s*(?:\\text\{\s*)?(thousand|million|billion|trillion|万|亿)\}?", t)
    if m:
        base = _decimal(m.group(1)) or _words(m.group(1))
        if base is not None:
            return Num(base.value * 10 ** _SCALE_WORDS[m.group(2)], None)
    return _words(t)


def _repeating(m: re.Match) -> Num:
    """``0.1\\overline{6}`` = 1/6: fixed part plus the repeating block over 99..9."""
    sign, whole, fixed, block = m.group(1), m.group(2) or "0", m.group(3), m.group(4)
    value = Fraction(int(whole)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value += Fraction(int(block), (10 ** len(block) - 1) * 10 ** len(fixed))
    return Num(-value if sign == "-" else value)


# ---------------------------------------------------------------------------------------------
# Exact arithmetic evaluator for simple numeric LaTeX (no variables, no functions).


def eval_arith(text: str) -> Fraction | None:
    """Evaluate a purely numeric LaTeX/plain expression exactly (:data:`rlvr.exact.LATEX`).

    Supports ``+ - * / ^ **``, ``\\cdot``, ``\\times``, ``\\div``, ``\\frac{}{}``, parentheses,
    braces and factorial. Returns ``None`` when the text is not such an expression (it has
    variables, functions, fractional powers, more than 400 tokens...), on division by zero,
    and when the exact result would exceed ~``MAX_BITS`` bits (power towers, huge factorials:
    :class:`TooLarge` is a ``ValueError``, refused as non-evaluable).
    """
    try:
        return exact.evaluate(text, exact.LATEX)
    except (ZeroDivisionError, RecursionError, ValueError, OverflowError):
        return None

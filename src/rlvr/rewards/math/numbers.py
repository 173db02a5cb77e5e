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

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from .numwords import chinese_number, english_number

MAX_BITS = 200_000          # largest exact integer we are willing to build (~60k digits)
MAX_FACTORIAL = 3000


class TooLarge(ValueError):
    """Raised when evaluating an expression would build an astronomically large number."""


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
_SCI_RE = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?:[eE]\s*([+-]?\d+)|(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?)")
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

_TOKEN_RE = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\frac|\\cdot|\\times|\\div|\*\*|[-+*/^(){}!]|\\left|\\right)")


def _tokenize(s: str) -> list[str] | None:
    pos, out = 0, []
    s = s.strip()
    while pos < len(s):
        m = _TOKEN_RE.match(s, pos)
        if not m:
            return None
        tok = m.group(1)
        if tok not in (r"\left", r"\right"):
            out.append(tok)
        pos = m.end()
    return out


class _Parser:
    """Recursive-descent parser over tokens; evaluates exactly with Fractions."""

    def __init__(self, toks: list[str]):
        self.t, self.i = toks, 0

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, tok: str | None = None) -> str:
        cur = self.peek()
        if cur is None or (tok is not None and cur != tok):
            raise SyntaxError(tok)
        self.i += 1
        return cur

    def expr(self) -> Fraction:
        v = self.term()
        while self.peek() in ("+", "-"):
            v = v + self.term() if self.take() == "+" else v - self.term()
        return v

    def term(self) -> Fraction:
        v = self.unary()
        while self.peek() in ("*", "/", r"\cdot", r"\times", r"\div"):
            op = self.take()
            r = self.unary()
            if op in ("/", r"\div"):
                if r == 0:
                    raise ZeroDivisionError
                v = v / r
            else:
                v = v * r
            _check_size(v)
        return v

    def unary(self) -> Fraction:
        if self.peek() in ("-", "+"):
            return -self.unary() if self.take() == "-" else self.unary()
        return self.power()

    def power(self) -> Fraction:
        base = self.postfix()
        if self.peek() in ("^", "**"):
            self.take()
            exp = self.unary_power()
            return _pow(base, exp)
        return base

    def unary_power(self) -> Fraction:
        if self.peek() in ("-", "+"):
            return -self.unary_power() if self.take() == "-" else self.unary_power()
        return self.power()

    def postfix(self) -> Fraction:
        v = self.atom()
        while self.peek() == "!":
            self.take()
            if v.denominator != 1 or v < 0 or v > MAX_FACTORIAL:
                raise TooLarge("factorial")
            v = Fraction(math.factorial(int(v)))
        return v

    def atom(self) -> Fraction:
        tok = self.take()
        if tok in ("(", "{"):
            v = self.expr()
            self.take(")" if tok == "(" else "}")
            return v
        if tok == r"\frac":
            self.take("{")
            num = self.expr()
            self.take("}")
            self.take("{")
            den = self.expr()
            self.take("}")
            if den == 0:
                raise ZeroDivisionError
            return num / den
        if tok[0].isdigit() or tok[0] == ".":
            return Fraction(tok.rstrip(".") or "0")
        raise SyntaxError(tok)


def _check_size(v: Fraction) -> None:
    if v.numerator.bit_length() > MAX_BITS or v.denominator.bit_length() > MAX_BITS:
        raise TooLarge("value")


def _pow(base: Fraction, exp: Fraction) -> Fraction:
    if exp.denominator != 1:
        raise SyntaxError("fractional exponent")   # irrational in general: leave to sympy
    e = int(exp)
    if base in (0, 1) or base == -1:
        if base == 0 and e < 0:
            raise ZeroDivisionError
        return base ** e
    bits = max(base.numerator.bit_length(), base.denominator.bit_length())
    if abs(e) * bits > MAX_BITS:
        raise TooLarge("power")
    return base ** e


def eval_arith(text: str) -> Fraction | None:
    """Evaluate a purely numeric LaTeX/plain expression exactly.

    Supports ``+ - * / ^ **``, ``\\cdot``, ``\\times``, ``\\div``, ``\\frac{}{}``, parentheses,
    braces and factorial. Returns ``None`` when the text is not such an expression (it has
    variables, functions, fractional powers...), or on division by zero.

    Raises:
        TooLarge: the exact result would exceed ~``MAX_BITS`` bits (power towers, huge
            factorials); callers treat such values as non-evaluable.
    """
    toks = _tokenize(text)
    if not toks or len(toks) > 400:
        return None
    p = _Parser(toks)
    try:
        v = p.expr()
    except (SyntaxError, ZeroDivisionError, RecursionError, ValueError, OverflowError):
        return None
    return v if p.peek() is None else None

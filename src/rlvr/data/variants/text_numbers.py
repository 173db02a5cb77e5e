"""Numbers in the text of a GSM8K problem (:mod:`rlvr.data.variants`, steps 1, 2 and 6).

The exact arithmetic of the calculator annotations (:func:`evaluate`, :func:`literals`), the
numerals and number words of running text (:func:`find_numerals`, :func:`find_number_words`),
the constants a question implies (:func:`problem_constants`) and the decimal text of a value
(:func:`format_decimal`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from rlvr import exact

# ----------------------------------------------------------------------------- evaluation

#: An annotation expression is outside the grammar (numbers, + - * /, parentheses); the
#: exact-arithmetic module's syntax error, under the name the variants have always used.
ArithmeticSyntaxError = exact.ExactSyntaxError
#: A number in an expression: its character span and exact value.
Literal = exact.Literal


def literals(expr: str) -> list[Literal]:
    """The numbers of an arithmetic expression, in order.

    Raises:
        ArithmeticSyntaxError: for characters outside digits, ``.``, ``+ - * / ( )`` and spaces.
    """
    return exact.literals(expr, exact.DECIMAL)


def evaluate(expr: str, values: Sequence[Fraction] | None = None) -> Fraction:
    """Exact value of an arithmetic expression, without ``eval``.

    Grammar (:data:`rlvr.exact.DECIMAL`): decimal literals (``48``, ``1.5``, ``.5``), unary
    ``+``/``-``, binary ``+ - * /`` with the usual precedence, parentheses. Arithmetic is
    exact (fractions).

    Args:
        expr: e.g. ``"48/2"``, ``"(20/100)*25"``.
        values: optional replacement value for each literal, in order (for re-running an
            annotation with new numbers); defaults to the literals' own values.

    Returns:
        The value as a :class:`~fractions.Fraction`.

    Raises:
        ArithmeticSyntaxError: for input outside the grammar or a wrong number of ``values``.
        ZeroDivisionError: for a division by zero.
    """
    return exact.evaluate(expr, exact.DECIMAL, values)


# ----------------------------------------------------------------------------- numerals

# A numeral in running text: 80,000 / 1.5 / .5 / 48 (not part of a word or a longer number).
_NUMERAL = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\.\d+|\d+)(?![\w,]*\d)")
_ORDINAL_SUFFIX = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
         "eighty": 80, "ninety": 90}
NUMBER_WORDS: dict[str, int] = {
    **{w: i for i, w in enumerate(_UNITS)}, **_TENS,
    "hundred": 100, "thousand": 1000, "million": 1_000_000, "dozen": 12,
}
"""Number words whose values count as constants of a problem (tens-units compounds such as
"twenty-five" are read as their parts, 20 and 5, and their sum)."""

_PROSE_NUMBER_WORD = re.compile(
    r"\b(?:(" + "|".join(_TENS) + r")(?:[- ](" + "|".join(_UNITS[1:10]) + r"))?\b|("
    + "|".join(_UNITS) + r")\b)", re.IGNORECASE)

WORD_CONSTANTS: dict[str, tuple[int, ...]] = {
    **dict.fromkeys(("half", "halves", "halved", "twice", "double", "doubled", "doubles", "pair",
                     "pairs", "couple", "second", "other", "both", "weekend", "weekends"), (2,)),
    **dict.fromkeys(("third", "thirds", "triple", "tripled", "triples", "thrice"), (3,)),
    **dict.fromkeys(("fourth", "fourths", "quadruple", "quadrupled"), (4,)),
    "quarter": (4, 25), "quarters": (4, 25),
    **{w: (n,) for n, w in enumerate(("fifth", "sixth", "seventh", "eighth", "ninth", "tenth"),
                                     start=5)},
    "fifths": (5,), "sixths": (6,), "sevenths": (7,), "eighths": (8,), "tenths": (10,),
    "percent": (100,), "percentage": (100,), "%": (100,),
    "dozen": (12,), "dozens": (12,), "weekday": (5,), "weekdays": (5,),
    "nickel": (5,), "nickels": (5,), "dime": (10,), "dimes": (10,),
}
"""Words (and ``%``) that imply a constant the annotations may use: "half" -> 2 (``48/2``),
"%" -> 100 (``30/100*180``), "dozen" -> 12, "quarter" -> 4 or 25 cents, ..."""

_UNIT_WORDS: dict[str, tuple[str, ...]] = {
    "second": ("seconds",), "minute": ("minute", "minutes"),
    "hour": ("hour", "hours", "hourly"), "day": ("day", "days", "daily"),
    "week": ("week", "weeks", "weekly"), "month": ("month", "months", "monthly"),
    "year": ("year", "years", "yearly", "annual", "annually"), "decade": ("decade", "decades"),
    "century": ("century", "centuries"), "inch": ("inch", "inches"), "foot": ("foot", "feet"),
    "yard": ("yard", "yards"), "ounce": ("ounce", "ounces"), "pound": ("pound", "pounds"),
    "quart": ("quart", "quarts"), "gallon": ("gallon", "gallons"), "cent": ("cent", "cents"),
    "dollar": ("dollar", "dollars", "$"),
}

UNIT_CONVERSIONS: tuple[tuple[str, str, int], ...] = (
    ("second", "minute", 60), ("minute", "hour", 60), ("hour", "day", 24), ("day", "week", 7),
    ("day", "month", 30), ("week", "month", 4), ("month", "year", 12), ("week", "year", 52),
    ("day", "year", 365), ("year", "decade", 10), ("year", "century", 100),
    ("inch", "foot", 12), ("foot", "yard", 3), ("ounce", "pound", 16), ("quart", "gallon", 4),
    ("cent", "dollar", 100),
)
"""Unit pairs whose conversion factor counts as a constant when the question names both
units (any of their forms): hours and minutes -> 60, days and weeks -> 7, ..."""


@dataclass(frozen=True)
class Numeral:
    """A number in running text: span, text, value, decimals written, whether a percent sign
    follows, whether it is an ordinal (``3rd``), whether it is written as a word."""

    start: int
    end: int
    text: str
    value: Fraction
    decimals: int
    percent: bool = False
    ordinal: bool = False
    word: bool = False


def find_numerals(text: str) -> list[Numeral]:
    """The numerals (digits) of a text, in order."""
    out = []
    for m in _NUMERAL.finditer(text):
        raw = m.group(1)
        plain = raw.replace(",", "")
        decimals = len(plain.partition(".")[2])
        after = text[m.end(1):m.end(1) + 9].lstrip().lower()
        out.append(Numeral(m.start(1), m.end(1), raw, Fraction(plain), decimals,
                           percent=after.startswith(("%", "percent")),
                           ordinal=bool(_ORDINAL_SUFFIX.match(text, m.end(1)))))
    return out


def find_number_words(text: str) -> list[Numeral]:
    """The cardinal number words of a text ("four", "twenty-five"), in order."""
    out = []
    for m in _PROSE_NUMBER_WORD.finditer(text):
        tens, unit, single = (g.lower() if g else g for g in m.groups())
        value = NUMBER_WORDS[single] if single else _TENS[tens] + (NUMBER_WORDS[unit] if unit
                                                                    else 0)
        out.append(Numeral(m.start(), m.end(), m.group(), Fraction(value), 0, word=True))
    return out


def problem_constants(question: str) -> set[Fraction]:
    """The constants a question's worked solution may use without stating them.

    The value of every number word ("three" -> 3, "twenty-five" -> 25), the constants its
    words imply (:data:`WORD_CONSTANTS`), the conversion factors between units it names
    (:data:`UNIT_CONVERSIONS`), the reciprocal of each (``.5`` for "half", ``.01`` for "%"),
    and 1 (``12 + 1``, ``1 - 0.2``).

    Args:
        question: the question text.

    Returns:
        A set of exact values.
    """
    text = question.lower()
    words = _WORD.findall(text)
    found = set(words) | {c for c in "%$" if c in text}
    values = {1}
    for w in words:
        if w in NUMBER_WORDS:
            values.add(NUMBER_WORDS[w])
    for w in found:
        values.update(WORD_CONSTANTS.get(w, ()))
    for a, b in zip(words, words[1:]):  # "twenty five" / "twenty-five"
        if a in _TENS and b in NUMBER_WORDS and NUMBER_WORDS[b] < 10:
            values.add(_TENS[a] + NUMBER_WORDS[b])
    units = {unit for unit, forms in _UNIT_WORDS.items() if found.intersection(forms)}
    values.update(f for a, b, f in UNIT_CONVERSIONS if a in units and b in units)
    return {Fraction(v) for v in values} | {Fraction(1, v) for v in values if v}


# ----------------------------------------------------------------------------- writing


def format_decimal(value: Fraction, decimals: int | None = None) -> str | None:
    """Decimal text of ``value``, or None if it does not terminate. ``decimals`` fixes the
    number of decimals (at least as many as the value needs); default: as many as needed."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return None
    needed = 0
    while (value * 10**needed).denominator != 1:
        needed += 1
    places = max(needed, decimals or 0)
    units = abs(value) * 10**places
    whole, frac = divmod(int(units), 10**places)
    sign = "-" if value < 0 else ""
    return sign + str(whole) + (f".{frac:0{places}d}" if places else "")


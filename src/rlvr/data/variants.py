"""Similar-but-different variants of numeric word problems, for memorisation checks (R32).

A model that memorised a GSM8K problem answers the original right and a copy with new numbers
wrong. :func:`make_variants` writes such copies: it changes the numbers in the question and
recomputes the answer by re-running the worked solution's calculator annotations
(``<<48/2=24>>``) on the new numbers. A variant is only produced when that recomputation can be
trusted. Otherwise the task is skipped and the reason is counted.

How one variant is made (:func:`make_variant`, GSM8K answer format):

1. Parse the answer: the annotations ``<<expr=result>>`` in order, and the final ``#### N``.
   Each original expression must evaluate exactly (:func:`evaluate`, no ``eval``) to its
   written result, and the last result must equal ``N``. The prose must not decide the
   answer by a comparison (``since 125 > 96``, "the cheapest") and must not compute outside
   the annotations (``60/15 = 4 containers`` with no ``<<>>``).
2. Read the numerals of the question (``48``, ``$80,000``, ``1.5``, ``60%``). Number *words*
   ("three", "half") are never changed, and neither are ordinals (``3rd``). A numeral is
   *pinned* (kept as it is) when its value is one of the problem's constants
   (:func:`problem_constants`): 0 or 1, a number word of the question, a constant a word
   implies ("half" -> 2, "%" -> 100, "dozen" -> 12; :data:`WORD_CONSTANTS`), a conversion
   between two units the question names (hours and minutes -> 60; :data:`UNIT_CONVERSIONS`),
   or the reciprocal of one of these. In the annotations a pinned value cannot be told apart
   from the constant, so it keeps its value. The other numerals are *free*.
3. Trace every number (literal) in every annotation expression to one source:
   - the result of an earlier annotation;
   - a free question value v, or for a free percentage v% also v/100, 1 + v/100 or
     1 - v/100;
   - a constant.
   A literal with no source is ``"unmapped"``: it was computed somewhere the annotations do
   not show. A literal with several sources is ``"ambiguous"``, for example 3 that is both a
   question number and an earlier result. A free numeral that no annotation uses is
   ``"unused_number"``: a distractor, or a total that the others must still add up to.
   In all three cases the task is skipped.
4. Draw new values for the free values, deterministic per ``(seed, task id)``. A new value
   keeps the number of decimals and trailing zeros (80,000 -> 60,000). Its leading digits are
   drawn from [m/2, 2m] (at least [1, 3]). It must be positive, differ from the old value,
   from the problem's constants and from the other new values, and a percentage up to 100
   stays at most 100.
5. Re-run the chain on the new values, earlier results feeding later literals. A draw is
   rejected when a result is non-integer where the original was an integer, changes sign
   (negative or zero where the original was not), is a non-terminating decimal, or divides
   by zero. Up to ``max_attempts`` draws are tried (``"no_valid_values"``).
6. Write the variant. The question gets its new numerals. In the reference, each
   annotation gets its new expression and result, the number shown right after an
   annotation gets the new result, and ``#### N`` becomes the new final result. The prose
   restating an expression before its annotation ("48/2 = ") gets the new literals. Other
   prose numbers, digits or number words, are mapped by value when that value has exactly
   one new value (a question value or a result). A value that has several new values, or
   that is also an unchanged constant, is ``"ambiguous_text"`` and the task is skipped.

Coverage (seed 0, one variant per task): a variant is made for 660 of the 1,319 GSM8K test
problems (50.0%) and 3,828 of the 7,473 training problems (51.2%). Test-set skips:
ambiguous 225, unannotated_step 148, unmapped 96, final_not_last 93, unused_number 26,
no_valid_values 26, no_annotations 18, no_free_numbers 17, decision 6, ambiguous_text 4.

Limits: only the annotation chain is checked, so the answer is right whenever the chain is
the whole computation. Words in the prose that name a number's role ("First triple the
cost") may no longer match a changed number. New numbers are not checked for real-world
sense: a week can get 10 working days.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from rlvr import exact
from rlvr.records import Task

# ----------------------------------------------------------------------------- evaluation

#: An annotation expression is outside the grammar (numbers, + - * /, parentheses); the
#: exact-arithmetic module's syntax error, under the name this module has always used.
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


# ----------------------------------------------------------------------------- parsing

_ANNOTATION = re.compile(r"<<([^<>=]*(?:=[^<>=]*)*)=([^<>=]*)>>")
_FINAL = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")
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
    **{w: (2,) for w in ("half", "halves", "halved", "twice", "double", "doubled", "doubles",
                         "pair", "pairs", "couple", "second", "other", "both", "weekend",
                         "weekends")},
    **{w: (3,) for w in ("third", "thirds", "triple", "tripled", "triples", "thrice")},
    **{w: (4,) for w in ("fourth", "fourths", "quadruple", "quadrupled")},
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

_DECISION_WORDS = re.compile(r"\b(?:maximi[sz]e|minimi[sz]e|whichever|cheapest|cheaper|"
                             r"better deal|best deal|more profitable)\b", re.IGNORECASE)
_COMPARISON_SIGN = re.compile(r"[<>\u2264\u2265]")


class VariantSkip(Exception):
    """A task gives no variant. ``reason`` is the key counted in :func:`make_variants`'s
    report (the reasons are listed in :func:`make_variant`); the message adds detail."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class _Step:
    """One annotation ``<<expr=result>>`` at ``span`` in the answer text."""

    expr: str
    literals: tuple[Literal, ...]
    result: Fraction
    span: tuple[int, int]


@dataclass(frozen=True)
class _Numeral:
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


def _numerals(text: str) -> list[_Numeral]:
    """The numerals (digits) of a text, in order."""
    out = []
    for m in _NUMERAL.finditer(text):
        raw = m.group(1)
        plain = raw.replace(",", "")
        decimals = len(plain.partition(".")[2])
        after = text[m.end(1):m.end(1) + 9].lstrip().lower()
        out.append(_Numeral(m.start(1), m.end(1), raw, Fraction(plain), decimals,
                            percent=after.startswith(("%", "percent")),
                            ordinal=bool(_ORDINAL_SUFFIX.match(text, m.end(1)))))
    return out


def _number_words(text: str) -> list[_Numeral]:
    """The cardinal number words of a text ("four", "twenty-five"), in order."""
    out = []
    for m in _PROSE_NUMBER_WORD.finditer(text):
        tens, unit, single = (g.lower() if g else g for g in m.groups())
        value = NUMBER_WORDS[single] if single else _TENS[tens] + (NUMBER_WORDS[unit] if unit
                                                                    else 0)
        out.append(_Numeral(m.start(), m.end(), m.group(), Fraction(value), 0, word=True))
    return out


def _parse_answer(answer: str) -> tuple[list[_Step], Fraction]:
    m = _FINAL.search(answer.strip())
    if not m:
        raise VariantSkip("no_final_answer")
    final = Fraction(m.group(1).replace(",", ""))
    steps = []
    for a in _ANNOTATION.finditer(answer):
        expr, result = a.group(1), a.group(2).strip()
        try:
            lits = tuple(literals(expr))
            value = evaluate(expr)
            written = Fraction(result.replace(",", ""))
        except (ArithmeticSyntaxError, ZeroDivisionError, ValueError):
            raise VariantSkip("bad_annotation", a.group(0)) from None
        if value != written:
            raise VariantSkip("chain_mismatch", a.group(0))
        steps.append(_Step(expr, lits, written, a.span()))
    if not steps:
        raise VariantSkip("no_annotations")
    if steps[-1].result != final:
        raise VariantSkip("final_not_last")
    return steps, final


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


# ----------------------------------------------------------------------------- analysis

# A literal's source: ("r", j): the result of step j | ("q", v): free question value v |
# ("p", v): v/100 | ("p+", v): 1 + v/100 | ("p-", v): 1 - v/100 (v a free percentage) |
# ("c", x): the constant x.
_Source = tuple[str, object]
_PERCENT_FORMS = {"p": lambda v: v / 100, "p+": lambda v: 1 + v / 100,
                  "p-": lambda v: 1 - v / 100}


@dataclass(frozen=True)
class _Plan:
    """What a task's chain depends on, computed once per task."""

    steps: list[_Step]
    sources: list[list[_Source]]  # per step, per literal
    numerals: list[_Numeral]  # question numerals with a free value
    used: list[Fraction]  # free values the chain uses, in first-use order
    unchanged: frozenset[Fraction]  # constants and unused numerals: no new value may equal one


def _literal_source(value: Fraction, k: int, steps: list[_Step], free: set[Fraction],
                    percents: dict[Fraction, set[_Source]], constants: set[Fraction]) -> _Source:
    found: set[_Source] = set()
    earlier = [j for j in range(k) if steps[j].result == value]
    if len(earlier) > 1:  # separate quantities that happen to be equal: which one is meant?
        raise VariantSkip("ambiguous", f"{value} is the result of several steps")
    found.update(("r", j) for j in earlier)
    if value in free:
        found.add(("q", value))
    found.update(percents.get(value, ()))
    if value in constants:
        found.add(("c", value))
    if not found:
        raise VariantSkip("unmapped", f"{value} in {steps[k].expr!r}")
    if len(found) > 1:
        raise VariantSkip("ambiguous", f"{value} in {steps[k].expr!r}: {sorted(map(str, found))}")
    return found.pop()


_UNANNOTATED_EQUALS = re.compile(r"=(?!\s*\$*\s*<<)")


def _check_prose(question: str, answer: str) -> None:
    """Skip answers whose prose computes what the annotations do not show.

    ``"decision"``: a comparison decides the answer (``since 125 > 96``, "the cheapest"), and
    new numbers could flip it. ``"unannotated_step"``: an equation outside the annotations
    (``60/15 = 4 containers``), whose result a later annotation may use.
    """
    prose = _ANNOTATION.sub("", answer)
    if _COMPARISON_SIGN.search(prose) or _DECISION_WORDS.search(question):
        raise VariantSkip("decision")
    if _UNANNOTATED_EQUALS.search(_ANNOTATION.sub("<<>>", answer)):
        raise VariantSkip("unannotated_step")


def _plan(question: str, answer: str) -> _Plan:
    steps, _ = _parse_answer(answer)
    _check_prose(question, answer)
    numerals = _numerals(question)
    constants = problem_constants(question) | {Fraction(0)}
    constants |= {n.value for n in numerals if n.ordinal}
    free = {n.value for n in numerals if n.value not in constants}
    constants |= {n.value for n in numerals} - free
    percents: dict[Fraction, set[_Source]] = {}
    for n in numerals:
        if n.percent and n.value in free:
            for kind, form in _PERCENT_FORMS.items():
                percents.setdefault(form(n.value), set()).add((kind, n.value))
    sources = [[_literal_source(lit.value, k, steps, free, percents, constants)
                for lit in step.literals] for k, step in enumerate(steps)]
    used: list[Fraction] = []
    for kind, value in (s for per in sources for s in per):
        if kind != "r" and kind != "c" and value not in used:
            used.append(value)  # type: ignore[arg-type]
    if not used:
        raise VariantSkip("no_free_numbers")
    unused = free - set(used)
    if unused:  # a distractor, or a number the annotations use only indirectly (a total)
        raise VariantSkip("unused_number", ", ".join(sorted(map(str, unused))))
    return _Plan(steps, sources, [n for n in numerals if n.value in used], used,
                 frozenset(constants | unused))


# ----------------------------------------------------------------------------- new values


def _decimals_of(value: Fraction, numerals: list[_Numeral]) -> int:
    return max((n.decimals for n in numerals if n.value == value), default=0)


def _draw(value: Fraction, decimals: int, percent: bool, rng: random.Random) -> Fraction:
    """A new value of similar magnitude: same decimals and trailing zeros, the leading part
    drawn from [m/2, 2m] (at least [1, 3])."""
    units = int(value * 10**decimals)
    zeros = 0
    while units >= 10 and units % 10 == 0:
        units //= 10
        zeros += 1
    low, high = max(1, math.ceil(units / 2)), max(3, 2 * units)
    scale = Fraction(10**zeros, 10**decimals)
    if percent and value <= 100:
        high = min(high, int(100 / scale))
    return rng.randint(low, max(low, high)) * scale


def _draw_all(plan: _Plan, rng: random.Random) -> dict[Fraction, Fraction] | None:
    new: dict[Fraction, Fraction] = {}
    for value in plan.used:
        is_pct = any(n.percent for n in plan.numerals if n.value == value)
        candidate = _draw(value, _decimals_of(value, plan.numerals), is_pct, rng)
        if candidate == value or candidate <= 0 or candidate in plan.unchanged \
                or candidate in new.values():
            return None
        new[value] = candidate
    return new


def _run_chain(plan: _Plan, new: dict[Fraction, Fraction]) -> tuple[list[list[Fraction]],
                                                                      list[Fraction]] | str:
    """New literal values and results per step, or the reason the draw is rejected."""
    results: list[Fraction] = []
    all_values: list[list[Fraction]] = []
    for step, sources in zip(plan.steps, plan.sources):
        values = []
        for (kind, ref), lit in zip(sources, step.literals):
            if kind == "r":
                values.append(results[ref])  # type: ignore[index]
            elif kind == "q":
                values.append(new[ref])  # type: ignore[index]
            elif kind in _PERCENT_FORMS:
                values.append(_PERCENT_FORMS[kind](new[ref]))  # type: ignore[index]
            else:
                values.append(lit.value)
        try:
            result = evaluate(step.expr, values)
        except ZeroDivisionError:
            return "zero_division"
        if step.result.denominator == 1 and result.denominator != 1:
            return "non_integer"
        if (result > 0) != (step.result > 0) or (result < 0) != (step.result < 0):
            return "sign_change"
        if _format(result) is None:
            return "non_terminating"
        all_values.append(values)
        results.append(result)
    return all_values, results


# ----------------------------------------------------------------------------- writing


def _format(value: Fraction, decimals: int | None = None) -> str | None:
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


def _fmt_like(value: Fraction, original_text: str) -> str:
    """``value`` written in the style of ``original_text``: at least as many decimals,
    thousands separators if it had them, no leading zero if it had none (``.5``)."""
    plain = original_text.replace(",", "")
    text = _format(value, len(plain.partition(".")[2]))
    if text is None:
        raise ValueError(f"{value} has no finite decimal form")
    if plain.startswith(".") and text.startswith("0."):
        text = text[1:]
    if "," in original_text:
        head, dot, tail = text.partition(".")
        text = f"{int(head):,}" + dot + tail
    return text


def _rewrite_question(question: str, plan: _Plan, new: dict[Fraction, Fraction]) -> str:
    out, pos = [], 0
    for n in plan.numerals:
        if n.value in new:
            out.append(question[pos:n.start])
            out.append(_fmt_like(new[n.value], n.text))
            pos = n.end
    out.append(question[pos:])
    return "".join(out)


def _expr_text(step: _Step, values: list[Fraction]) -> str:
    out, pos = [], 0
    for lit, value in zip(step.literals, values):
        out.append(step.expr[pos:lit.start])
        out.append(_fmt_like(value, step.expr[lit.start:lit.end]))
        pos = lit.end
    out.append(step.expr[pos:])
    return "".join(out)


class _ProseMap:
    """Old value -> new value for numbers in the prose around the annotations."""

    def __init__(self, plan: _Plan, new: dict[Fraction, Fraction], results: list[Fraction]):
        self.plan, self.new, self.results = plan, new, results

    def lookup(self, value: Fraction, step: int) -> Fraction:
        """The new value of a prose number in the text leading up to annotation ``step``
        (which may state that step's result before computing it: "He buys 20 rocks because
        100 / 5 = ..."), by value: a question value, a percentage form or a result of steps
        ``0..step``.

        Raises:
            VariantSkip("ambiguous_text"): when the value has several possible new values.
        """
        options: set[Fraction] = set()
        if value in self.new:
            options.add(self.new[value])
        for old, new in self.new.items():
            if any(n.percent for n in self.plan.numerals if n.value == old):
                options.update(form(new) for form in _PERCENT_FORMS.values()
                               if form(old) == value)
        options.update(self.results[j] for j in range(min(step + 1, len(self.results)))
                       if self.plan.steps[j].result == value)
        changed = {o for o in options if o != value}
        if not changed:
            return value
        if len(options) > 1 or value in self.plan.unchanged:
            raise VariantSkip("ambiguous_text", str(value))
        return changed.pop()


def _rewrite_segment(text: str, step_index: int, prose: _ProseMap,
                     restated: list[tuple[Fraction, Fraction]]) -> str:
    """Rewrite the numbers of one prose segment. ``restated`` pairs (old, new) for the
    expression restated at the segment's end, matched against its last numbers."""
    nums = [n for n in _numerals(text) if not n.ordinal]
    tail = nums[len(nums) - len(restated):] if restated and len(nums) >= len(restated) else []
    if [n.value for n in tail] != [old for old, _ in restated]:
        tail = []
    fixed = {id(n): new for n, (_, new) in zip(tail, restated)}
    out, pos = [], 0
    for n in sorted(nums + _number_words(text), key=lambda n: n.start):
        new_value = fixed.get(id(n))
        if new_value is None:
            new_value = prose.lookup(n.value, step_index)
        if new_value != n.value:
            out.append(text[pos:n.start])
            out.append(_format(new_value) if n.word else _fmt_like(new_value, n.text))
            pos = n.end
    out.append(text[pos:])
    return "".join(out)


_SHOWN_RESULT = re.compile(r"\s?\$?(-?\d[\d,]*(?:\.\d+)?)")


def _rewrite_answer(answer: str, plan: _Plan, new: dict[Fraction, Fraction],
                    values: list[list[Fraction]], results: list[Fraction]) -> str:
    prose = _ProseMap(plan, new, results)
    head = answer[: _FINAL.search(answer).start()]  # type: ignore[union-attr]
    out, pos = [], 0
    for k, step in enumerate(plan.steps):
        restated = list(zip((lit.value for lit in step.literals), values[k]))
        out.append(_rewrite_segment(head[pos:step.span[0]], k, prose, restated))
        out.append(f"<<{_expr_text(step, values[k])}={_fmt_like(results[k], str(step.result))}>>")
        pos = step.span[1]
        shown = _SHOWN_RESULT.match(head, pos)
        if shown and Fraction(shown.group(1).replace(",", "")) == step.result:
            out.append(head[pos:shown.start(1)])
            out.append(_fmt_like(results[k], shown.group(1)))
            pos = shown.end(1)
    out.append(_rewrite_segment(head[pos:], len(plan.steps), prose, []))
    final = _format(results[-1])
    return "".join(out).rstrip() + f"\n#### {final}"


# ----------------------------------------------------------------------------- public API


def make_variant(task: Task, k: int, rng: random.Random, max_attempts: int = 100,
                 exclude: Sequence[dict[str, str]] = ()) -> Task:
    """One numbers-changed variant of a GSM8K-format task (the module docstring gives the
    method).

    Args:
        task: a task whose ``reference`` is a GSM8K answer (annotations ``<<expr=result>>``,
            final ``#### N``) and whose ``prompt`` holds the question.
        k: the variant's number, used in its id ``<task.id>-var<k>``.
        rng: the random source for the new values (advanced by the call).
        max_attempts: draws of new values to try before giving up.
        exclude: substitution dicts of variants already made, not to be repeated.

    Returns:
        The new task: id ``<task.id>-var<k>``, the question with new numbers, the reference
        rewritten (new annotations, new ``#### N``), ``solution`` rewritten likewise (without
        annotations) when the task has one, and ``metadata`` = the task's metadata plus
        ``variant_of`` (the task id) and ``substitutions`` (old value -> new value, as
        decimal strings).

    Raises:
        VariantSkip: with ``reason`` one of: ``"not_gsm8k"`` (no ``####`` in a string
            reference), ``"no_final_answer"``, ``"bad_annotation"`` (outside the grammar),
            ``"chain_mismatch"`` (an annotation's expression does not give its result),
            ``"no_annotations"``, ``"final_not_last"`` (the last result is not ``N``),
            ``"decision"``, ``"unannotated_step"``, ``"unmapped"``, ``"ambiguous"``,
            ``"no_free_numbers"`` (nothing to change), ``"unused_number"``,
            ``"no_valid_values"`` (no draw passed the checks) or ``"ambiguous_text"``; see
            the module docstring for each.
    """
    if not isinstance(task.reference, str) or "####" not in task.reference:
        raise VariantSkip("not_gsm8k")
    plan = _plan(task.prompt, task.reference)
    for _ in range(max_attempts):
        new = _draw_all(plan, rng)
        if new is None:
            continue
        run = _run_chain(plan, new)
        if isinstance(run, str):
            continue
        values, results = run
        subs = {_format(old): _format(value) for old, value in new.items()}
        if subs in exclude:
            continue
        reference = _rewrite_answer(task.reference, plan, new, values, results)
        question = _rewrite_question(task.prompt, plan, new)
        return _variant_task(task, k, question, reference, subs)
    raise VariantSkip("no_valid_values")


def _variant_task(task: Task, k: int, question: str, reference: str,
                  subs: dict) -> Task:
    solution = None
    if task.solution is not None:
        from rlvr.tasks.sources import gsm8k_solution

        solution = gsm8k_solution(reference)
    return Task(id=f"{task.id}-var{k}", prompt=question, reference=reference,
                task_type=task.task_type, source=task.source, difficulty=task.difficulty,
                category=task.category, solution=solution,
                metadata={**task.metadata, "variant_of": task.id, "substitutions": subs})


def make_variants(tasks: Sequence[Task], per_task: int = 1, seed: int = 0,
                  max_attempts: int = 100) -> tuple[list[Task], dict]:
    """Numbers-changed variants of GSM8K-format word problems, with recomputed answers (R32).

    Args:
        tasks: tasks whose ``reference`` is a GSM8K answer (e.g. from
            :func:`rlvr.tasks.sources.load_gsm8k`); others are skipped as ``"not_gsm8k"``.
        per_task: variants wanted per task (>= 1), each with different substitutions.
        seed: the random seed. Task ``t`` draws from ``random.Random(f"{seed}:{t.id}")``, so
            its variants do not depend on the other tasks in the list.
        max_attempts: draws of new values tried per variant.

    Returns:
        ``(variants, report)``. ``variants`` holds the new tasks in input order, ids
        ``<id>-var1`` ... ``<id>-var<per_task>``. ``report`` holds ``tasks`` (the input count),
        ``made`` (variants produced), ``tasks_with_variant``, ``partial`` (tasks with some
        but fewer than ``per_task`` variants) and ``skipped``, a dict of reason to the number
        of tasks that gave no variant (reasons: see :func:`make_variant`).

    Raises:
        ValueError: if ``per_task`` < 1.
    """
    if per_task < 1:
        raise ValueError(f"per_task must be >= 1, got {per_task}")
    variants: list[Task] = []
    skipped: Counter[str] = Counter()
    with_variant = partial = 0
    for task in tasks:
        rng = random.Random(f"{seed}:{task.id}")
        made: list[Task] = []
        reason = ""
        for k in range(1, per_task + 1):
            try:
                made.append(make_variant(task, k, rng, max_attempts,
                                         [v.metadata["substitutions"] for v in made]))
            except VariantSkip as skip:
                reason = skip.reason
                break
        if made:
            with_variant += 1
            partial += len(made) < per_task
        else:
            skipped[reason] += 1
        variants.extend(made)
    report = {"tasks": len(tasks), "made": len(variants), "tasks_with_variant": with_variant,
              "partial": partial, "skipped": dict(sorted(skipped.items()))}
    return variants, report


__all__ = [
    "UNIT_CONVERSIONS",
    "WORD_CONSTANTS",
    "problem_constants",
    "NUMBER_WORDS",
    "ArithmeticSyntaxError",
    "Literal",
    "VariantSkip",
    "evaluate",
    "literals",
    "make_variant",
    "make_variants",
]

"""Which numbers of a GSM8K problem a variant may change (:mod:`rlvr.data.variants`, steps
1 to 3).

:func:`make_plan` parses the answer's calculator annotations, refuses answers whose prose
decides or computes outside them, and traces every literal of every annotation to one source
(an earlier result, a free question value or a percentage form of one, a constant); a task
that cannot be traced raises :class:`VariantSkip`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rlvr.data.variants.text_numbers import (
    ArithmeticSyntaxError,
    Literal,
    Numeral,
    evaluate,
    find_numerals,
    literals,
    problem_constants,
)

# ----------------------------------------------------------------------------- parsing

_ANNOTATION = re.compile(r"<<([^<>=]*(?:=[^<>=]*)*)=([^<>=]*)>>")
#: The final ``#### N`` line of a GSM8K answer (group 1: N).
FINAL_ANSWER = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")

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
class Step:
    """One annotation ``<<expr=result>>`` at ``span`` in the answer text."""

    expr: str
    literals: tuple[Literal, ...]
    result: Fraction
    span: tuple[int, int]


def _parse_answer(answer: str) -> tuple[list[Step], Fraction]:
    m = FINAL_ANSWER.search(answer.strip())
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
        steps.append(Step(expr, lits, written, a.span()))
    if not steps:
        raise VariantSkip("no_annotations")
    if steps[-1].result != final:
        raise VariantSkip("final_not_last")
    return steps, final


# ----------------------------------------------------------------------------- analysis

# A literal's source: ("r", j): the result of step j | ("q", v): free question value v |
# ("p", v): v/100 | ("p+", v): 1 + v/100 | ("p-", v): 1 - v/100 (v a free percentage) |
# ("c", x): the constant x.
_Source = tuple[str, object]
PERCENT_FORMS = {"p": lambda v: v / 100, "p+": lambda v: 1 + v / 100,
                 "p-": lambda v: 1 - v / 100}


@dataclass(frozen=True)
class Plan:
    """What a task's chain depends on, computed once per task."""

    steps: list[Step]
    sources: list[list[_Source]]  # per step, per literal
    numerals: list[Numeral]  # question numerals with a free value
    used: list[Fraction]  # free values the chain uses, in first-use order
    unchanged: frozenset[Fraction]  # constants and unused numerals: no new value may equal one


def _literal_source(value: Fraction, k: int, steps: list[Step], free: set[Fraction],
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


def make_plan(question: str, answer: str) -> Plan:
    """What the annotation chain of ``answer`` depends on (steps 1 to 3 of the method in
    :mod:`rlvr.data.variants`).

    Args:
        question: the question text.
        answer: the GSM8K answer (annotations ``<<expr=result>>``, final ``#### N``).

    Returns:
        The :class:`Plan`: the steps, each literal's source, the question numerals with a
        free value, the free values in first-use order, and the values no new value may equal.

    Raises:
        VariantSkip: ``"no_final_answer"``, ``"bad_annotation"``, ``"chain_mismatch"``,
            ``"no_annotations"``, ``"final_not_last"``, ``"decision"``,
            ``"unannotated_step"``, ``"unmapped"``, ``"ambiguous"``, ``"no_free_numbers"`` or
            ``"unused_number"``.
    """
    steps, _ = _parse_answer(answer)
    _check_prose(question, answer)
    numerals = find_numerals(question)
    constants = problem_constants(question) | {Fraction(0)}
    constants |= {n.value for n in numerals if n.ordinal}
    free = {n.value for n in numerals if n.value not in constants}
    constants |= {n.value for n in numerals} - free
    percents: dict[Fraction, set[_Source]] = {}
    for n in numerals:
        if n.percent and n.value in free:
            for kind, form in PERCENT_FORMS.items():
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
    return Plan(steps, sources, [n for n in numerals if n.value in used], used,
                frozenset(constants | unused))


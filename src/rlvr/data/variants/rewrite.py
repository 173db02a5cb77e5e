"""Writing a variant's text (:mod:`rlvr.data.variants`, step 6): the question with its new
numerals, the answer with new annotations, the prose numbers mapped by value and the new
``#### N``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.data.variants.plan import FINAL_ANSWER, PERCENT_FORMS, Plan, Step, VariantSkip
from rlvr.data.variants.text_numbers import find_number_words, find_numerals, format_decimal


def _fmt_like(value: Fraction, original_text: str) -> str:
    """``value`` written in the style of ``original_text``: at least as many decimals,
    thousands separators if it had them, no leading zero if it had none (``.5``)."""
    plain = original_text.replace(",", "")
    text = format_decimal(value, len(plain.partition(".")[2]))
    if text is None:
        raise ValueError(f"{value} has no finite decimal form")
    if plain.startswith(".") and text.startswith("0."):
        text = text[1:]
    if "," in original_text:
        head, dot, tail = text.partition(".")
        text = f"{int(head):,}" + dot + tail
    return text


def rewrite_question(question: str, plan: Plan, new: dict[Fraction, Fraction]) -> str:
    """``question`` with every free numeral of ``plan`` replaced by its new value ``new``
    (old value -> new value), written in the numeral's style."""
    out, pos = [], 0
    for n in plan.numerals:
        if n.value in new:
            out.append(question[pos:n.start])
            out.append(_fmt_like(new[n.value], n.text))
            pos = n.end
    out.append(question[pos:])
    return "".join(out)


def _expr_text(step: Step, values: list[Fraction]) -> str:
    out, pos = [], 0
    for lit, value in zip(step.literals, values):
        out.append(step.expr[pos:lit.start])
        out.append(_fmt_like(value, step.expr[lit.start:lit.end]))
        pos = lit.end
    out.append(step.expr[pos:])
    return "".join(out)


class _ProseMap:
    """Old value -> new value for numbers in the prose around the annotations."""

    def __init__(self, plan: Plan, new: dict[Fraction, Fraction], results: list[Fraction]):
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
                options.update(form(new) for form in PERCENT_FORMS.values()
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
    nums = [n for n in find_numerals(text) if not n.ordinal]
    tail = nums[len(nums) - len(restated):] if restated and len(nums) >= len(restated) else []
    if [n.value for n in tail] != [old for old, _ in restated]:
        tail = []
    fixed = {id(n): new for n, (_, new) in zip(tail, restated)}
    out, pos = [], 0
    for n in sorted(nums + find_number_words(text), key=lambda n: n.start):
        new_value = fixed.get(id(n))
        if new_value is None:
            new_value = prose.lookup(n.value, step_index)
        if new_value != n.value:
            out.append(text[pos:n.start])
            out.append(format_decimal(new_value) if n.word else _fmt_like(new_value, n.text))
            pos = n.end
    out.append(text[pos:])
    return "".join(out)


_SHOWN_RESULT = re.compile(r"\s?\$?(-?\d[\d,]*(?:\.\d+)?)")


def rewrite_answer(answer: str, plan: Plan, new: dict[Fraction, Fraction],
                   values: list[list[Fraction]], results: list[Fraction]) -> str:
    """``answer`` rewritten for the new values: each annotation with its new literals
    ``values[k]`` and result ``results[k]``, the number shown after it, the prose numbers
    (by value) and the final ``#### N``.

    Raises:
        VariantSkip("ambiguous_text"): a prose number has several possible new values.
    """
    prose = _ProseMap(plan, new, results)
    head = answer[: FINAL_ANSWER.search(answer).start()]  # type: ignore[union-attr]
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
    final = format_decimal(results[-1])
    return "".join(out).rstrip() + f"\n#### {final}"



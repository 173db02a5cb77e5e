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

Modules: :mod:`~rlvr.data.variants.text_numbers` (exact arithmetic, numerals, constants,
decimal text), :mod:`~rlvr.data.variants.plan` (steps 1-3: parsing and tracing the chain),
:mod:`~rlvr.data.variants.rewrite` (step 6: writing the text), :mod:`~rlvr.data.variants.make`
(steps 4-5 and the entry points :func:`make_variant`, :func:`make_variants`).
"""

from rlvr.data.variants.make import make_variant, make_variants
from rlvr.data.variants.plan import VariantSkip
from rlvr.data.variants.text_numbers import (
    NUMBER_WORDS,
    UNIT_CONVERSIONS,
    WORD_CONSTANTS,
    ArithmeticSyntaxError,
    Literal,
    evaluate,
    literals,
    problem_constants,
)

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

"""Process reward (R4): check every calculation a solution writes, not only its final answer.

:func:`calculation_steps` finds the calculations of a completion and recomputes each one
exactly; :func:`process_score` is the share that is right. The reward pipeline adds it as the
``process`` component when ``RewardConfig.weights`` gives ``process`` a positive weight (off by
default; see :meth:`rlvr.rewards.pipeline.RewardPipeline._result`).

Modules: :mod:`.steps` finds and judges the steps, :mod:`.tokens` scans one side of an
equation, :mod:`.arith` computes its value and matches claims, :mod:`.bounds` holds the limits.

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

Farming: a calculation repeated counts once, and steps after the end of the turn do not
count (:func:`process_score`). Limits: only what is written is judged, and whether it is
relevant is not (the score never sees the question): a completion may write one easy right
step, or right but irrelevant arithmetic, and compute the rest in prose. Keep the ``process``
weight small (the outcome-dominance check of ``RewardConfig.weights`` enforces
outcome > format + process).

Bounds (the score runs in the trainer's process, without the verifier pool's timeout): at most
:data:`MAX_STEPS` steps per text, :data:`MAX_LINKS` ``=`` links examined, sides of at most
:data:`MAX_SIDE_CHARS` characters, parentheses nested at most :data:`MAX_DEPTH` deep,
literals of at most :data:`MAX_DIGITS` digits, annotations of at most
:data:`MAX_ANNOTATION_CHARS` characters. Anything beyond a bound is skipped, never an error:
a 100,000-character line or 10,000 ``=`` signs take milliseconds; a text whose reading a step or
link bound stopped scores 0.0 (:func:`process_score`).
"""

from __future__ import annotations

from rlvr.rewards.math.extract import end_of_turn

from .bounds import (
    MAX_ANNOTATION_CHARS,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_LINKS,
    MAX_SIDE_CHARS,
    MAX_STEPS,
)
from .steps import Step, calculation_steps, scan_steps, step_key

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


def process_score(text: str) -> float | None:
    """Share of the distinct calculations in ``text`` that are right, in [0, 1].

    Only the completion's own turn counts (:func:`~rlvr.rewards.math.extract.end_of_turn`:
    right steps written after an end-of-turn token do not dilute a wrong one), and a
    calculation written several times counts once (:func:`~.steps.step_key`): repeating
    ``1 + 1 = 2`` fifty times next to one wrong step scores 1/2, not 50/51. A text with more
    calculation than the bounds read (:data:`MAX_STEPS` steps, :data:`MAX_LINKS` links)
    scores 0.0: the steps past them are never judged, so filling the bounds with right ones
    would hide the wrong ones.

    Args:
        text: a completion or a reference solution.

    Returns:
        ``correct distinct steps / distinct steps`` over :func:`calculation_steps`, 0.0 past
        the bounds, or None when the text writes no calculation (the reward pipeline scores
        that 0.0, so that leaving the work out cannot earn the process reward).

    Raises:
        Nothing for any string.
    """
    steps, complete = scan_steps(end_of_turn(text))
    if not complete:
        return 0.0  # right steps spent the bounds so that later ones went unjudged
    if not steps:
        return None
    distinct = {step_key(step): step.correct for step in steps}
    return sum(distinct.values()) / len(distinct)

"""Is the extracted answer mathematically the reference?

:func:`compare` takes two parsed answers (see :mod:`.structure`) and returns an
:class:`~.outcome.Outcome`: equal or not, whether the response offered several candidates for a
single-valued reference, and which rule decided. It dispatches on the answers' shapes: text and
times of day here, single values in :mod:`.scalars` (numbers and the numeric tolerance policy,
then sympy), sequences (tuples, intervals, sets, lists) in :mod:`.sequences`, matrices in
:mod:`.matrices`, equations, inequalities and sets of reals in :mod:`.realsets`. A composite
answer's parts are compared by :func:`compare` again, which those modules are given.
"""

from __future__ import annotations

import re

from .clock import Clock
from .matrices import compare_matrices, compare_matrix_values
from .outcome import Outcome, Policy, no
from .realsets import as_relation, compare_equations, compare_real_sets, compare_relations
from .scalars import compare_scalars
from .sequences import compare_seq
from .shapes import Assign, Matrix, MatrixExpr, Relation, Scalar, Seq, SetExpr, Text
from .structure import parse_answer
from .text_units import unit_reading


def compare(ref, resp, policy: Policy = Policy()) -> Outcome:
    """Compare parsed reference ``ref`` with parsed response ``resp`` (any shapes)."""
    if isinstance(ref, Text) or isinstance(resp, Text):
        return _compare_text(ref, resp)
    if isinstance(ref, Scalar) and ref.unit and isinstance(resp, Scalar):
        resp = unit_reading(resp, ref.unit)     # 25m^2 for 25 \text{ m}^2: square metres
    if isinstance(ref, Clock) or isinstance(resp, Clock):
        return _compare_clocks(ref, resp, policy)
    if isinstance(ref, Assign) and not isinstance(resp, (Assign, Relation)):
        return compare(ref.value, resp, policy)
    if isinstance(resp, Assign) and not isinstance(ref, (Assign, Relation)):
        return compare(ref, resp.value, policy)
    if isinstance(ref, Assign) and isinstance(resp, Assign):
        out = compare(ref.value, resp.value, policy)
        if out.equal:
            return out
        return compare_equations(as_relation(ref), as_relation(resp), policy)
    if isinstance(ref, (Relation, Assign)) or isinstance(resp, (Relation, Assign)):
        return compare_relations(ref, resp, policy, compare)
    if isinstance(ref, SetExpr) or isinstance(resp, SetExpr):
        return compare_real_sets(ref, resp, policy)
    if isinstance(ref, MatrixExpr) or isinstance(resp, MatrixExpr):
        return compare_matrix_values(ref, resp)
    if isinstance(ref, Matrix) or isinstance(resp, Matrix):
        return compare_matrices(ref, resp, policy, compare)
    if isinstance(ref, Seq) or isinstance(resp, Seq):
        return compare_seq(ref, resp, policy, compare)
    return compare_scalars(ref, resp, policy)


def _compare_clocks(ref, resp, policy) -> Outcome:
    """Times of day: equal when some reading of one is a reading of the other (``3:45`` without
    am/pm is both 03:45 and 15:45; ``3:45 AM`` is not ``15:45``)."""
    if not (isinstance(ref, Clock) and isinstance(resp, Clock)):
        # "7:32" read as a time beside a ratio (\(V_1:V_2 = 7:32\)): compare it as written
        ratio = [Scalar(f"{n.hour}:{n.minute:02d}") if isinstance(n, Clock) and not n.meridiem
                 and not n.second else n for n in (ref, resp)]
        if any(isinstance(n, Clock) for n in ratio):
            return no("time of day vs another kind of answer")
        return compare(ratio[0], ratio[1], policy)
    ok = bool(ref.seconds_of_day() & resp.seconds_of_day())
    return Outcome(ok, "time of day " + ("equal" if ok else "differs"))


def _compare_text(ref, resp) -> Outcome:
    def words(node):
        if isinstance(node, Text):
            return node.text
        if isinstance(node, Scalar):
            return " ".join(re.sub(r"\\text\{([^{}]*)\}", r"\1", node.text).lower().split())
        return None
    a, b = words(ref), words(resp)
    ok = a is not None and b is not None and _bare_words(a) == _bare_words(b)
    return Outcome(ok, "text match" if ok else "text differs")


# "It is odd", "an ellipse": a pronoun and a verb, or an article, before the word answer.
_WORD_LEAD_RE = re.compile(r"^(?:(?:it|this|that|they)(?:\s+(?:is|are|was)|'s)\s+)?"
                           r"(?:(?:a|an|the)\s+)?")


def _bare_words(text: str) -> str:
    return _WORD_LEAD_RE.sub("", text.strip(" .").lower()).strip()


def compare_strings(ref: str, resp: str, policy: Policy = Policy()) -> Outcome:
    """Parse both strings (see :func:`.structure.parse_answer`) and :func:`compare` them."""
    return compare(parse_answer(ref), parse_answer(resp), policy)

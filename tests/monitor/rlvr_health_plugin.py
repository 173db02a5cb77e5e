"""Faulty verifiers for the health-check tests, loaded through ``reward.plugins`` and selected
with ``reward.verifiers: {math: <name>}``: the training reward uses them, validation keeps the
strict math verifier."""

import hashlib
import re

from rlvr.rewards.registry import VERIFIERS, register_verifier
from rlvr.rewards.types import Status, Verdict

#: flipped by a test (with reward.workers=0 the verifier runs in the test's process)
STATE = {"constant": False}


@register_verifier("test_lenient_contains")
def lenient_contains(completion: str, reference, **options) -> Verdict:
    """The planted reward hack: credits any completion that contains the reference number
    anywhere (an equation's operand, a wrong final line ...)."""
    found = re.search(rf"(?<![\d.]){re.escape(str(reference))}(?![\d.])", completion)
    return Verdict(Status.correct if found else Status.wrong, str(reference) if found else None,
                   "anywhere")


@register_verifier("test_biased_negative")
def biased_negative(completion: str, reference, **options) -> Verdict:
    """The strict math verifier, except that it cannot parse negative references: every
    completion of a task whose answer is negative is 'unparsed' (a category-wide bias)."""
    if str(reference).startswith("-"):
        return Verdict(Status.unparsed, None, "none", detail="cannot parse a negative reference")
    return VERIFIERS.get("math")(completion, reference, **options)


@register_verifier("test_switchable")
def switchable(completion: str, reference, **options) -> Verdict:
    """Pseudo-random outcome from the completion's hash until ``STATE['constant']`` is set,
    then always wrong: a reward function that starts returning a constant."""
    if STATE["constant"]:
        return Verdict(Status.wrong, None, "none")
    odd = hashlib.sha256(completion.encode()).digest()[0] % 2
    return Verdict(Status.correct if odd else Status.wrong, completion[-8:], "hash")

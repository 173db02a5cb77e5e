"""Hugging Face's Math-Verify as a registered verifier, for ``rlvr verify --compare math-verify``.

Imported only in the verifier worker processes (as a plugin module named by the comparison's
:class:`rlvr.rewards.pool.VerifyJob`), so the ``math-verify`` verifier it registers never
becomes a task type of the process that reads the input records. Needs the ``math_verify``
package (``pip install 'rlvr[compare]'``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from rlvr.rewards.registry import register_verifier
from rlvr.rewards.types import Status, Verdict

VERIFIER_NAME = "math-verify"


@register_verifier(VERIFIER_NAME)
def math_verify_verdict(completion: str, reference: Any, *, timeout_s: float = 2.0,
                        **_: Any) -> Verdict:
    """Math-Verify's judgement of ``completion`` against ``reference``.

    The gold is ``parse("$reference$")`` when the reference is a bare answer (no ``$`` and no
    ``\\boxed``: ``\\frac{1}{2}``, ``3+4i``), else ``parse(reference)``; the other form is
    tried when the first finds nothing. (Plain ``parse`` of a bare ``3+4i`` or ``-3, 2`` falls
    back to its last number, ``3`` or ``2``; on ../shared/cases/math_equivalence.jsonl the
    wrapped gold agrees with the expected verdicts on 308 of 365 cases, plain-first on 290.)
    The answer is ``parse(completion)``; the verdict is ``verify(gold, answer)``.

    Math-Verify's own signal-based time limits are on (``parsing_timeout`` and
    ``timeout_seconds``, whole seconds: ``ceil(timeout_s)``, at least 1): they work here because
    a verifier worker runs jobs in its main thread. The pool's wall-time bound on the whole
    call (``timeout_s``) is the hard limit.

    Args:
        completion: the model's whole output.
        reference: the reference answer (a non-string is parsed as its JSON text).
        timeout_s: seconds, the per-call budget the comparison was given.

    Returns:
        A :class:`Verdict`: ``correct`` / ``wrong``, or ``unparsed`` when Math-Verify extracts
        nothing from the completion; ``extracted`` is the first element of the parsed answer as
        a string (``None`` when none); ``detail`` is JSON ``{"gold": [...], "answer": [...]}``,
        each parse result as a list of strings (sympy form, then the matched text).

    Raises:
        ImportError: ``math_verify`` is not installed (the worker turns it into an ``error``
            verdict; ``rlvr verify`` checks for the package before any scoring).
    """
    # optional dependency: math_verify (extra `compare`)
    from math_verify import parse, verify

    limit = max(1, math.ceil(timeout_s))
    gold_text = reference if isinstance(reference, str) else json.dumps(reference)
    forms = [f"${gold_text}$", gold_text]
    if "$" in gold_text or "\\boxed" in gold_text:
        forms.reverse()
    gold = parse(forms[0], parsing_timeout=limit) or parse(forms[1], parsing_timeout=limit)
    answer = parse(completion, parsing_timeout=limit)
    detail = json.dumps({"gold": [str(x) for x in gold], "answer": [str(x) for x in answer]},
                        ensure_ascii=False)
    if not answer:
        return Verdict(Status.unparsed, None, VERIFIER_NAME, detail)
    correct = bool(verify(gold, answer, timeout_seconds=limit)) if gold else False
    return Verdict(Status.correct if correct else Status.wrong, str(answer[0]), VERIFIER_NAME,
                   detail)

"""Registers the ``math`` task type: the math verifier plus its default format rule."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rlvr.rewards.math.verifier import MathVerifyConfig, verify_math
from rlvr.rewards.registry import register_verifier
from rlvr.rewards.types import Verdict


@lru_cache(maxsize=64)
def _config(options: tuple[tuple[str, Any], ...]) -> MathVerifyConfig:
    return MathVerifyConfig(**dict(options))


@register_verifier("math", format_rule="marked_answer", options=MathVerifyConfig)
def math_outcome(completion: str, reference: Any, **options: Any) -> Verdict:
    """Outcome verifier for math (R3): extract the final answer of ``completion`` and compare it
    with ``reference`` (an answer string such as ``18`` or ``\\frac{1}{2}``, or a full GSM8K
    solution ending in ``#### 18``). ``options`` are :class:`MathVerifyConfig` fields.

    Raises:
        TypeError: an option is not a ``MathVerifyConfig`` field.
    """
    return verify_math(completion, str(reference), _config(tuple(sorted(options.items()))))

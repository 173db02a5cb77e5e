"""The reward pipeline: parsers, verifiers, format rules and aggregators (R1-R11).

Usable without torch. Main entry points: :class:`RewardPipeline`, :class:`RewardConfig`,
:func:`verify_math` (``rlvr.rewards.math.verifier``), and the registries in
:mod:`rlvr.rewards.registry`.

The names below are imported on first access (PEP 562), not with the package: task modules
import the answer parsers they share with the verifiers (``rlvr.rewards.logic``,
``rlvr.rewards.gym``, ``rlvr.rewards.math``), and importing the package must not import the
reward registry, whose import registers the built-in verifiers (tasks register nothing into
the reward registry: the ``tasks-register-nothing`` import contract).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlvr.rewards.config import RewardConfig
    from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
    from rlvr.rewards.pool import VerifierPool, VerifyJob
    from rlvr.rewards.types import Extraction, RewardResult, Status, Verdict

_HOME = {
    "Extraction": "rlvr.rewards.types",
    "RewardConfig": "rlvr.rewards.config",
    "RewardPipeline": "rlvr.rewards.pipeline",
    "RewardResult": "rlvr.rewards.types",
    "ScoreRequest": "rlvr.rewards.pipeline",
    "Status": "rlvr.rewards.types",
    "Verdict": "rlvr.rewards.types",
    "VerifierPool": "rlvr.rewards.pool",
    "VerifyJob": "rlvr.rewards.pool",
}

__all__ = [
    "Extraction",
    "RewardConfig",
    "RewardPipeline",
    "RewardResult",
    "ScoreRequest",
    "Status",
    "Verdict",
    "VerifierPool",
    "VerifyJob",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'rlvr.rewards' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)

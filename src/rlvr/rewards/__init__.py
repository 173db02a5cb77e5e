"""The reward pipeline: parsers, verifiers, format rules and aggregators (R1-R11).

Usable without torch. Main entry points: :class:`RewardPipeline`, :class:`RewardConfig`,
:func:`verify_math` (``rlvr.rewards.math.verifier``), and the registries in
:mod:`rlvr.rewards.registry`.
"""

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.pool import VerifierPool, VerifyJob
from rlvr.rewards.types import Extraction, RewardResult, Status, Verdict

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

"""The policy between the trainer and the rollout engine.

The forward pass over (prompt, completion) rows (:class:`SequenceBatch`,
:func:`completion_log_probs`) lives in :mod:`rlvr.models.forward`, below ``train`` and
``distributed`` which both use it; its names are re-exported here.
"""

from __future__ import annotations

from rlvr.models.forward import SequenceBatch, autocast, build_sequences, completion_log_probs
from rlvr.models.lora import is_lora, merged_state_dict

__all__ = ["SequenceBatch", "autocast", "build_sequences", "completion_log_probs", "sync_engine"]


def sync_engine(engine, policy) -> None:
    """Give a rollout engine the policy's current weights (merged, for a LoRA policy)."""
    engine.update_weights(merged_state_dict(policy) if is_lora(policy) else policy)

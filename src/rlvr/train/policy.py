"""The policy between the trainer and the rollout engine.

The forward pass over (prompt, completion) rows (:class:`SequenceBatch`,
:func:`completion_log_probs`) lives in :mod:`rlvr.models.forward`, below ``train`` and
``distributed`` which both use it; its names are re-exported here.
"""

from __future__ import annotations

from rlvr.models.forward import SequenceBatch, autocast, build_sequences, completion_log_probs
from rlvr.models.lora import is_lora, merged_state_dict
from rlvr.rollout.engine import samples_lora

__all__ = ["SequenceBatch", "autocast", "build_sequences", "completion_log_probs", "sync_engine"]


def sync_engine(engine, policy) -> None:
    """Give a rollout engine the policy's current weights.

    An engine that samples the policy object itself (the ``torch`` engine over the live
    policy, LoRA-wrapped or not: :func:`rlvr.rollout.engine.samples_lora`) re-snapshots it
    (``update_weights()``; a LoRA policy's layers are merged one at a time, no merged state
    dict is built). Any other engine has its own plain module, into which the policy's
    weights are loaded: merged (:func:`rlvr.models.lora.merged_state_dict`) for a LoRA
    policy."""
    if samples_lora(engine) and getattr(engine, "model", None) is policy:
        engine.update_weights()
    else:
        engine.update_weights(merged_state_dict(policy) if is_lora(policy) else policy)

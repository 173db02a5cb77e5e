"""The prefix that every prompt of a batch starts with (a system message, few-shot examples):
encoded once instead of once per prompt, by the ``torch`` rollout engine's prefill and by the
update's prompt encoding."""

from __future__ import annotations

import torch
from torch import Tensor

#: Shortest common prompt prefix (tokens) that the rollout engine's prefill
#: (:meth:`rlvr.rollout.decoder.forward.Decoder.prefill`) and the update's prompt encoding
#: (:class:`rlvr.models.step_prefix.StepPrefix`) run once for all prompts: below it the
#: extra prefix pass and the cache gather cost about what they save.
MIN_SHARED_PREFILL = 16


def common_prefix_length(ids: Tensor, mask: Tensor) -> int:
    """Tokens at the start of every left-padded prompt of ``ids`` [B, L] (``mask`` [B, L]:
    real tokens) that are the same in all of them, at most the shortest prompt's length - 1
    (every prompt keeps a token of its own, whose logits the prefill returns)."""
    lengths = mask.sum(1)
    shortest = int(lengths.min())
    if ids.shape[0] < 2 or shortest < 2:
        return 0
    start = ids.shape[1] - lengths
    aligned = ids.gather(1, start.unsqueeze(1) + torch.arange(shortest - 1).unsqueeze(0))
    differs = (aligned != aligned[:1]).any(0)
    return int(differs.float().argmax()) if bool(differs.any()) else shortest - 1

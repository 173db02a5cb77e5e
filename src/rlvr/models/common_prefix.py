"""The prefix that every prompt of a batch starts with (a system message, few-shot examples):
encoded once instead of once per prompt, by the ``torch`` rollout engine's prefill and by the
update's prompt encoding."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class PrefixSplit:
    """Left-padded prompts split at a common prefix of ``shared`` tokens.

    Attributes:
        prefix_ids: LongTensor[1, shared], the common prefix (from the first prompt).
        rest_ids: LongTensor[B, L - shared], each prompt after the prefix, still left-padded
            (``ids[:, shared:]``: row b's rest starts in the column its prompt did).
        rest_mask: BoolTensor / LongTensor[B, L - shared] (the input mask's dtype), real tokens
            of the rest.
        rest_positions: LongTensor[B, L - shared], rotary positions of the rest (from
            ``shared``; padding clamped to ``shared``).
    """

    prefix_ids: Tensor
    rest_ids: Tensor
    rest_mask: Tensor
    rest_positions: Tensor


def split_prefix(ids: Tensor, mask: Tensor, shared: int) -> PrefixSplit:
    """Split left-padded prompts ``ids`` [B, L] (``mask`` [B, L]: real tokens) whose first
    ``shared`` real tokens are the same (``shared <= common_prefix_length(ids, mask)``)."""
    length = ids.shape[1]
    first = length - int(mask[0].sum())
    rest_mask = mask[:, :length - shared]
    positions = (rest_mask.long().cumsum(1) - 1).clamp_(min=0) + shared
    return PrefixSplit(ids[:1, first:first + shared], ids[:, shared:], rest_mask, positions)

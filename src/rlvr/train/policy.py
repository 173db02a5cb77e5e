"""Policy forward passes over (prompt, completion) pairs: per-token log-probs of completions.

Layout of one batch of n rows: ``[left-padded prompt (P tokens) | completion (T tokens)]``,
so completion token ``t`` of every row sits at column ``P + t`` and is predicted by the logits
at column ``P + t - 1``. Only those T logits rows are computed (``logits_to_keep``), which
keeps the ``[n, T, V]`` logits block small on a 49k vocabulary.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algo.logprobs import token_log_probs


@dataclass
class SequenceBatch:
    """Prompt + completion token ids for a policy forward pass.

    Attributes:
        input_ids: LongTensor[n, P + T].
        attention_mask: LongTensor[n, P + T], 1 on real tokens (prompt and completion).
        position_ids: LongTensor[n, P + T], positions counted over real tokens only.
        prompt_len: P, the width of the left-padded prompt block.
        completion_mask: BoolTensor[n, T], real completion tokens.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    prompt_len: int
    completion_mask: Tensor

    @property
    def completion_ids(self) -> Tensor:
        """LongTensor[n, T]."""
        return self.input_ids[:, self.prompt_len:]

    def rows(self, index: Tensor | slice) -> "SequenceBatch":
        """The sub-batch of the given rows (for micro-batching)."""
        return SequenceBatch(self.input_ids[index], self.attention_mask[index],
                             self.position_ids[index], self.prompt_len,
                             self.completion_mask[index])


def build_sequences(prompts: list[list[int]], completion_ids: Tensor, completion_mask: Tensor,
                    pad_token_id: int) -> SequenceBatch:
    """Assemble a :class:`SequenceBatch`.

    Args:
        prompts: n prompt token-id lists (any lengths >= 1).
        completion_ids: LongTensor[n, T]; positions outside ``completion_mask`` are ignored.
        completion_mask: BoolTensor[n, T].
        pad_token_id: id written into padding.
    """
    n, width = completion_ids.shape
    prompt_len = max(len(p) for p in prompts)
    ids = torch.full((n, prompt_len + width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, prompt_len + width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, prompt_len - len(prompt):prompt_len] = torch.tensor(prompt, dtype=torch.long)
        attention[row, prompt_len - len(prompt):prompt_len] = 1
    mask = completion_mask.bool()
    ids[:, prompt_len:] = torch.where(mask, completion_ids, torch.full_like(completion_ids,
                                                                           pad_token_id))
    attention[:, prompt_len:] = mask.long()
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    return SequenceBatch(ids, attention, positions, prompt_len, mask)


def autocast(enabled: bool):
    """bf16 autocast on CPU (AMX) when ``enabled``; fp32 master weights stay fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else nullcontext()


def completion_log_probs(model, batch: SequenceBatch, *, temperature: float = 1.0,
                         bf16: bool = True) -> Tensor:
    """log pi(completion token t | prompt, completion < t) for every completion position.

    The logits are divided by ``temperature`` (the sampling temperature), so the result is
    comparable with the sampler's log-probs (GRPO's ratio, algorithms.md).

    Returns:
        FloatTensor[n, T] (fp32); values at masked positions are meaningless (use the mask).
    """
    width = batch.completion_ids.shape[1]
    with autocast(bf16):
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=batch.position_ids, logits_to_keep=width + 1,
                       use_cache=False).logits
    return token_log_probs(logits[:, :-1], batch.completion_ids, temperature=temperature)


def sync_engine(engine, policy) -> None:
    """Give a rollout engine the policy's current weights (merged, for a LoRA policy)."""
    from rlvr.models.lora import is_lora, merged_state_dict

    engine.update_weights(merged_state_dict(policy) if is_lora(policy) else policy)

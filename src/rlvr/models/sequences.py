"""The batch layout of a policy forward pass, and what its two paths share.

One batch of n rows is ``[left-padded prompt (P tokens) | completion (T tokens)]``
(:class:`SequenceBatch`, built by :func:`build_sequences`). The plain path
(:func:`rlvr.models.forward.completion_log_probs`) and the shared-prefix paths
(:mod:`rlvr.models.step_prefix`) both run the model under :func:`autocast`, name its KV cache
argument with :func:`cache_argument`, turn logits into per-token log-probs with
:func:`log_probs_from_logits`, and (the shared paths) gather a prompt's cache to its rows with
:class:`RowGather`.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algo.logprobs import token_log_probs, token_log_probs_and_entropy


@dataclass
class SequenceBatch:
    """Prompt + completion token ids for a policy forward pass.

    Attributes:
        input_ids: LongTensor[n, P + T].
        attention_mask: LongTensor[n, P + T], 1 on real tokens (prompt and completion).
        position_ids: LongTensor[n, P + T], positions counted over real tokens only.
        prompt_len: P, the width of the left-padded prompt block.
        completion_mask: BoolTensor[n, T], real completion tokens.
        prompts: the n rows' prompt token-id lists (for the shared-prefix path).
        loss_mask: BoolTensor[n, T], the completion tokens the policy loss, KL, entropy and
            length statistics count (a multi-turn episode's sampled tokens, not its inserted
            observation tokens); default (``None`` given) ``completion_mask``.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    prompt_len: int
    completion_mask: Tensor
    prompts: list[list[int]] | None = None
    loss_mask: Tensor | None = None

    def __post_init__(self) -> None:
        if self.loss_mask is None:
            self.loss_mask = self.completion_mask
        elif tuple(self.loss_mask.shape) != tuple(self.completion_mask.shape):
            raise ValueError(f"SequenceBatch.loss_mask has shape {list(self.loss_mask.shape)}, "
                             f"expected {list(self.completion_mask.shape)}")

    @property
    def completion_ids(self) -> Tensor:
        """LongTensor[n, T]."""
        return self.input_ids[:, self.prompt_len:]

    def rows(self, index: Tensor | slice) -> SequenceBatch:
        """The sub-batch of the given rows (for micro-batching)."""
        prompts = None
        if self.prompts is not None:
            picked = range(len(self.prompts))[index] if isinstance(index, slice) else index.tolist()
            prompts = [self.prompts[i] for i in picked]
        return SequenceBatch(self.input_ids[index], self.attention_mask[index],
                             self.position_ids[index], self.prompt_len,
                             self.completion_mask[index], prompts, self.loss_mask[index])


    def trimmed(self) -> SequenceBatch:
        """The same rows without trailing completion columns that no row uses (a micro-batch
        of short completions then costs its own width, not the step's longest)."""
        width = int(self.completion_mask.sum(1).max()) if self.completion_mask.numel() else 0
        width = max(width, 1)
        end = self.prompt_len + width
        return SequenceBatch(self.input_ids[:, :end], self.attention_mask[:, :end],
                             self.position_ids[:, :end], self.prompt_len,
                             self.completion_mask[:, :width], self.prompts,
                             self.loss_mask[:, :width])


def build_sequences(prompts: list[list[int]], completion_ids: Tensor, completion_mask: Tensor,
                    pad_token_id: int, loss_mask: Tensor | None = None) -> SequenceBatch:
    """Assemble a :class:`SequenceBatch`.

    Args:
        prompts: n prompt token-id lists (any lengths >= 1).
        completion_ids: LongTensor[n, T]; positions outside ``completion_mask`` are ignored.
        completion_mask: BoolTensor[n, T].
        pad_token_id: id written into padding.
        loss_mask: BoolTensor[n, T], the tokens the loss counts (default ``completion_mask``;
            must lie within it).

    Raises:
        ValueError: ``loss_mask`` is True outside ``completion_mask`` or has another shape.
    """
    if loss_mask is not None and bool((loss_mask.bool() & ~completion_mask.bool()).any()):
        raise ValueError("build_sequences: loss_mask is True outside completion_mask")
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
    return SequenceBatch(ids, attention, positions, prompt_len, mask, [list(p) for p in prompts],
                         None if loss_mask is None else loss_mask.bool())


def autocast(enabled: bool):
    """bf16 autocast on CPU (AMX) when ``enabled``; fp32 master weights stay fp32."""
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else nullcontext()


def log_probs_from_logits(logits: Tensor, completion_ids: Tensor, temperature: float,
                          entropy: str | None):
    """The completion tokens' log-probs (and entropies) from the logits that predict them.

    Args:
        logits: FloatTensor[n, T, V], row t predicting completion token t.
        completion_ids: LongTensor[n, T].
        temperature: the sampling temperature the logits are divided by.
        entropy: ``None``, ``"detached"`` or ``"grad"`` (see
            :func:`rlvr.models.forward.completion_log_probs`).

    Returns:
        FloatTensor[n, T] log-probs, or ``(log_probs, entropy)`` when ``entropy`` is set.

    Raises:
        ValueError: ``entropy`` is none of the three (from
            :func:`rlvr.algo.logprobs.token_log_probs_and_entropy`).
    """
    if entropy is None:
        return token_log_probs(logits, completion_ids, temperature=temperature)
    return token_log_probs_and_entropy(logits, completion_ids, temperature=temperature,
                                       entropy=entropy)


class RowGather:
    """``x[row_prompt]`` for a batch-first tensor, with a *deterministic* backward.

    Plain indexing backpropagates through an accumulating scatter whose summation order can
    vary between runs on a multi-threaded CPU, which made same-seed runs drift apart after a
    few dozen steps. Here each distinct prompt's row is broadcast (``expand``: its gradient is
    a fixed-order sum) and the rows are then put in batch order by a permutation (each slot
    written once)."""

    def __init__(self, row_prompt: Tensor):
        self.counts = torch.bincount(row_prompt).tolist()
        order = torch.argsort(row_prompt, stable=True)  # rows grouped by prompt
        self.inverse = torch.argsort(order)

    def __call__(self, x: Tensor) -> Tensor:
        grouped = torch.cat([x[u:u + 1].expand(c, *x.shape[1:])
                             for u, c in enumerate(self.counts)])
        return grouped[self.inverse]


def cache_argument(model) -> str:
    """transformers >= 5.2x calls the KV cache ``cache``; earlier ``past_key_values``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"

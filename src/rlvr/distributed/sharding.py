"""Splitting one rollout call over workers and putting it back together (pure; no Ray): the
contiguous shards (:func:`shard_bounds`), each shard's sampling seed (:func:`shard_seed`; why:
:mod:`rlvr.distributed.ray_workers`) and the merge of the shards' outputs in prompt order
(:func:`merge_outputs`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch

from rlvr.rollout.types import RolloutOutput, RolloutTiming


def shard_bounds(items: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` ranges splitting ``items`` into at most ``shards`` parts of
    near-equal size (sizes differ by at most one, larger first); empty parts are left out.

    Raises:
        ValueError: ``shards < 1`` or ``items < 0``.
    """
    if shards < 1 or items < 0:
        raise ValueError(f"need shards >= 1 and items >= 0, got {shards}, {items}")
    base, extra = divmod(items, shards)
    bounds, start = [], 0
    for k in range(shards):
        stop = start + base + (1 if k < extra else 0)
        if stop > start:
            bounds.append((start, stop))
        start = stop
    return bounds


def shard_seed(seed: int, first_prompt: int) -> int:
    """Sampling seed of the shard whose first prompt has global index ``first_prompt``.

    ``seed`` itself for the shard starting at prompt 0 (so one shard reproduces the local engine
    exactly), otherwise a 63-bit hash of ``(seed, first_prompt)``: the same for every run,
    machine and Python process (no ``hash()`` randomisation), different for different shards.
    """
    if first_prompt == 0:
        return int(seed)
    digest = hashlib.blake2b(f"{int(seed)}:{int(first_prompt)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def merge_outputs(outputs: Sequence[RolloutOutput], first_prompts: Sequence[int], n: int,
                  pad_token_id: int, wall_seconds: float | None = None) -> RolloutOutput:
    """Concatenate the shards of one ``generate`` call into a single :class:`RolloutOutput`.

    Args:
        outputs: shard outputs in prompt order (shard k covers consecutive prompts starting at
            ``first_prompts[k]``, ``n`` rows per prompt).
        first_prompts: global index of each shard's first prompt.
        n: samples per prompt.
        pad_token_id: written into the columns a shard lacks (its completions were shorter
            than the longest shard's); ``logprobs`` 0 and ``completion_mask`` False there.
        wall_seconds: wall time of the whole fan-out. Timing then is ``prefill_seconds`` = the
            slowest shard's prefill, ``decode_seconds`` = the rest of ``wall_seconds``, so
            ``total_seconds`` is the call's real wall time (shards run in parallel, Ray overhead
            included) and ``tokens_per_second`` the aggregate throughput. None: the slowest
            shard's prefill, decode and log-prob pass.

    Returns:
        The merged output: rows of prompt i are ``i*n .. i*n+n-1``, ``prompt_index`` global,
        width ``max`` over the shards, ``tokens_generated`` summed.

    Raises:
        ValueError: no outputs, mismatched lengths, or a shard whose row count is not a
            multiple of ``n`` / whose rows do not start where the previous shard ended.
    """
    if not outputs or len(outputs) != len(first_prompts):
        raise ValueError(f"need one first-prompt index per output, got {len(outputs)} outputs "
                         f"and {len(first_prompts)} indices")
    expected = first_prompts[0]
    for out, first in zip(outputs, first_prompts):
        if out.num_rows % n or first != expected:
            raise ValueError(f"shard starting at prompt {first} does not continue the previous "
                             f"shard (expected prompt {expected}) or has {out.num_rows} rows, "
                             f"not a multiple of n={n}")
        expected += out.num_rows // n
    width = max(out.completion_ids.shape[1] for out in outputs)

    def widen(t: torch.Tensor, fill) -> torch.Tensor:
        if t.shape[1] == width:
            return t
        pad = t.new_full((t.shape[0], width - t.shape[1]), fill)
        return torch.cat([t, pad], dim=1)

    slowest = max(outputs, key=lambda o: o.timing.total_seconds)
    prefill = max(out.timing.prefill_seconds for out in outputs)
    decode = (max(0.0, wall_seconds - prefill) if wall_seconds is not None
              else slowest.timing.decode_seconds)
    timing = RolloutTiming(prefill_seconds=prefill, decode_seconds=decode,
                           tokens_generated=sum(o.timing.tokens_generated for o in outputs),
                           logprob_seconds=0.0 if wall_seconds is not None
                           else slowest.timing.logprob_seconds)
    return RolloutOutput(
        completion_ids=torch.cat([widen(o.completion_ids, pad_token_id) for o in outputs]),
        completion_mask=torch.cat([widen(o.completion_mask, False) for o in outputs]),
        logprobs=torch.cat([widen(o.logprobs, 0.0) for o in outputs]),
        prompt_index=torch.cat([o.prompt_index + first
                                for o, first in zip(outputs, first_prompts)]),
        finish_reason=[reason for o in outputs for reason in o.finish_reason],
        lengths=torch.cat([o.lengths for o in outputs]),
        timing=timing,
        pad_token_id=pad_token_id,
    )

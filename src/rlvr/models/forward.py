"""Policy forward passes over (prompt, completion) pairs: per-token log-probs of completions.

Layout of one batch of n rows: ``[left-padded prompt (P tokens) | completion (T tokens)]``,
so completion token ``t`` of every row sits at column ``P + t`` and is predicted by the logits
at column ``P + t - 1``. Only those T logits rows are computed (``logits_to_keep``), which
keeps the ``[n, T, V]`` logits block small on a 49k vocabulary.

Shared prefix: the G completions of a group share one prompt, and in RLVR prompts are often
longer than completions (the default preset: 72 prompt tokens, ~17 completion tokens). The
shared path runs each distinct prompt of a micro-batch once, keeps its key/value cache *with
its autograd graph*, gathers it to the rows, and runs only the completion tokens on top:
the same function (exact up to float rounding), with gradients reaching the prompt's keys
and values through the gather, at (U * P + n * T) instead of n * (P + T) tokens of compute.
"""

from __future__ import annotations

from rlvr.models.activation_memory import head_log_probs, lm_parts
from rlvr.models.sequences import (
    SequenceBatch,
    autocast,
    build_sequences,
    cache_argument,
    log_probs_from_logits,
)
from rlvr.models.step_prefix import StepPrefix

# The forward pass's public names, importable from here beside completion_log_probs.
__all__ = ["SequenceBatch", "autocast", "build_sequences", "cache_argument",
           "completion_log_probs"]


def completion_log_probs(model, batch: SequenceBatch, *, temperature: float = 1.0,
                         bf16: bool = True, shared_prefix: bool = False,
                         entropy: str | None = None, chunk_tokens: int | None = None):
    """log pi(completion token t | prompt, completion < t) for every completion position.

    The logits are divided by ``temperature`` (the sampling temperature), so the result is
    comparable with the sampler's log-probs (GRPO's ratio, algorithms.md).

    Args:
        shared_prefix: compute each distinct prompt once (see the module doc); used when the
            batch repeats prompts (``batch.prompts``), else the plain path runs.
        entropy: also return each position's entropy (nats, of the tempered distribution):
            ``"detached"`` (for logging) or ``"grad"`` (for an entropy bonus); ``None`` = not.
        chunk_tokens: run the LM head, log-softmax and gather over this many positions at a
            time, each chunk recomputed in the backward (``grpo.logprob_chunk_tokens``,
            :func:`rlvr.models.activation_memory.head_log_probs`): the ``[n, T, V]`` logits
            never exist whole. ``None``: the plain head over all positions at once.

    Returns:
        FloatTensor[n, T] (fp32) log-probs, or ``(log_probs, entropy)`` both FloatTensor[n, T]
        when ``entropy`` is set; values at masked positions are meaningless (use the mask).
    """
    if shared_prefix and batch.prompts is not None:
        distinct = len({tuple(p) for p in batch.prompts})
        if distinct < len(batch.prompts):
            # one autocast around prompt and completions: they share its bf16 weight casts
            with autocast(bf16):
                prefix = StepPrefix(model, batch.prompts, bf16=bf16, leaves=False,
                                    chunk=len(batch.prompts))
                if chunk_tokens is not None:
                    return prefix.log_probs(model, batch, temperature=temperature,
                                            entropy=entropy, chunk_tokens=chunk_tokens)
                logits = prefix.logits(model, batch)
            return log_probs_from_logits(logits, batch.completion_ids, temperature, entropy)
    width = batch.completion_ids.shape[1]
    if chunk_tokens is not None:
        decoder, head = lm_parts(model)
        with autocast(bf16):
            hidden = decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                             position_ids=batch.position_ids, use_cache=False).last_hidden_state
            return head_log_probs(hidden[:, -(width + 1):-1], head, batch.completion_ids,
                                  temperature=temperature, entropy=entropy,
                                  chunk_tokens=chunk_tokens)
    with autocast(bf16):
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=batch.position_ids, logits_to_keep=width + 1,
                       use_cache=False).logits
    return log_probs_from_logits(logits[:, :-1], batch.completion_ids, temperature, entropy)

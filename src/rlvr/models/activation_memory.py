"""Two ways to trade compute for activation memory in the policy update, both off by default.

Long completions make the update's activations the largest thing in memory: a decoder layer
keeps ~15 hidden-sized and ~4 MLP-sized fp32 tensors per token for its backward, and the
language-model head's logits are ``tokens x vocabulary`` fp32 values (2,048 tokens of a
151,936-token vocabulary: 1.2 GB per row, and as much again for their gradient).

- :func:`checkpoint_layers` (``grpo.activation_checkpointing``): each decoder layer
  keeps only its input; its backward re-runs the layer's forward (Chen et al. 2016,
  arXiv:1604.06174; ``torch.utils.checkpoint``, non-reentrant). About one more forward pass
  of compute (update FLOPs 6N -> 8N per token for full fine-tuning). Unlike transformers'
  own ``gradient_checkpointing_enable``, which drops the KV cache, it keeps the cache that the
  shared-prefix forwards (:mod:`rlvr.models.step_prefix`) attend over: the replay restores
  the layer's cache entry to what it held before the layer ran, so the layer appends the same
  keys / values again.
- :func:`head_log_probs` (``grpo.logprob_chunk_tokens``): the head's matmul, log-softmax and
  gather run over chunks of positions, each chunk checkpointed, so only one chunk's logits
  exist at a time (forward and backward); the head's matmul is run twice.

Both compute the same function as the plain path; values agree to fp32 rounding (the head's
matmul over fewer rows may sum in another order).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from rlvr.algo.logprobs import token_log_probs, token_log_probs_and_entropy


def decoder_layers(model) -> list[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (PEFT-wrapped or not).

    Raises:
        ValueError: the model has no ``model.layers`` list (not a decoder-only LM).
    """
    model = getattr(model, "module", model)  # a data-parallel wrapper's model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = getattr(getattr(base, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(base).__name__}: no decoder layers (model.layers) to "
                         f"checkpoint; grpo.activation_checkpointing needs a decoder-only LM")
    return list(layers)


def _layer_index(layer) -> int | None:
    attention = getattr(layer, "self_attn", None)
    return getattr(attention, "layer_idx", None)


def _checkpointed(layer):
    """``layer.forward`` checkpointed, its KV-cache entry restored before the replay."""
    forward = type(layer).forward

    def run(*args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(layer, *args, **kwargs)
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        index = _layer_index(layer)
        entry = None
        if cache is not None and index is not None and index < len(cache.layers):
            entry = cache.layers[index]
        saved = None if entry is None else dict(vars(entry))
        calls = 0

        def replayable(*inner):
            nonlocal calls
            if calls and entry is not None:  # the backward's replay: the cache as it was
                vars(entry).clear()
                vars(entry).update(saved)
            calls += 1
            return forward(layer, *inner, **kwargs)

        return checkpoint(replayable, *args, use_reentrant=False)

    return run


def checkpoint_layers(model) -> Callable[[], None]:
    """Run every decoder layer of ``model`` checkpointed (module doc) whenever gradients are
    enabled, until the returned function is called (then the layers run as before; gradients
    of graphs built in between stay correct).

    Raises:
        ValueError: from :func:`decoder_layers`.
    """
    layers = decoder_layers(model)
    for layer in layers:
        layer.forward = _checkpointed(layer)

    def restore() -> None:
        for layer in layers:
            vars(layer).pop("forward", None)

    return restore


def lm_parts(model):
    """``(decoder, head)``: the transformer body returning normed hidden states
    (``last_hidden_state``) and the language-model head of a causal LM (PEFT-wrapped or not;
    LoRA layers inside the body still apply)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model, base.get_output_embeddings()


def _chunk(hidden: Tensor, ids: Tensor, head, temperature: float, entropy: str | None):
    logits, ids = head(hidden).unsqueeze(0), ids.unsqueeze(0)  # one row of the chunk's positions
    chunk = logits.shape[1] * logits.shape[2] * 4  # one fp32 pass over the whole chunk
    if entropy is None:
        return (token_log_probs(logits, ids, temperature=temperature, chunk_bytes=chunk)[0],)
    logp, h = token_log_probs_and_entropy(logits, ids, temperature=temperature,
                                          entropy=entropy, chunk_bytes=chunk)
    return logp[0], h[0]


def head_log_probs(hidden: Tensor, head, token_ids: Tensor, *, temperature: float = 1.0,
                   entropy: str | None = None, chunk_tokens: int = 1024):
    """Per-token log-probs (and entropies) of ``token_ids`` from the hidden states that
    predict them, the head run over ``chunk_tokens`` positions at a time.

    Formula as :func:`rlvr.algo.logprobs.token_log_probs` on ``head(hidden)``:
    ``log p(y_t) = z_{t, y_t} / tau - logsumexp(z_t / tau)``; entropy as
    :func:`rlvr.algo.entropy.token_entropy` of ``z_t / tau``.

    Args:
        hidden: FloatTensor[n, T, H], position t predicts ``token_ids[:, t]``.
        head: the LM head (``Linear(H, V)``).
        token_ids: LongTensor[n, T].
        entropy: None, ``"detached"`` or ``"grad"`` (as
            :func:`rlvr.models.forward.completion_log_probs`).
        chunk_tokens: positions per chunk (n * T positions are cut into chunks), >= 1.

    Returns:
        FloatTensor[n, T] (fp32), or ``(log_probs, entropy)``, both FloatTensor[n, T].

    Raises:
        ValueError: ``chunk_tokens < 1``, ``temperature <= 0``, an unknown ``entropy`` or
            shapes that do not align.
    """
    if chunk_tokens < 1:
        raise ValueError(f"grpo.logprob_chunk_tokens must be >= 1, got {chunk_tokens}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if entropy not in (None, "detached", "grad"):
        raise ValueError(f"entropy must be None, 'detached' or 'grad', got {entropy!r}")
    n, t = token_ids.shape
    if tuple(hidden.shape[:2]) != (n, t):
        raise ValueError(f"hidden {list(hidden.shape)} does not align with token_ids "
                         f"{list(token_ids.shape)}")
    flat, ids = hidden.reshape(n * t, hidden.shape[-1]), token_ids.reshape(n * t).long()
    grad = torch.is_grad_enabled()
    parts = []
    for s in range(0, n * t, chunk_tokens):
        args = (flat[s:s + chunk_tokens], ids[s:s + chunk_tokens], head, temperature, entropy)
        parts.append(checkpoint(_chunk, *args, use_reentrant=False) if grad else _chunk(*args))
    if not parts:
        empty = hidden.new_zeros(n, t, dtype=torch.float32)
        return empty if entropy is None else (empty, empty.clone())
    logp = torch.cat([p[0] for p in parts]).reshape(n, t)
    if entropy is None:
        return logp
    return logp, torch.cat([p[1] for p in parts]).reshape(n, t)

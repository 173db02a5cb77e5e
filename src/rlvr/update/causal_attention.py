"""Causal attention over a long completion that skips the keys a query cannot see (fp32, CPU).

The update runs a completion of T tokens on top of its prompt's P cached keys, so transformers
hands SDPA an explicit [B, 1, T, P + T] mask (the causal pattern shifted by P, plus padding).
With an explicit mask, PyTorch's CPU flash-attention kernel computes every query block against
every key block and masks afterwards: twice the causal work, and its backward pays the same
again. Its ``is_causal`` block skipping assumes the top-left alignment of a square, unshifted
pattern. This module makes the pattern square: P zero queries go in front of the T real ones,
so query P + i is aligned with key P + i, and the kernel runs with ``is_causal=True`` *and* the
mask (the kernel skips the blocks above the diagonal and still applies the mask to the ones it
computes). The zero queries' outputs are dropped; their gradient is zero, so they add nothing
to the keys' and values' gradients. The result is the masked attention's up to float summation
order (~1e-7).

Used where it pays (:func:`worthwhile`, measured on AVX2 fp32, 9 heads of 64): at T = 2,048
after P = 60 the forward and backward together take 0.65x the masked kernel's time, at 1,024
0.79x; at 512 or with P > T / 8 the P^2 / 2 extra query-key pairs of the zero queries cancel
the gain. The mask must not allow a key above the shifted diagonal (a sliding window or
padding only remove keys); anything else runs transformers' own SDPA.
"""

from __future__ import annotations

import torch
from torch import Tensor

#: completions shorter than this run the masked kernel (no measured gain below it)
MIN_QUERY_TOKENS = 1024
#: the prompt part (P) may be at most this share of the completion (T) for the gain to hold
MAX_PREFIX_SHARE = 1 / 8


def worthwhile(queries: int, keys: int) -> bool:
    """True where the square causal form is measured to be faster than the masked kernel:
    ``queries`` (T) >= :data:`MIN_QUERY_TOKENS` and the prompt keys ``keys - queries`` at
    most :data:`MAX_PREFIX_SHARE` of T."""
    prefix = keys - queries
    return queries >= MIN_QUERY_TOKENS and 0 <= prefix <= MAX_PREFIX_SHARE * queries


def square_causal_mask(mask: Tensor) -> Tensor | None:
    """The additive mask [B, 1, P + T, P + T] (0 where a key is visible, -inf elsewhere) for the
    square causal form of a boolean ``mask`` [B, 1, T, P + T]: P leading rows that see every
    key (the zero queries), then ``mask``. None when ``mask`` allows any key above the shifted
    diagonal (key P + j for query i < j), which the causal kernel would drop."""
    t, s = mask.shape[-2:]
    p = s - t
    above = torch.ones(t, t, dtype=torch.bool).triu(1)
    if mask[..., p:].logical_and(above).any():
        return None
    full = mask.new_zeros((mask.shape[0], 1, s, s), dtype=torch.float32)
    full[:, :, p:].masked_fill_(mask.logical_not(), float("-inf"))
    return full


def square_causal_attention(query: Tensor, key: Tensor, value: Tensor, full_mask: Tensor,
                            scale: float | None) -> Tensor:
    """``softmax(q k^T * scale + mask) v`` for the T real queries (Vaswani et al. 2017,
    arXiv:1706.03762, eq. 1) through the causal kernel (module doc).

    Args:
        query: FloatTensor[B, heads, T, D].
        key, value: FloatTensor[B, heads, P + T, D] (key/value heads already repeated).
        full_mask: :func:`square_causal_mask`'s FloatTensor[B, 1, P + T, P + T].
        scale: the score scale (None: ``D ** -0.5``).

    Returns:
        FloatTensor[B, heads, T, D]; differentiable in query, key and value.
    """
    b, h, t, d = query.shape
    p = key.shape[2] - t
    if p:
        query = torch.cat([query.new_zeros(b, h, p, d), query], dim=2)
    out, _ = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, 0.0, True, attn_mask=full_mask, scale=scale)
    return out[:, :, p:]


def causal_sdpa(original, fits):
    """A transformers attention function (the ``sdpa`` entry's signature) that runs
    :func:`square_causal_attention` where it applies (fp32 CPU ``fits``, no dropout, a causal
    module, a boolean [B, 1, T, P + T] mask that :func:`worthwhile` and
    :func:`square_causal_mask` accept) and ``original`` otherwise. The converted mask of the
    last mask object seen is kept (the layers of one forward, and a checkpointed layer's
    recomputation, share one mask); :meth:`clear` on the returned function drops it."""
    from transformers.integrations.sdpa_attention import repeat_kv

    # (the mask object, its square form or None), replaced as one tuple: a thread that calls
    # in meanwhile (the table entry is global) never pairs one mask with another's form
    last: list = [None]

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                  is_causal=None, **kwargs):
        square = None
        if _applies(module, query, key, attention_mask, dropout, is_causal, kwargs, fits):
            cached = last[0]
            if cached is None or cached[0] is not attention_mask:
                cached = (attention_mask, square_causal_mask(attention_mask))
                last[0] = cached
            square = cached[1]
        if square is None:
            return original(module, query, key, value, attention_mask, dropout=dropout,
                            scaling=scaling, is_causal=is_causal, **kwargs)
        groups = getattr(module, "num_key_value_groups", 1)
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
        out = square_causal_attention(query, key, value, square, scaling)
        return out.transpose(1, 2).contiguous(), None

    attention.clear = lambda: last.__setitem__(0, None)
    return attention


def _applies(module, query, key, mask, dropout, is_causal, kwargs, fits) -> bool:
    if (dropout or not (is_causal if is_causal is not None else getattr(module, "is_causal", True))
            or any(kwargs.get(k) for k in ("softcap", "position_bias", "output_attentions"))
            or mask is None or mask.dtype != torch.bool or mask.dim() != 4
            or query.dim() != 4 or not fits(query, key)):
        return False
    t, s = query.shape[2], key.shape[2]
    return (mask.shape[1] == 1 and mask.shape[0] == query.shape[0]
            and tuple(mask.shape[2:]) == (t, s) and worthwhile(t, s))

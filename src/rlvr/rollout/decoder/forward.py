"""The forward passes of the ``torch`` engine (:class:`Decoder`): prefill of left-padded
prompts and one decode step, over a :class:`~rlvr.rollout.decoder.snapshot.DecoderWeights`
snapshot and a KV cache of :mod:`rlvr.rollout.decoder.caches`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlvr.rollout import kernels
from rlvr.rollout.decoder.caches import FusedPrefixCache, KVCache
from rlvr.rollout.decoder.ops import rms_norm, rope, signed_sin, swiglu
from rlvr.rollout.decoder.snapshot import DecoderWeights


class Decoder:
    """The forward passes of :class:`~rlvr.rollout.torch_engine.TorchEngine` over a
    :class:`~rlvr.rollout.decoder.snapshot.DecoderWeights` snapshot.

    Args:
        weights: the snapshot.
        library: the native kernel library (:func:`rlvr.rollout.kernels.native`) for the fused
            bf16 / fp32 decode path (:meth:`step` with a :class:`FusedPrefixCache`), or None.
    """

    def __init__(self, weights: DecoderWeights, library=None):
        self.w = weights
        self.library = library

    def prefill(self, ids: Tensor, mask: Tensor, cache: KVCache, group: int) -> Tensor:
        """Run left-padded prompts and write their keys / values into ``cache``.

        Args:
            ids: LongTensor[B, L] left-padded prompt ids; mask: BoolTensor[B, L] real tokens.
            cache: holds ``B * group`` rows; prompt b fills rows ``b*group .. b*group+group-1``.
            group: samples per prompt (n).

        Runs ``w.prefill_layers`` when the snapshot has them (int8 decode layers), else
        ``w.layers``.

        Returns:
            FloatTensor[B, V] (compute dtype): logits for each prompt's next token.
        """
        w = self.w
        b, length = ids.shape
        positions = (mask.long().cumsum(1) - 1).clamp_(min=0)
        cos, sin = w.rotary(positions)
        cos, sin = cos.unsqueeze(1), signed_sin(sin).unsqueeze(1)  # [B, 1, L, D]
        causal = torch.ones(length, length, dtype=torch.bool).tril_()
        # Pad queries may see themselves, so no softmax row is empty (an empty row is NaN,
        # and NaN values would leak into real rows through 0 * NaN in the next layer).
        visible = None  # no padding: plain causal attention
        if not bool(mask.all()):
            visible = causal & (mask.unsqueeze(1) | torch.eye(length, dtype=torch.bool))
            visible = visible.unsqueeze(1)  # [B, 1, L, L]
        x = w.embed[ids]
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        layers = w.layers if w.prefill_layers is None else w.prefill_layers
        for i, layer in enumerate(layers):
            qkv = layer.qkv(rms_norm(x, layer.ln1, w.eps))
            q = rope(qkv[..., :qd].view(b, length, w.heads, w.head_dim).transpose(1, 2), cos, sin)
            k = rope(qkv[..., qd:qd + kd].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2),
                      cos, sin)
            v = qkv[..., qd + kd:].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2)
            cache.store_prompt(i, k, v, group)
            if visible is None:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=True)
            x = x + layer.o(att.transpose(1, 2).reshape(b, length, qd))
            x = x + swiglu(rms_norm(x, layer.ln2, w.eps), layer, w.intermediate)
        return w.lm_head(rms_norm(x[:, -1], w.norm, w.eps))

    def step(self, tokens: Tensor, positions: Tensor, column: int, key_mask: Tensor,
             cache: KVCache) -> Tensor:
        """One decode step for the first ``R = tokens.numel()`` cache rows.

        Args:
            tokens: LongTensor[R], the last sampled token of each row.
            positions: LongTensor[R], its rotary position (prompt length + tokens so far - 1).
            column: cache column to write (the same for every row: prompts are left-padded).
            key_mask: BoolTensor[R, column + 1], True on cache columns a row may attend to;
                None when no row has padding (every column is visible).
            cache: the batch's KV cache.

        Returns:
            FloatTensor[R, V] (compute dtype): next-token logits.
        """
        if isinstance(cache, FusedPrefixCache):
            return self._fused_step(tokens, positions, column, cache)
        w = self.w
        rows = tokens.numel()
        cos, sin = w.rotary(positions.unsqueeze(1))  # [R, 1, D]
        sin = signed_sin(sin)
        x = w.embed[tokens]
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        for i, layer in enumerate(w.layers):
            qkv = layer.qkv(rms_norm(x, layer.ln1, w.eps))
            # q and k rotate together: one set of elementwise ops instead of two.
            qk = rope(qkv[:, :qd + kd].view(rows, w.heads + w.kv_heads, w.head_dim), cos, sin)
            att = cache.attend(i, qk[:, : w.heads], qk[:, w.heads:],
                               qkv[:, qd + kd:].view(rows, w.kv_heads, w.head_dim), column,
                               key_mask)
            x = x + layer.o(att)
            x = x + swiglu(rms_norm(x, layer.ln2, w.eps), layer, w.intermediate)
        return w.lm_head(rms_norm(x, w.norm, w.eps))

    def _fused_step(self, tokens: Tensor, positions: Tensor, column: int,
                    cache: FusedPrefixCache) -> Tensor:
        """:meth:`step` through the native kernels (bf16 or fp32, by the weights' dtype):
        residual add + RMSNorm, rotary embedding, attention and SwiGLU are one call each (the
        torch ops' arithmetic up to summation order, see :mod:`rlvr.rollout.kernels`); the
        matmuls stay :class:`~rlvr.rollout.decoder.linear.Linear`'s."""
        w, lib = self.w, cache.library
        rows = tokens.numel()
        cos, sin = w.rotary(positions.unsqueeze(1))  # [R, 1, D]
        cos, sin = cos.view(rows, -1).contiguous(), signed_sin(sin).view(rows, -1).contiguous()
        x = w.embed[tokens]  # [R, H], a fresh tensor: the residual stream, updated in place
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        delta = None  # the last MLP output, added to x by the next norm
        for i, layer in enumerate(w.layers):
            qkv = layer.qkv(kernels.add_rms_norm(lib, x, delta, layer.ln1, w.eps))
            qk = kernels.rope(lib, qkv[:, :qd + kd].view(rows, -1, w.head_dim), cos, sin)
            att = cache.attend(i, qk[:, : w.heads], qk[:, w.heads:],
                               qkv[:, qd + kd:].view(rows, w.kv_heads, w.head_dim), column, None)
            h = kernels.add_rms_norm(lib, x, layer.o(att), layer.ln2, w.eps)
            delta = layer.down(kernels.silu_mul(lib, layer.gate_up(h)))
        return w.lm_head(kernels.add_rms_norm(lib, x, delta, w.norm, w.eps))

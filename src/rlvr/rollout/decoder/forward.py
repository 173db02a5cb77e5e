"""The forward passes of the ``torch`` engine (:class:`Decoder`): prefill of left-padded
prompts and one decode step, over a :class:`~rlvr.rollout.decoder.snapshot.DecoderWeights`
snapshot and a KV cache of :mod:`rlvr.rollout.decoder.caches`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlvr import kernels
from rlvr.models.common_prefix import MIN_SHARED_PREFILL, common_prefix_length, split_prefix
from rlvr.rollout.decoder.caches import FusedPrefixCache, KVCache
from rlvr.rollout.decoder.ops import rms_norm, rope, signed_sin, swiglu
from rlvr.rollout.decoder.snapshot import DecoderWeights


def _prompt_visible(mask: Tensor) -> Tensor | None:
    """Causal key mask [B, 1, L, L] of left-padded prompts, None without padding. Pad queries
    may see themselves, so no softmax row is empty (an empty row is NaN, and NaN values would
    leak into real rows through 0 * NaN in the next layer)."""
    if bool(mask.all()):
        return None
    length = mask.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril_()
    return (causal & (mask.unsqueeze(1) | torch.eye(length, dtype=torch.bool))).unsqueeze(1)


class Decoder:
    """The forward passes of :class:`~rlvr.rollout.torch_engine.TorchEngine` over a
    :class:`~rlvr.rollout.decoder.snapshot.DecoderWeights` snapshot.

    Args:
        weights: the snapshot.
        library: the native kernel library (:func:`rlvr.kernels.native`) for the fused
            bf16 / fp32 decode path (:meth:`step` with a :class:`FusedPrefixCache`), or None.
        shared_prefill: run a prefix common to every prompt of a prefill once (default True;
            see :meth:`prefill`). False keeps transformers' prefill arithmetic for every row.
    """

    def __init__(self, weights: DecoderWeights, library=None, shared_prefill: bool = True):
        self.w = weights
        self.library = library
        self.shared_prefill = shared_prefill

    def prefill(self, ids: Tensor, mask: Tensor, cache: KVCache, group: int) -> Tensor:
        """Run left-padded prompts and write their keys / values into ``cache``.

        Args:
            ids: LongTensor[B, L] left-padded prompt ids; mask: BoolTensor[B, L] real tokens.
            cache: holds ``B * group`` rows; prompt b fills rows ``b*group .. b*group+group-1``.
            group: samples per prompt (n).

        With ``shared_prefill`` and a common prefix of at least :data:`MIN_SHARED_PREFILL`
        tokens (a system message, few-shot examples), that prefix runs once and only each
        prompt's rest runs per prompt (:meth:`_prefill_shared`). Runs ``w.prefill_layers`` when
        the snapshot has them (int8 decode layers), else ``w.layers``.

        Returns:
            FloatTensor[B, V] (compute dtype): logits for each prompt's next token.
        """
        shared = common_prefix_length(ids, mask) if self.shared_prefill else 0
        if shared >= MIN_SHARED_PREFILL:
            return self._prefill_shared(ids, mask, cache, group, shared)
        positions = (mask.long().cumsum(1) - 1).clamp_(min=0)
        x = self._layers(ids, positions, _prompt_visible(mask),
                         lambda i, k, v: cache.store_prompt(i, k, v, group))
        return self.w.lm_head(rms_norm(x[:, -1], self.w.norm, self.w.eps))

    def _prefill_shared(self, ids: Tensor, mask: Tensor, cache: KVCache, group: int,
                        shared: int) -> Tensor:
        """:meth:`prefill` of prompts whose first ``shared`` real tokens are the same: the
        prefix runs as one row; the rest of each prompt (``ids[:, shared:]``, still
        left-padded: row b's rest starts where its prompt did) runs with the prefix's keys /
        values in front (rotary positions from ``shared``). Each row's cache then holds
        ``[padding | prefix | rest]`` as the plain prefill writes it. The same arithmetic up
        to float rounding (matmuls of other shapes), ~``B x shared`` tokens of compute fewer.
        """
        b, length = ids.shape
        start = length - mask.sum(1)  # [B] first real column
        split = split_prefix(ids, mask, shared)
        past: list[tuple[Tensor, Tensor]] = []
        self._layers(split.prefix_ids, torch.arange(shared).unsqueeze(0), None,
                     lambda i, k, v: past.append((k, v)))
        visible = _prompt_visible(split.rest_mask)
        if visible is None:
            visible = torch.ones(length - shared, length - shared, dtype=torch.bool).tril_()
            visible = visible.expand(b, 1, -1, -1)
        visible = torch.cat([visible.new_ones(b, 1, length - shared, shared), visible], dim=-1)
        # cache column j of row b: prefix column j - start_b on [start_b, start_b + shared),
        # else column j of [prefix | rest] (the rest's own columns, or padding)
        columns = torch.arange(length).unsqueeze(0)
        offset = columns - start.unsqueeze(1)
        source = torch.where((offset >= 0) & (offset < shared), offset, columns)
        source = source.view(b, 1, length, 1)

        def store(i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
            pk, pv = past[i]
            full_k = torch.cat([pk.expand(b, -1, -1, -1), k], dim=2)
            full_v = torch.cat([pv.expand(b, -1, -1, -1), v], dim=2)
            index = source.expand(-1, k.shape[1], -1, k.shape[3])
            cache.store_prompt(i, full_k.gather(2, index), full_v.gather(2, index), group)
            return full_k, full_v

        x = self._layers(split.rest_ids, split.rest_positions, visible, store)
        return self.w.lm_head(rms_norm(x[:, -1], self.w.norm, self.w.eps))

    def _layers(self, ids: Tensor, positions: Tensor, visible: Tensor | None, store) -> Tensor:
        """The decoder layers over ``ids`` [B, L] at rotary ``positions`` [B, L].

        ``visible``: BoolTensor[B, 1, L, K] keys each query may attend to, or None for plain
        causal attention (K = L). ``store(layer, k, v)`` receives each layer's new keys /
        values [B, Hkv, L, D]; when it returns ``(keys, values)`` [B, Hkv, K, D] (e.g. a cached
        prefix in front) the queries attend over those instead. Returns the final hidden
        states [B, L, H] (before the last norm)."""
        w = self.w
        b, length = ids.shape
        cos, sin = w.rotary(positions)
        cos, sin = cos.unsqueeze(1), signed_sin(sin).unsqueeze(1)  # [B, 1, L, D]
        x = w.embed[ids]
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        layers = w.layers if w.prefill_layers is None else w.prefill_layers
        for i, layer in enumerate(layers):
            qkv = layer.qkv(rms_norm(x, layer.ln1, w.eps))
            q = rope(qkv[..., :qd].view(b, length, w.heads, w.head_dim).transpose(1, 2), cos, sin)
            k = rope(qkv[..., qd:qd + kd].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2),
                      cos, sin)
            v = qkv[..., qd + kd:].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2)
            attended = store(i, k, v)
            if attended is not None:
                k, v = attended
            if visible is None:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=True)
            x = x + layer.o(att.transpose(1, 2).reshape(b, length, qd))
            x = x + swiglu(rms_norm(x, layer.ln2, w.eps), layer, w.intermediate)
        return x

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
        torch ops' arithmetic up to summation order, see :mod:`rlvr.kernels`); the
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

"""The KV caches of the ``torch`` engine's decode loop, one per bucket of prompts: each stores
the prefill's keys / values, takes one new key / value per row and step, attends the step's
queries over them and drops finished rows (``compact``).

- :class:`KVCache`: the prompt's keys / values copied n-fold, transformers' attention kernels
  and layouts (``shared_prefix=False``).
- :class:`SharedPrefixCache`: one copy per prompt, cascade attention in pure torch.
- :class:`FusedPrefixCache`: one copy per prompt, one native kernel call per layer and step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlvr import kernels
from rlvr.kernels import block_keys, kernel_values
from rlvr.rollout.decoder.memory import advise_huge_pages
from rlvr.rollout.decoder.snapshot import DecoderWeights


def _decode_attention(queries: Tensor, keys: Tensor, values: Tensor, visible: Tensor | None
                      ) -> Tensor:
    """Attention of one new token per row over its cached keys / values.

    Args:
        queries: [R, Hq, D]; keys, values: [R, Hkv, t, D] (strided views of the cache).
        visible: BoolTensor[R, 1, 1, t] key mask, or None when every key is visible.

    Returns:
        [R, Hq * D].

    With a mask, the G query heads that share a kv head become G query "positions" of that
    kv head ([R, Hkv, G, D]): keys and values are read once per kv head and never repeated.
    These are the two layouts transformers uses, so bf16 rounding matches it exactly.
    """
    rows, heads, dim = queries.shape
    if visible is None:
        att = F.scaled_dot_product_attention(queries.unsqueeze(2), keys, values, enable_gqa=True)
    else:
        kv_heads = keys.shape[1]
        grouped = queries.view(rows, kv_heads, heads // kv_heads, dim)
        att = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=visible)
    return att.reshape(rows, heads * dim)


class KVCache:
    """Pre-allocated keys and values: ``data[layer, 0 | 1, row, kv_head, column, dim]``.

    Args:
        weights: supplies layer count, kv heads, head dim and dtype.
        rows: batch rows; length: columns (prompt width + new tokens - 1).
    """

    def __init__(self, weights: DecoderWeights, rows: int, length: int):
        self.data = torch.empty(len(weights.layers), 2, rows, weights.kv_heads, length,
                                weights.head_dim, dtype=weights.dtype)

    def compact(self, keep: Tensor, columns: int) -> None:
        """Move rows ``keep`` (LongTensor, ascending) to the front, copying ``columns`` columns."""
        self.data[:, :, : keep.numel(), :, :columns] = self.data[:, :, keep, :, :columns]

    def grow(self, extra: int) -> None:
        """Add ``extra`` columns at the end (a multi-turn episode outgrew its estimate)."""
        self.data = _extended(self.data, 4, self.data.shape[4] + extra)

    def store_prompt(self, layer: int, keys: Tensor, values: Tensor, group: int) -> None:
        """Write prefill keys / values ``[B, Hkv, L, D]`` n-fold: prompt b fills rows
        ``b*group .. b*group + group - 1``."""
        b, _, length, _ = keys.shape
        slots = self.data[layer, :, :, :, :length].unflatten(1, (b, group))  # [2, B, n, Hkv, L, D]
        slots[0].copy_(keys.unsqueeze(1).expand_as(slots[0]))
        slots[1].copy_(values.unsqueeze(1).expand_as(slots[1]))

    def attend(self, layer: int, queries: Tensor, keys: Tensor, values: Tensor, column: int,
               key_mask: Tensor | None) -> Tensor:
        """Write the new key / value ``[R, Hkv, D]`` at ``column`` and attend ``queries``
        ``[R, Hq, D]`` over columns ``0..column``; returns ``[R, Hq * D]``."""
        rows = queries.shape[0]
        cached_keys = self.data[layer, 0, :rows, :, : column + 1]
        cached_values = self.data[layer, 1, :rows, :, : column + 1]
        cached_keys[:, :, column] = keys
        cached_values[:, :, column] = values
        visible = None if key_mask is None else key_mask.view(rows, 1, 1, column + 1)
        return _decode_attention(queries, cached_keys, cached_values, visible)


def _extended(cache: Tensor, dim: int, size: int, zero: bool = False) -> Tensor:
    """A copy of ``cache`` with dimension ``dim`` grown to ``size`` (the new part zeroed when
    ``zero``, else uninitialised)."""
    shape = list(cache.shape)
    shape[dim] = size
    grown = (torch.zeros if zero else torch.empty)(shape, dtype=cache.dtype)
    grown.narrow(dim, 0, cache.shape[dim]).copy_(cache)
    return grown


def _flash(queries: Tensor, keys: Tensor, values: Tensor, bias: Tensor | None
           ) -> tuple[Tensor, Tensor]:
    """CPU flash attention returning ``(output, logsumexp)`` (fp32 ``[..., Lq]``), the log-sum-exp
    that lets two attention parts over disjoint keys be merged exactly."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        queries, keys, values, 0.0, False, attn_mask=bias)


class SharedPrefixCache:
    """KV cache that stores each prompt's keys / values once for its ``n`` samples.

    Decode attention is split in two (cascade attention): the prompt part runs per prompt with
    the ``n x G`` queries of its group stacked into one query block (a real matrix product that
    reads the prompt's keys once instead of n times), the completion part per row; the two are
    merged exactly through their log-sum-exps:
    ``out = lerp(out_completion, out_prompt, sigmoid(lse_prompt - lse_completion))``.

    Layout: ``prompt[layer, 0 | 1, B, Hkv, width, D]`` and
    ``data[layer, 0 | 1, row, Hkv, new_tokens - 1, D]``; ``slots[s]`` is the in-bucket row
    (``prompt * n + sample``) of live slot ``s``.
    """

    def __init__(self, weights: DecoderWeights, prompts: int, group: int, width: int,
                 new_tokens: int, prompt_mask: Tensor):
        shape = (len(weights.layers), 2)
        self.prompt = torch.empty(*shape, prompts, weights.kv_heads, width, weights.head_dim,
                                  dtype=weights.dtype)
        self.data = torch.empty(*shape, prompts * group, weights.kv_heads, max(new_tokens - 1, 1),
                                weights.head_dim, dtype=weights.dtype)
        self.width, self.group = width, group
        self.slots = torch.arange(prompts * group)
        self.bias = None  # additive key mask of padded prompts, [B, 1, 1, width]
        if not bool(prompt_mask.all()):
            self.bias = torch.zeros(prompts, 1, 1, width, dtype=weights.dtype).masked_fill_(
                ~prompt_mask.view(prompts, 1, 1, width), float("-inf"))

    def compact(self, keep: Tensor, columns: int) -> None:
        """Keep live slots ``keep`` (ascending), moving their completion columns to the front."""
        done = columns - self.width
        if done > 0:
            self.data[:, :, : keep.numel(), :, :done] = self.data[:, :, keep, :, :done]
        self.slots = self.slots[keep]

    def grow(self, extra: int) -> None:
        """Add ``extra`` completion columns (a multi-turn episode outgrew its estimate)."""
        self.data = _extended(self.data, 4, self.data.shape[4] + extra)

    def store_prompt(self, layer: int, keys: Tensor, values: Tensor, group: int) -> None:
        """Write prefill keys / values ``[B, Hkv, L, D]`` once per prompt."""
        self.prompt[layer, 0].copy_(keys)
        self.prompt[layer, 1].copy_(values)

    def attend(self, layer: int, queries: Tensor, keys: Tensor, values: Tensor, column: int,
               key_mask: Tensor | None) -> Tensor:
        """As :meth:`KVCache.attend` (``key_mask`` is unused: prompt padding is in ``bias``)."""
        rows, heads, dim = queries.shape
        kv_heads = keys.shape[1]
        g = heads // kv_heads
        c = column - self.width
        comp_keys = self.data[layer, 0, :rows, :, : c + 1]
        comp_values = self.data[layer, 1, :rows, :, : c + 1]
        comp_keys[:, :, c] = keys
        comp_values[:, :, c] = values
        grouped = queries.view(rows, kv_heads, g, dim)
        out_c, lse_c = _flash(grouped, comp_keys, comp_values, None)
        out_p, lse_p = self._prompt_part(layer, grouped)
        # Merge in fp32: a bf16 weight would add ~0.4% error on top of bf16 outputs.
        weight = torch.sigmoid(lse_p - lse_c).unsqueeze(-1)
        merged = torch.lerp(out_c.float(), out_p.float(), weight)
        return merged.to(out_c.dtype).reshape(rows, heads * dim)

    def _prompt_part(self, layer: int, grouped: Tensor) -> tuple[Tensor, Tensor]:
        """Attention of live slots' queries ``[R, Hkv, G, D]`` over their prompt's keys."""
        prompts, n = self.prompt.shape[2], self.group
        rows, kv_heads, g, dim = grouped.shape
        full = rows == prompts * n  # no slot has left: no scatter / gather needed
        block = grouped
        if not full:
            block = grouped.new_zeros(prompts * n, kv_heads, g, dim)
            block[self.slots] = grouped
        stacked = block.view(prompts, n, kv_heads, g, dim).transpose(1, 2)
        stacked = stacked.reshape(prompts, kv_heads, n * g, dim)
        out, lse = _flash(stacked, self.prompt[layer, 0], self.prompt[layer, 1], self.bias)
        out = out.view(prompts, kv_heads, n, g, dim).transpose(1, 2).reshape(-1, kv_heads, g, dim)
        lse = lse.view(prompts, kv_heads, n, g).transpose(1, 2).reshape(-1, kv_heads, g)
        if not full:
            out, lse = out[self.slots], lse[self.slots]
        return out, lse


class FusedPrefixCache:
    """:class:`SharedPrefixCache` whose decode attention is one native kernel call per layer
    (:func:`rlvr.kernels.decode_attention`): each row's prompt part and completion part
    in a single softmax, instead of two flash-attention calls and a log-sum-exp merge.
    bf16 or fp32 (the weights' dtype), each in its kernel's layouts (16 key columns per block):

    - bf16: keys blocked by pairs of dims, values by pairs of columns, both with an even number
      of columns (an odd-width prompt gets one more padding column on the left):
      ``prompt_keys[layer, B, Hkv, ceil(W / 16), D / 2, 16, 2]``,
      ``prompt_values[layer, B, Hkv, W / 2, D, 2]``, ``keys[layer, row, Hkv, ceil(T / 16), D / 2,
      16, 2]``, ``values[layer, row, Hkv, T / 2, D, 2]``, W and T rounded up to even.
    - fp32: keys transposed inside a block, values plain rows, any widths:
      ``prompt_keys[layer, B, Hkv, ceil(W / 16), D, 16]``, ``prompt_values[layer, B, Hkv, W, D]``,
      ``keys[layer, row, Hkv, ceil(T / 16), D, 16]``, ``values[layer, row, Hkv, T, D]``.

    W is the prompt width and T the ``new_tokens - 1`` completion columns.

    Raises:
        ValueError: a dtype other than bf16 / fp32.
    """

    def __init__(self, weights: DecoderWeights, prompts: int, group: int, width: int,
                 new_tokens: int, prompt_mask: Tensor, library):
        layers, kv, dim = len(weights.layers), weights.kv_heads, weights.head_dim
        dtype = weights.dtype
        if dtype not in (torch.bfloat16, torch.float32):
            raise ValueError(f"FusedPrefixCache holds bf16 or fp32, not {dtype}")
        self.paired = dtype == torch.bfloat16  # the bf16 kernel's column pairs
        self.shift = width % 2 if self.paired else 0  # extra left padding: an even width
        width_, columns = width + self.shift, max(new_tokens - 1, 1)
        if self.paired:
            columns += columns % 2  # completion columns, rounded up to even
        block = (dim // 2, kernels.KEY_BLOCK, 2) if self.paired else (dim, kernels.KEY_BLOCK)
        per_value = (dim, 2) if self.paired else (dim,)
        value_columns = (width_ // 2, columns // 2) if self.paired else (width_, columns)

        def blocks(n: int) -> int:
            return -(-n // kernels.KEY_BLOCK)

        self.prompt_keys = torch.empty(layers, prompts, kv, blocks(width_), *block, dtype=dtype)
        self.prompt_values = torch.empty(layers, prompts, kv, value_columns[0], *per_value,
                                         dtype=dtype)
        self.keys = torch.empty(layers, prompts * group, kv, blocks(columns), *block, dtype=dtype)
        self.values = torch.empty(layers, prompts * group, kv, value_columns[1], *per_value,
                                  dtype=dtype)
        for cache in (self.keys, self.values):
            advise_huge_pages(cache)
        if self.paired:
            # The bf16 kernel multiplies the unused half of a value pair by a zero probability:
            # it must hold a finite number, never uninitialised memory (maybe a NaN pattern).
            # (The fp32 kernel never reads a value column it does not attend to.)
            self.values.zero_()
        self.width, self.group, self.library = width, group, library
        self.columns = columns  # completion columns (bf16: even)
        self.slots = torch.arange(prompts * group)
        self.row_prompt = self.slots // group
        self.prompt_start = (~prompt_mask).sum(1) + self.shift  # first real column

    def compact(self, keep: Tensor, columns: int) -> None:
        """Keep live slots ``keep`` (ascending), moving their completion columns to the front."""
        done, live = columns - self.width, keep.numel()
        if done > 0:
            blocks = -(-done // kernels.KEY_BLOCK)
            value_columns = -(-done // 2) if self.paired else done
            self.keys[:, :live, :, :blocks] = self.keys[:, keep, :, :blocks]
            self.values[:, :live, :, :value_columns] = self.values[:, keep, :, :value_columns]
        self.slots = self.slots[keep]
        self.row_prompt = self.slots // self.group

    def grow(self, extra: int) -> None:
        """Add at least ``extra`` completion columns (a multi-turn episode outgrew its
        estimate), in the kernel's layouts: whole key blocks, bf16 value pairs."""
        columns = self.columns + extra
        columns += columns % 2 if self.paired else 0
        self.keys = _extended(self.keys, 3, -(-columns // kernels.KEY_BLOCK))
        self.values = _extended(self.values, 3, columns // 2 if self.paired else columns,
                                zero=self.paired)
        self.columns = columns

    def store_prompt(self, layer: int, keys: Tensor, values: Tensor, group: int) -> None:
        """Write prefill keys / values ``[B, Hkv, L, D]`` once per prompt."""
        if self.shift:  # one zero column of left padding (never attended to)
            keys, values = (F.pad(t, (0, 0, 1, 0)) for t in (keys, values))
        self.prompt_keys[layer].copy_(block_keys(keys))
        self.prompt_values[layer].copy_(kernel_values(values))

    def attend(self, layer: int, queries: Tensor, keys: Tensor, values: Tensor, column: int,
               key_mask: Tensor | None) -> Tensor:
        """As :meth:`KVCache.attend` (``key_mask`` is unused: prompt padding is in
        ``prompt_start``). The layouts were fixed at construction, so the kernel is launched
        without :func:`~rlvr.kernels.decode_attention`'s per-call checks."""
        rows, heads, dim = queries.shape
        out = torch.empty(rows, heads * dim, dtype=queries.dtype)
        kernels.launch_decode_attention(
            self.library, queries, self.prompt_keys[layer], self.prompt_values[layer],
            self.prompt_start, self.keys[layer], self.values[layer], column - self.width + 1,
            self.row_prompt[:rows], keys, values, out)
        return out


"""``torch``: the CPU default rollout engine, a batched decoder written for this workload.

It runs the policy's own weights (Llama-family architectures: Llama, SmolLM2, Qwen2; RMSNorm,
rotary positions, grouped-query attention, SwiGLU) through a lean forward pass instead of the
transformers module tree, because at decode time (one token per row) the per-module overhead,
not the matmuls, dominates transformers' ``generate`` on a 2-core CPU:

- **A compute-dtype weights copy**: bf16 where the CPU computes it natively (AVX512-BF16 or
  AMX: bf16 matmuls several times faster than fp32), fp32 elsewhere (AVX2-only x86, ARM:
  torch emulates bf16 matmuls ~85x slower than fp32 ones). q/k/v are fused into one matmul
  and gate/up into another, each prepacked once into oneDNN's blocked layout (:class:`Linear`;
  in fp32 unless ``prepack_fp32=False``). The copy is refreshed when the live model's
  parameters change (their version counters move: optimizer steps, ``load_state_dict``) or on
  ``update_weights``.
- **Static KV cache**, pre-allocated per batch; prompts are left-padded so every row writes its
  next key/value in the same column. Position ids come from the per-row prompt lengths, so
  padding never shifts rotary positions.
- **Prefill once per prompt**, shared by its ``n`` samples: the prompt's keys / values are
  stored once. Decode attention is one call per layer of a native kernel of the compute dtype
  (:class:`FusedPrefixCache`, :mod:`rlvr.rollout.kernels`, compiled on first use for the
  machine's SIMD: AVX-512, AVX2 + FMA or portable): each row attends over its prompt's keys
  and its own completion keys in one fp32 softmax (in bf16 the probabilities are rounded to
  bf16 for the product with the values, as torch's CPU flash attention does), the G query
  heads of a kv head sharing every key / value load. Residual add + RMSNorm, rotary
  embedding and SwiGLU are one kernel call each on that path. Without the kernels (no C
  compiler, ``native_kernels=False``) :class:`SharedPrefixCache` splits attention into a
  prompt part (the group's ``n x G`` queries against one prompt copy) and a per-row
  completion part, merged exactly through their log-sum-exps (cascade attention).
  With ``shared_prefix=False`` (:class:`KVCache`) the prompt cache is copied n-fold instead.
- **Finished rows leave the batch**: once an eighth of the batch has hit a stop token, the
  surviving rows' cache is compacted to the front and decoding continues on the smaller batch.
- **Length buckets** (R42): prompts are sorted by length and decoded in batches of at most
  ``max_batch_size`` rows, which bounds KV memory and padding.
- **Sampling in fp32** with one seeded ``torch.Generator`` per call (:mod:`rlvr.rollout.sampling`);
  plain temperature sampling of bf16 or fp32 logits is one native kernel call on the same
  uniforms.

Numerics follow transformers' Llama in the same dtype (RMSNorm in fp32, residual stream in the
compute dtype). With ``shared_prefix=False`` the attention kernels and layouts are
transformers' own and in bf16 the matmul kernel too (oneDNN), so bf16 greedy decoding matches
the ``hf`` engine token for token; in fp32, ``prepack_fp32=False`` keeps transformers' matmul
kernel too (``F.linear``: MKL). The default paths round differently: the bf16 fused kernels
agree with the other paths to bf16 precision; the fp32 ones (fused kernels, oneDNN's fp32
matmuls) to ~1e-5 of the logits, which has kept greedy tokens equal to the ``hf`` engine's on
the test prompts (tests/rollout) but cannot promise it at near-ties.

Measured on the 2-core development machines (benchmarks/rollout_throughput.py, batch 256, 128
new tokens). bf16 (AMD EPYC, AVX512-BF16, no AMX): the fused kernel takes decode attention
from ~48 ms to ~17 ms per step (flash attention's per-(row, head) overhead dominated; what is
left is mostly the cache's memory traffic), the sampling kernel takes sampling from ~5 ms to
~2 ms; matmuls (oneDNN, prepacked) are ~75% of a step. fp32 (Intel Xeon capped to AVX2:
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
RLVR_KERNEL_CFLAGS=-march=haswell``; one thread, completion columns 56-72): the fused path
takes a decode step from 939 to 782 ms (attention 144 -> 104 ms: the kernel streams the fp32
cache at memory bandwidth; norms, rotary, SwiGLU and sampling 75 -> 29 ms), oneDNN's prepacked
fp32 matmuls are ~10% faster than MKL's here, and matmuls are ~82% of a step.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import time
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from rlvr.models.precision import resolve_precision
from rlvr.rollout.engine import (
    build_output,
    check_prompts,
    default_pad_token_id,
    left_pad,
    load_weights_into,
    params_version,
    register_engine,
)
from rlvr.rollout import kernels
from rlvr.rollout.kernels import block_keys, kernel_values, native
from rlvr.rollout.sampling import sample_next
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams

_SUPPORTED = ("llama", "qwen2", "mistral")


@functools.cache
def _libc():
    """glibc through ctypes, or None off glibc (the memory hints below are then no-ops)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Ask glibc to serve allocations up to 32 MiB from its heap and to keep freed memory.

    By default glibc returns large blocks (>= 128 KiB-ish) to the OS on free and maps fresh,
    zeroed pages on the next allocation, so every decode step page-faults through its
    activations and fp32 logits (measured: softmax over [64, 49152] 8 ms -> 1.6 ms). The
    setting is process-wide (it trades retained memory for speed) and a no-op off glibc.

    Returns:
        True if glibc accepted both settings.
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(
        libc.mallopt(m_trim_threshold, 1 << 30))


def advise_huge_pages(tensor: Tensor) -> bool:
    """Ask Linux to back ``tensor``'s (not yet touched) memory with 2 MiB transparent huge pages
    (``madvise(MADV_HUGEPAGE)`` on the 2 MiB-aligned interior; THP in "madvise" mode).

    Decode attention streams each row's keys / values from a cache of hundreds of MiB that the
    weight stream has evicted; with 4 KiB pages those reads also miss the TLB (measured: 9%
    faster attention at batch 256 with huge pages). Returns False where unsupported (not
    Linux, THP off, region under 2 MiB); never raises.
    """
    huge = 2 << 20
    start = (tensor.data_ptr() + huge - 1) & ~(huge - 1)
    end = (tensor.data_ptr() + tensor.numel() * tensor.element_size()) & ~(huge - 1)
    libc = _libc()
    if end <= start or libc is None or not hasattr(libc, "madvise"):
        return False
    madv_hugepage = 14
    return libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), madv_hugepage) == 0


class UnsupportedModelError(ValueError):
    """The ``torch`` engine does not implement this architecture (use the ``hf`` engine)."""


def check_supported_model(model) -> None:
    """Raise :class:`UnsupportedModelError` unless ``model`` is a plain transformers
    ``*ForCausalLM`` of a supported type (see :func:`check_supported`). Adapter-wrapped models
    (LoRA) are refused: their linear layers' ``.weight`` lacks the adapter delta, so a weight
    snapshot would silently sample from the base model (merge the adapters, or use ``hf``)."""
    check_supported(model.config)
    if any(hasattr(module, "lora_A") for module in model.modules()):
        raise UnsupportedModelError("torch engine cannot snapshot LoRA-wrapped weights; merge "
                                    "the adapters first or use engine 'hf'")
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not hasattr(model, "lm_head") or not all(hasattr(inner, n) for n in needed):
        raise UnsupportedModelError(f"torch engine expects a transformers *ForCausalLM with "
                                    f".model.{{{', '.join(needed)}}} and .lm_head, got "
                                    f"{type(model).__name__}; use engine 'hf'")


def check_supported(config) -> None:
    """Raise :class:`UnsupportedModelError` unless ``config`` describes a decoder this engine runs:
    model type in llama / qwen2 / mistral, SiLU MLP, no sliding window."""
    kind = getattr(config, "model_type", None)
    if kind not in _SUPPORTED:
        raise UnsupportedModelError(
            f"torch engine supports model types {', '.join(_SUPPORTED)}, not {kind!r}; "
            f"use engine 'hf'")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise UnsupportedModelError(f"torch engine needs hidden_act 'silu', not {config.hidden_act!r}")
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        if kind == "mistral":
            raise UnsupportedModelError("torch engine does not implement sliding-window attention")


class Linear:
    """``y = x @ W^T (+ b)`` with the weight prepacked for oneDNN when possible.

    A plain bf16 weight is re-laid-out into oneDNN's blocked AMX format on *every* matmul call;
    at decode batch sizes that repacking costs as much as the product itself (measured on 60
    streamed [3072, 576] weights: 27 -> 20 ms at 64 rows, 47 -> 32 ms at 256). Packing once
    per weight snapshot removes it, and the kernel, hence every output bit, is unchanged.
    fp32 weights are prepacked too when ``prepack_fp32`` (oneDNN's JIT kernels are
    vendor-neutral, where MKL's sgemm, transformers' fp32 path, is weak at skinny shapes on AMD
    CPUs); the packed op sums in another order than MKL (outputs differ in their last bits), so
    ``prepack_fp32=False`` keeps ``F.linear``, i.e. transformers' own fp32 matmuls bit for bit.

    Args:
        weight: [out, in] in the compute dtype; bias: [out] or None.
        batch_hint: typical row count, for the packing heuristics.
        prepack_fp32: prepack an fp32 weight as well (bf16 weights are always prepacked).

    Attributes:
        weight: the plain weight, or None once packed (the engine keeps one copy).
        packed: oneDNN's packed weight, or None.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, batch_hint: int,
                 prepack_fp32: bool = True):
        self.weight, self.bias, self.out_features = weight, bias, weight.shape[0]
        self.packed = None
        pack = weight.dtype == torch.bfloat16 or (weight.dtype == torch.float32 and prepack_fp32)
        if pack and _mkldnn_linear_available(weight.dtype):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
            self.weight = None  # only the packed copy is used (saves a copy of the weights)

    def __call__(self, x: Tensor) -> Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(-1, x.shape[-1])
        y = torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias, "none", [None], "")
        return y.view(*x.shape[:-1], self.out_features)


_MKLDNN_LINEAR: dict[torch.dtype, bool] = {}


def _mkldnn_linear_available(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether this torch build has oneDNN's prepacked linear ops for ``dtype`` (checked once
    per dtype)."""
    if dtype not in _MKLDNN_LINEAR:
        try:
            w = torch.zeros(8, 8, dtype=dtype)
            packed = torch.ops.mkldnn._reorder_linear_weight(w, 1)
            torch.ops.mkldnn._linear_pointwise(torch.zeros(1, 8, dtype=dtype), packed,
                                               None, "none", [None], "")
            _MKLDNN_LINEAR[dtype] = torch.backends.mkldnn.is_available()
        except (AttributeError, RuntimeError):
            _MKLDNN_LINEAR[dtype] = False
    return _MKLDNN_LINEAR[dtype]


@dataclass
class _Layer:
    """One decoder layer's weights in the compute dtype (``[out, in]`` like ``nn.Linear``)."""

    ln1: Tensor  # [H]
    qkv: Linear  # [(Hq + 2 Hkv) D, H], bias on Qwen2
    o: Linear  # [H, Hq D]
    ln2: Tensor  # [H]
    gate_up: Linear  # [2 I, H]: gate rows then up rows
    down: Linear  # [H, I]


class DecoderWeights:
    """A compute-dtype snapshot of a Llama-family model's weights plus its rotary table.

    Args:
        model: a supported transformers causal LM (:func:`check_supported_model`).
        dtype: compute dtype (bf16 or fp32).
        batch_hint: typical decode rows, for oneDNN's packing heuristics.
        prepack_fp32: prepack fp32 matmul weights for oneDNN (see :class:`Linear`).

    Attributes:
        embed: [V, H] token embeddings; lm_head: [V, H] output projection; norm: [H] final
            RMSNorm weight.
        layers: list of per-layer weights; eps: RMSNorm epsilon.
        heads, kv_heads, head_dim, intermediate: attention / MLP sizes.

    Raises:
        UnsupportedModelError: the architecture is not Llama-family.
    """

    def __init__(self, model, dtype: torch.dtype, batch_hint: int = 64,
                 prepack_fp32: bool = True):
        check_supported_model(model)
        self.batch_hint = batch_hint
        self.prepack_fp32 = prepack_fp32
        cfg = model.config
        inner = model.model
        self.dtype = dtype
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.heads
        self.intermediate = cfg.intermediate_size
        self.eps = float(cfg.rms_norm_eps)
        self.vocab_size = cfg.vocab_size
        self._rotary = inner.rotary_emb
        with torch.no_grad():
            self.embed = self._cast(inner.embed_tokens.weight)
            head = (self.embed if model.lm_head.weight is inner.embed_tokens.weight
                    else self._cast(model.lm_head.weight))
            self.lm_head = self._linear(head, None)
            self.norm = self._cast(inner.norm.weight)
            self.layers = [self._layer(block) for block in inner.layers]
        self._probe = torch.zeros(1, dtype=dtype)  # tells the rotary module the output dtype

    def _cast(self, t: Tensor) -> Tensor:
        return t.detach().to(self.dtype).contiguous()

    def _linear(self, weight: Tensor, bias: Tensor | None) -> Linear:
        return Linear(weight, bias, self.batch_hint, self.prepack_fp32)

    def _layer(self, block) -> _Layer:
        att, mlp = block.self_attn, block.mlp
        projections = (att.q_proj, att.k_proj, att.v_proj)
        bias = None
        if att.q_proj.bias is not None:
            bias = self._cast(torch.cat([p.bias for p in projections]))
        return _Layer(
            ln1=self._cast(block.input_layernorm.weight),
            qkv=self._linear(self._cast(torch.cat([p.weight for p in projections])), bias),
            o=self._linear(self._cast(att.o_proj.weight), None),
            ln2=self._cast(block.post_attention_layernorm.weight),
            gate_up=self._linear(
                self._cast(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])), None),
            down=self._linear(self._cast(mlp.down_proj.weight), None),
        )

    def rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` of shape ``positions.shape + [D]`` in the compute dtype, from the
        model's own rotary module (so any rope scaling it implements applies).

        Computed per call rather than looked up in a table: the vectorised fp32 cos / sin
        round the last bit differently depending on tensor shape, and calling the module on the
        same ``[rows, length]`` positions as transformers does keeps bf16 greedy decoding
        identical to the ``hf`` engine.
        """
        cos, sin = self._rotary(self._probe, positions.view(-1, positions.shape[-1]))
        return cos.view(*positions.shape, -1), sin.view(*positions.shape, -1)


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    # Same arithmetic as transformers' LlamaRMSNorm (normalise in fp32, cast, then scale).
    # Not ``xf.mul_``: for fp32 input ``x.float()`` is ``x`` itself (the residual stream).
    xf = x.float()
    scale = xf.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()
    return weight * (xf * scale).to(x.dtype)


def _signed_sin(sin: Tensor) -> Tensor:
    """``sin`` with its first half negated, so ``roll(x) * signed_sin == rotate_half(x) * sin``
    bit for bit (negation is exact): one op per rotation fewer (no ``neg`` + ``cat``)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def _rope(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """Rotary embedding ``x * cos + rotate_half(x) * sin`` (``signed_sin`` from
    :func:`_signed_sin`); ``rotate_half(x) = cat(-x2, x1)`` and ``roll(x, D/2) = cat(x2, x1)``."""
    rotated = torch.roll(x, x.shape[-1] // 2, dims=-1)
    return x * cos + rotated * signed_sin


def _mlp(h: Tensor, layer: _Layer, intermediate: int) -> Tensor:
    gate_up = layer.gate_up(h)
    return layer.down(F.silu(gate_up[..., :intermediate]) * gate_up[..., intermediate:])


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
    (:func:`rlvr.rollout.kernels.decode_attention`): each row's prompt part and completion part
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
        without :func:`~rlvr.rollout.kernels.decode_attention`'s per-call checks."""
        rows, heads, dim = queries.shape
        out = torch.empty(rows, heads * dim, dtype=queries.dtype)
        kernels.launch_decode_attention(
            self.library, queries, self.prompt_keys[layer], self.prompt_values[layer],
            self.prompt_start, self.keys[layer], self.values[layer], column - self.width + 1,
            self.row_prompt[:rows], keys, values, out)
        return out


class Decoder:
    """The forward passes of :class:`TorchEngine` over a :class:`DecoderWeights` snapshot.

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

        Returns:
            FloatTensor[B, V] (compute dtype): logits for each prompt's next token.
        """
        w = self.w
        b, length = ids.shape
        positions = (mask.long().cumsum(1) - 1).clamp_(min=0)
        cos, sin = w.rotary(positions)
        cos, sin = cos.unsqueeze(1), _signed_sin(sin).unsqueeze(1)  # [B, 1, L, D]
        causal = torch.ones(length, length, dtype=torch.bool).tril_()
        # Pad queries may see themselves, so no softmax row is empty (an empty row is NaN,
        # and NaN values would leak into real rows through 0 * NaN in the next layer).
        visible = None  # no padding: plain causal attention
        if not bool(mask.all()):
            visible = causal & (mask.unsqueeze(1) | torch.eye(length, dtype=torch.bool))
            visible = visible.unsqueeze(1)  # [B, 1, L, L]
        x = w.embed[ids]
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        for i, layer in enumerate(w.layers):
            qkv = layer.qkv(_rms_norm(x, layer.ln1, w.eps))
            q = _rope(qkv[..., :qd].view(b, length, w.heads, w.head_dim).transpose(1, 2), cos, sin)
            k = _rope(qkv[..., qd:qd + kd].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2),
                      cos, sin)
            v = qkv[..., qd + kd:].view(b, length, w.kv_heads, w.head_dim).transpose(1, 2)
            cache.store_prompt(i, k, v, group)
            if visible is None:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, enable_gqa=True)
            x = x + layer.o(att.transpose(1, 2).reshape(b, length, qd))
            x = x + _mlp(_rms_norm(x, layer.ln2, w.eps), layer, w.intermediate)
        return w.lm_head(_rms_norm(x[:, -1], w.norm, w.eps))

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
        sin = _signed_sin(sin)
        x = w.embed[tokens]
        qd, kd = w.heads * w.head_dim, w.kv_heads * w.head_dim
        for i, layer in enumerate(w.layers):
            qkv = layer.qkv(_rms_norm(x, layer.ln1, w.eps))
            # q and k rotate together: one set of elementwise ops instead of two.
            qk = _rope(qkv[:, :qd + kd].view(rows, w.heads + w.kv_heads, w.head_dim), cos, sin)
            att = cache.attend(i, qk[:, : w.heads], qk[:, w.heads:],
                               qkv[:, qd + kd:].view(rows, w.kv_heads, w.head_dim), column,
                               key_mask)
            x = x + layer.o(att)
            x = x + _mlp(_rms_norm(x, layer.ln2, w.eps), layer, w.intermediate)
        return w.lm_head(_rms_norm(x, w.norm, w.eps))

    def _fused_step(self, tokens: Tensor, positions: Tensor, column: int,
                    cache: FusedPrefixCache) -> Tensor:
        """:meth:`step` through the native kernels (bf16 or fp32, by the weights' dtype):
        residual add + RMSNorm, rotary embedding, attention and SwiGLU are one call each (the
        torch ops' arithmetic up to summation order, see :mod:`rlvr.rollout.kernels`); the
        matmuls stay :class:`Linear`'s."""
        w, lib = self.w, cache.library
        rows = tokens.numel()
        cos, sin = w.rotary(positions.unsqueeze(1))  # [R, 1, D]
        cos, sin = cos.view(rows, -1).contiguous(), _signed_sin(sin).view(rows, -1).contiguous()
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


@contextlib.contextmanager
def _gc_paused():
    """Pause Python's cyclic garbage collector: decoding allocates many short-lived tensor
    wrappers, whose collections cost ~2% of a decode step and free nothing (no cycles)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class _Batch:
    """Decode state of one bucket: slot s of the live batch is output row ``rows[s]``."""

    rows: Tensor  # LongTensor[R] output row of each live slot
    positions: Tensor  # LongTensor[R] rotary position of the next token fed
    key_mask: Tensor  # BoolTensor[R, columns]
    done: Tensor  # BoolTensor[R] slot finished but not yet compacted away
    tokens: Tensor  # LongTensor[R] last sampled token


@register_engine("torch")
class TorchEngine:
    """Batched CPU decoder (see the module doc).

    Args:
        model: a transformers Llama-family causal LM (any parameter dtype); the engine keeps a
            reference and snapshots its weights in ``dtype``.
        pad_token_id: completion padding id (default from the model config).
        dtype: compute dtype, ``torch.bfloat16`` (fast with AVX512-BF16 / AMX) or
            ``torch.float32`` (for CPUs without native bf16, where torch emulates bf16 matmuls
            ~85x slower than fp32 ones); None (default) resolves ``auto`` on this CPU
            (:func:`rlvr.models.precision.resolve_precision`).
        max_batch_size: rows (prompts x n) decoded together at most; more prompts are split into
            length-sorted buckets.
        compact_fraction: compact the batch once this fraction of its rows has finished.
        tune_malloc: call :func:`keep_freed_memory` (process-wide glibc setting; default True).
        shared_prefix: keep one copy of each prompt's keys / values for its n samples
            (default): attention through the native kernel (:class:`FusedPrefixCache`), else
            cascade attention (:class:`SharedPrefixCache`). False copies the prompt's cache
            n-fold and attends with transformers' own kernels and layouts, which makes bf16
            greedy decoding bit-identical to the ``hf`` engine.
        native_kernels: with ``shared_prefix``, run decode attention, the elementwise ops and
            plain temperature sampling through the compiled kernels of the compute dtype
            (:class:`FusedPrefixCache`; default True). Falls back to the pure-torch cascade
            when the kernels cannot be built (no C compiler) or do not handle the shapes (more
            than 8 query heads per kv head, a head dim not a multiple of 16).
        prepack_fp32: in fp32, run the matmuls through oneDNN's prepacked fp32 kernels
            (:class:`Linear`; default True). False keeps ``F.linear`` (MKL on x86), the
            arithmetic of transformers' fp32 forward, bit for bit.

    Raises:
        UnsupportedModelError: the architecture is not Llama-family.
    """

    name = "torch"

    def __init__(self, model, *, pad_token_id: int | None = None,
                 dtype: torch.dtype | None = None, max_batch_size: int = 256,
                 compact_fraction: float = 0.125, tune_malloc: bool = True,
                 shared_prefix: bool = True, native_kernels: bool = True,
                 prepack_fp32: bool = True):
        check_supported_model(model)
        if tune_malloc:
            keep_freed_memory()
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        if dtype is None:
            dtype = resolve_precision("auto").dtype
        self.dtype = dtype
        self.max_batch_size = max_batch_size
        self.compact_fraction = compact_fraction
        self.shared_prefix = shared_prefix
        self.native_kernels = native_kernels
        self.prepack_fp32 = prepack_fp32
        self._decoder: Decoder | None = None
        self._version = -1

    def update_weights(self, source: Any = None) -> None:
        """Re-snapshot the weights: from the live model (``None``), or after loading
        ``source`` (a ``state_dict`` or ``nn.Module``) into the live model.

        Raises:
            TypeError: ``source`` is not None, a mapping or a module.
        """
        if source is not None:
            load_weights_into(self.model, source)
        weights = DecoderWeights(self.model, self.dtype, self.max_batch_size, self.prepack_fp32)
        self._decoder = Decoder(weights, self._kernel_library(weights))
        self._version = params_version(self.model)

    def _current_decoder(self) -> Decoder:
        if self._decoder is None or params_version(self.model) != self._version:
            self.update_weights()
        return self._decoder

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams) -> RolloutOutput:
        """Sample ``params.n`` completions per prompt; see :class:`RolloutEngine`.

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        with _gc_paused():
            return self._generate(prompt_ids, params)

    def _generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
                  ) -> RolloutOutput:
        decoder = self._current_decoder()
        prompts = check_prompts(prompt_ids, decoder.w.vocab_size)
        generator = torch.Generator().manual_seed(params.resolved_seed())
        n, total = params.n, len(prompts) * params.n
        tokens = torch.full((total, params.max_new_tokens), self.pad_token_id, dtype=torch.long)
        logprobs = torch.zeros(total, params.max_new_tokens)
        lengths = torch.full((total,), params.max_new_tokens, dtype=torch.long)
        stopped = torch.zeros(total, dtype=torch.bool)
        timing = RolloutTiming()
        out = (tokens, logprobs, lengths, stopped)
        for bucket in self._buckets(prompts, n):
            self._generate_bucket(decoder, [prompts[i] for i in bucket], bucket, params,
                                  generator, out, timing)
        return build_output(tokens, logprobs, lengths, stopped, n, self.pad_token_id, timing)

    def _kernel_library(self, weights: DecoderWeights):
        """The native kernel library when the fused path applies (bf16 or fp32, shared prefix,
        at most 8 query heads per kv head, head dim a multiple of 16), else None."""
        if not (self.native_kernels and self.shared_prefix
                and weights.dtype in (torch.bfloat16, torch.float32)):
            return None
        if not kernels.supports(weights.heads, weights.kv_heads, weights.head_dim):
            return None
        return native()

    def _buckets(self, prompts: list[list[int]], n: int) -> list[list[int]]:
        """Prompt indices grouped into length-sorted batches of at most max_batch_size rows."""
        per_batch = max(1, self.max_batch_size // n)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        return [order[i:i + per_batch] for i in range(0, len(order), per_batch)]

    def _generate_bucket(self, decoder: Decoder, prompts: list[list[int]], prompt_rows: list[int],
                         params: SamplingParams, generator: torch.Generator,
                         out: tuple[Tensor, ...], timing: RolloutTiming) -> None:
        """Prefill, then decode until every row stopped or hit max_new_tokens; writes results
        into ``out = (tokens, logprobs, lengths, stopped)`` at the bucket's output rows."""
        n = params.n
        start = time.perf_counter()
        ids, mask = left_pad(prompts, self.pad_token_id)
        width = ids.shape[1]
        padded = not bool(mask.all())
        if decoder.library is not None:
            cache = FusedPrefixCache(decoder.w, len(prompts), n, width, params.max_new_tokens,
                                     mask, decoder.library)
        elif self.shared_prefix:
            cache = SharedPrefixCache(decoder.w, len(prompts), n, width, params.max_new_tokens,
                                      mask)
        else:
            cache = KVCache(decoder.w, len(prompts) * n, width + params.max_new_tokens - 1)
        first_logits = decoder.prefill(ids, mask, cache, n).repeat_interleave(n, dim=0)
        rows = (torch.tensor(prompt_rows).unsqueeze(1) * n + torch.arange(n)).flatten()
        key_mask = torch.ones(rows.numel(), width + params.max_new_tokens, dtype=torch.bool)
        key_mask[:, :width] = mask.repeat_interleave(n, dim=0)
        batch = _Batch(rows=rows, positions=mask.sum(1).repeat_interleave(n),
                       key_mask=key_mask, done=torch.zeros(rows.numel(), dtype=torch.bool),
                       tokens=rows)
        self._record(batch, first_logits, 0, params, generator, out, decoder.library)
        timing.prefill_seconds += time.perf_counter() - start
        start = time.perf_counter()
        for step in range(1, params.max_new_tokens):
            if bool(batch.done.all()):
                break
            batch = self._maybe_compact(batch, cache, width + step - 1)
            column = width + step - 1
            # Without padding, no mask: cheaper, and the same kernel transformers picks.
            key_mask = batch.key_mask[:, : column + 1] if padded else None
            logits = decoder.step(batch.tokens, batch.positions, column, key_mask, cache)
            batch.positions += 1
            self._record(batch, logits, step, params, generator, out, decoder.library)
        timing.decode_seconds += time.perf_counter() - start

    @staticmethod
    def _record(batch: _Batch, logits: Tensor, step: int, params: SamplingParams,
                generator: torch.Generator, out: tuple[Tensor, ...], library=None) -> None:
        """Sample the step's tokens (through the native sampler when ``library`` is given),
        store them for live rows, mark rows that stopped."""
        tokens, logprobs, lengths, stopped = out
        sampled, logp = sample_next(logits, params, generator, library)
        live = ~batch.done
        rows = batch.rows[live]
        tokens[rows, step] = sampled[live]
        logprobs[rows, step] = logp[live]
        if params.stop_token_ids:
            hit = live & torch.isin(sampled, torch.tensor(params.stop_token_ids))
            if bool(hit.any()):
                lengths[batch.rows[hit]] = step + 1
                stopped[batch.rows[hit]] = True
                batch.done |= hit
        batch.tokens = sampled

    def _maybe_compact(self, batch: _Batch, cache: KVCache | SharedPrefixCache, columns: int
                       ) -> _Batch:
        """Drop finished rows once they are ``compact_fraction`` of the batch (copying the
        cache costs about as much as a couple of decode steps for those rows, so not every step)."""
        dead = int(batch.done.sum())
        if dead == 0 or dead < self.compact_fraction * batch.rows.numel():
            return batch
        keep = (~batch.done).nonzero().squeeze(1)
        cache.compact(keep, columns)
        return _Batch(rows=batch.rows[keep], positions=batch.positions[keep],
                      key_mask=batch.key_mask[keep], done=batch.done[keep],
                      tokens=batch.tokens[keep])

"""``torch``: the CPU default rollout engine, a batched decoder written for this workload.

It runs the policy's own weights (Llama-family architectures: Llama, SmolLM2, Qwen2; RMSNorm,
rotary positions, grouped-query attention, SwiGLU) through a lean forward pass instead of the
transformers module tree, because at decode time (one token per row) the per-module overhead,
not the matmuls, dominates transformers' ``generate`` on a 2-core CPU:

- **A compute-dtype weights copy**: bf16 where the CPU computes it natively (AVX512-BF16 or
  AMX: bf16 matmuls several times faster than fp32), fp32 elsewhere (AVX2-only x86, ARM:
  torch emulates bf16 matmuls ~85x slower than fp32 ones). q/k/v are fused into one matmul
  and gate/up into another, each prepacked once into oneDNN's blocked layout
  (:class:`~rlvr.rollout.decoder.linear.Linear`; in fp32 unless ``prepack_fp32=False``). The
  copy (:func:`~rlvr.rollout.decoder.snapshot.snapshot_weights`) is refreshed when the live
  model's parameters change (their version counters move: optimizer steps,
  ``load_state_dict``) or on ``update_weights``.
- **Static KV cache**, pre-allocated per batch; prompts are left-padded so every row writes its
  next key/value in the same column. Position ids come from the per-row prompt lengths, so
  padding never shifts rotary positions.
- **Prefill once per prompt**, shared by its ``n`` samples: the prompt's keys / values are
  stored once; a prefix common to all prompts of a bucket (a system message, few-shot
  examples; :mod:`rlvr.models.common_prefix`) is prefilled once for all of them. Decode
  attention is one call per layer of a native kernel of the compute dtype
  (:class:`FusedPrefixCache`, :mod:`rlvr.kernels`, compiled on first use for the
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

This module holds the engine (bucketing, the decode loop, sampling, compaction); its decoder
is :mod:`rlvr.rollout.decoder` (the weight snapshot, matmuls, KV caches, forward passes).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rlvr import kernels
from rlvr.models.precision import resolve_precision
from rlvr.rollout.decoder.caches import FusedPrefixCache, KVCache, SharedPrefixCache
from rlvr.rollout.decoder.forward import Decoder
from rlvr.rollout.decoder.int8 import check_int8_available
from rlvr.rollout.decoder.memory import keep_freed_memory
from rlvr.rollout.decoder.snapshot import DecoderWeights, check_quantization, snapshot_weights
from rlvr.rollout.decoder.support import check_supported_model
from rlvr.rollout.engine import (
    build_output,
    check_prompts,
    default_pad_token_id,
    left_pad,
    load_weights_into,
    params_version,
    register_engine,
)
from rlvr.rollout.episode_decode import play_bucket
from rlvr.rollout.hooks import DecodeHooks
from rlvr.rollout.reported_logprobs import ReportBuffers
from rlvr.rollout.sampling import sample_next
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams


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
        model: a transformers Llama-family causal LM (any parameter dtype), plain or wrapped by
            peft with plain LoRA adapters; the engine keeps a reference and snapshots its
            weights in ``dtype`` (a LoRA model's layer weights merged as the snapshot is
            built: :attr:`samples_lora`).
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
        quantization: ``"none"`` (default) or ``"int8"``: the decoder layers' matmuls with
            int8 weights (per output channel, re-quantised at every snapshot) and dynamically
            quantised fp32 activations (:mod:`rlvr.rollout.decoder.int8`; fp32 compute, so
            ``dtype`` must be None or fp32). Its log-probs are the int8 model's, not the
            policy's: train with truncated importance sampling (``algo.tis_cap``).

    Raises:
        UnsupportedModelError: the architecture is not Llama-family.
        ValueError: ``max_batch_size < 1``, an unknown ``quantization``, or int8 with a bf16
            ``dtype``.
        Int8Unavailable: int8 in a torch build without fbgemm's quantized engine.
    """

    name = "torch"
    #: The engine samples a peft LoRA model given as ``model`` itself, no merged copy needed
    #: (:func:`rlvr.rollout.engine.samples_lora`).
    samples_lora = True

    def __init__(self, model, *, pad_token_id: int | None = None,
                 dtype: torch.dtype | None = None, max_batch_size: int = 256,
                 compact_fraction: float = 0.125, tune_malloc: bool = True,
                 shared_prefix: bool = True, native_kernels: bool = True,
                 prepack_fp32: bool = True, quantization: str = "none"):
        check_supported_model(model)
        if tune_malloc:
            keep_freed_memory()
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        if dtype is None:
            dtype = torch.float32 if quantization == "int8" else resolve_precision("auto").dtype
        check_quantization(quantization, dtype)
        if quantization == "int8":
            check_int8_available()
        self.dtype = dtype
        self.quantization = quantization
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
        self._decoder = None  # the old snapshot goes before the new one is built (peak: one)
        weights = snapshot_weights(self.model, self.dtype, self.max_batch_size, self.prepack_fp32,
                                   self.quantization)
        self._decoder = Decoder(weights, self._kernel_library(weights),
                                shared_prefill=self.shared_prefix)
        self._version = params_version(self.model)

    def set_model(self, model) -> None:
        """Sample from ``model`` from now on (kept by reference, like the constructor's: a
        plain or LoRA-wrapped causal LM). The old snapshot is dropped at once; the next
        generation snapshots ``model``.

        Raises:
            UnsupportedModelError: as the constructor.
        """
        check_supported_model(model)
        self.model = model
        self._decoder = None
        self._version = -1

    def _current_decoder(self) -> Decoder:
        if self._decoder is None or params_version(self.model) != self._version:
            self.update_weights()
        return self._decoder

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams,
                 hooks: DecodeHooks | None = None) -> RolloutOutput:
        """Sample ``params.n`` completions per prompt; see :class:`RolloutEngine`.
        ``hooks`` (:mod:`rlvr.rollout.hooks`) see every step's logits and tokens.

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        with _gc_paused():
            return self._generate(prompt_ids, params, hooks)

    def _generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams,
                  hooks: DecodeHooks | None = None) -> RolloutOutput:
        decoder = self._current_decoder()
        prompts = check_prompts(prompt_ids, decoder.w.vocab_size)
        generator = torch.Generator().manual_seed(params.resolved_seed())
        n, total = params.n, len(prompts) * params.n
        tokens = torch.full((total, params.max_new_tokens), self.pad_token_id, dtype=torch.long)
        logprobs = torch.zeros(total, params.max_new_tokens)
        lengths = torch.full((total,), params.max_new_tokens, dtype=torch.long)
        stopped = torch.zeros(total, dtype=torch.bool)
        timing = RolloutTiming()
        report = ReportBuffers.allocate(params, total, params.max_new_tokens,
                                        decoder.w.vocab_size)
        out = (tokens, logprobs, lengths, stopped, report)
        for bucket in self._buckets(prompts, n):
            self._generate_bucket(decoder, [prompts[i] for i in bucket], bucket, params,
                                  generator, out, timing, hooks)
        return build_output(tokens, logprobs, lengths, stopped, n, self.pad_token_id, timing,
                            report)

    @torch.no_grad()
    def play_episodes(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams,
                      book) -> RolloutTiming:
        """Play ``params.n`` multi-turn episodes of each prompt in one decode loop whose KV
        cache continues across turns (:mod:`rlvr.rollout.episode_decode`); ``book`` is their
        :class:`rlvr.envs.episodes.EpisodeBook` (it records the ids and answers each turn).
        Prompts go in length-sorted buckets of at most ``max_batch_size`` rows, as in
        :meth:`generate`.

        Returns:
            The call's timing (prefill / decode seconds, sampled tokens).

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        with _gc_paused():
            decoder = self._current_decoder()
            prompts = check_prompts(prompt_ids, decoder.w.vocab_size)
            generator = torch.Generator().manual_seed(params.resolved_seed())
            timing = RolloutTiming()
            for bucket in self._buckets(prompts, params.n):
                play_bucket(self, decoder, [prompts[i] for i in bucket], bucket, params, book,
                            generator, timing)
            return timing

    def new_cache(self, decoder: Decoder, prompts: int, n: int, width: int, new_tokens: int,
                  mask: Tensor):
        """The KV cache of a bucket: ``prompts`` left-padded prompts of ``width`` columns
        (``mask``: BoolTensor[prompts, width], real tokens), ``n`` rows each, room for
        ``new_tokens - 1`` completion columns: :class:`FusedPrefixCache` with the native
        kernels, else :class:`SharedPrefixCache` (``shared_prefix``), else :class:`KVCache`."""
        if decoder.library is not None:
            return FusedPrefixCache(decoder.w, prompts, n, width, new_tokens, mask,
                                    decoder.library)
        if self.shared_prefix:
            return SharedPrefixCache(decoder.w, prompts, n, width, new_tokens, mask)
        return KVCache(decoder.w, prompts * n, width + new_tokens - 1)

    def _kernel_library(self, weights: DecoderWeights):
        """The native kernel library when the fused path applies (bf16 or fp32, shared prefix,
        at most 8 query heads per kv head, head dim a multiple of 16), else None."""
        if not (self.native_kernels and self.shared_prefix
                and weights.dtype in (torch.bfloat16, torch.float32)):
            return None
        if not kernels.supports(weights.heads, weights.kv_heads, weights.head_dim):
            return None
        return kernels.native()

    def _buckets(self, prompts: list[list[int]], n: int) -> list[list[int]]:
        """Prompt indices grouped into length-sorted batches of at most max_batch_size rows."""
        per_batch = max(1, self.max_batch_size // n)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        return [order[i:i + per_batch] for i in range(0, len(order), per_batch)]

    def _generate_bucket(self, decoder: Decoder, prompts: list[list[int]], prompt_rows: list[int],
                         params: SamplingParams, generator: torch.Generator,
                         out: tuple[Tensor, ...], timing: RolloutTiming,
                         hooks: DecodeHooks | None = None) -> None:
        """Prefill, then decode until every row stopped or hit max_new_tokens; writes results
        into ``out = (tokens, logprobs, lengths, stopped, report)`` at the bucket's output
        rows (``report``: :class:`ReportBuffers` or None)."""
        n = params.n
        start = time.perf_counter()
        ids, mask = left_pad(prompts, self.pad_token_id)
        width = ids.shape[1]
        padded = not bool(mask.all())
        cache = self.new_cache(decoder, len(prompts), n, width, params.max_new_tokens, mask)
        first_logits = decoder.prefill(ids, mask, cache, n).repeat_interleave(n, dim=0)
        rows = (torch.tensor(prompt_rows).unsqueeze(1) * n + torch.arange(n)).flatten()
        key_mask = torch.ones(rows.numel(), width + params.max_new_tokens, dtype=torch.bool)
        key_mask[:, :width] = mask.repeat_interleave(n, dim=0)
        batch = _Batch(rows=rows, positions=mask.sum(1).repeat_interleave(n),
                       key_mask=key_mask, done=torch.zeros(rows.numel(), dtype=torch.bool),
                       tokens=rows)
        self._record(batch, first_logits, 0, params, generator, out, decoder.library, hooks)
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
            self._record(batch, logits, step, params, generator, out, decoder.library,
                         hooks)
        timing.decode_seconds += time.perf_counter() - start

    @staticmethod
    def _record(batch: _Batch, logits: Tensor, step: int, params: SamplingParams,
                generator: torch.Generator, out: tuple[Tensor, ...], library=None,
                hooks: DecodeHooks | None = None) -> None:
        """Sample the step's tokens (through the native sampler when ``library`` is given),
        store them (and their reported log-probs, when asked for) for live rows, mark rows
        that stopped (a stop token, or ``hooks.on_step`` finishing them)."""
        tokens, logprobs, lengths, stopped, report = out
        drawn_from = logits if hooks is None else hooks.process_logits(batch.rows, step, logits)
        sampled, logp = sample_next(drawn_from, params, generator, library)
        live = ~batch.done
        rows = batch.rows[live]
        tokens[rows, step] = sampled[live]
        logprobs[rows, step] = logp[live]
        if report is not None:
            report.record(rows, step, logits[live], sampled[live], params)
        if params.stop_token_ids:
            hit = live & torch.isin(sampled, torch.tensor(params.stop_token_ids))
            if bool(hit.any()):
                lengths[batch.rows[hit]] = step + 1
                stopped[batch.rows[hit]] = True
                batch.done |= hit
        if hooks is not None:
            finish = hooks.on_step(rows, step, sampled[live], logp[live], logits[live])
            if finish is not None and bool(finish.any()):
                slots = live.nonzero().squeeze(1)[finish]
                ended = slots[~batch.done[slots]]
                lengths[batch.rows[ended]] = step + 1
                batch.done[ended] = True
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

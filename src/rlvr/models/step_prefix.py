"""Distinct prompts encoded once, their key/value cache shared by the rows that repeat them.

Two uses. Per micro-batch (:func:`rlvr.models.forward.completion_log_probs` with
``shared_prefix``, ``leaves=False``): the rows gather the cache *with its graph*, and the one
backward of the micro-batch reaches the prompt through the gather. Per optimizer step (the
update's ``grpo.shared_prefix: step``): the per-micro-batch way ties the micro-batches to the
groups, so a micro-batch pads every row to its longest completion (a multi-turn step's
episodes run 20-96 tokens: a third of the compute was padding). Instead the step's U distinct
prompts run once, before the first micro-batch, and their key/value cache and last-position
logits keep their autograd graph:

1. :class:`StepPrefix` encodes the prompts and holds *detached leaf copies* of the cache;
2. each micro-batch gathers those leaves to its rows (any rows: the update can sort the
   step's rows by length, so a micro-batch pads to its own, similar, lengths) and runs only the
   completion tokens on top; its backward leaves the prompt part of the gradient on the
   leaves (accumulated over the micro-batches) and the completion part on the weights;
3. :meth:`StepPrefix.backward` pushes the accumulated leaf gradients through the prompt graph
   once, which adds the prompt part to the weights.

The gradient is the plain forward's, up to float summation order (d loss / d weights is the
sum of the two parts by the chain rule), at U * P + n * T' tokens of compute, T' the sorted
micro-batches' widths, instead of sum over micro-batches of (U_m * P + n_m * T_m). The prompt
activations stay in memory for the whole step (U * P tokens' worth). A prefix common to all U
prompts (a system message) runs once, the rest of each prompt on top of it.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from rlvr.models.activation_memory import head_log_probs, lm_parts
from rlvr.models.common_prefix import MIN_SHARED_PREFILL, common_prefix_length, split_prefix
from rlvr.models.sequences import (
    RowGather,
    SequenceBatch,
    autocast,
    cache_argument,
    log_probs_from_logits,
)


def prefix_cache(model, prefix_ids: Tensor, *, bf16: bool):
    """The key/value cache of ``prefix_ids`` [1, P] (positions 0..P-1), in the caller's grad
    mode: a prefix that many rows start with, run once (:func:`expand_prefix` hands it to
    their forward). Returns the model's own cache object (one row)."""
    with autocast(bf16):
        return model(input_ids=prefix_ids, use_cache=True,
                     position_ids=torch.arange(prefix_ids.shape[1]).unsqueeze(0),
                     logits_to_keep=1)[cache_argument(model)]


def expand_prefix(past, rows: int):
    """``past`` (:func:`prefix_cache`) as a cache of ``rows`` rows, each a view of the one
    prefix row (no copy; the backward sums the rows' gradients onto it in a fixed order). A
    forward that is handed it appends to it, so every forward needs its own."""
    wide = [t.expand(rows, -1, -1, -1) for layer in past.layers
            for t in (layer.keys, layer.values)]
    return _cache_holding(past, wide[0::2], wide[1::2])


def _cache_holding(template, keys, values):
    """A copy of the model's own key/value cache ``template`` (its class and layer types)
    whose layers hold ``keys`` / ``values`` (one tensor per layer). Each forward that is
    handed a cache appends to it, so every forward gets its own copy."""
    out = copy.copy(template)
    out.layers = [copy.copy(layer) for layer in template.layers]
    for layer, k, v in zip(out.layers, keys, values):
        layer.keys, layer.values = k, v
    return out


class StepPrefix:
    """Distinct prompts, encoded once (module doc). The encoding runs in the caller's grad
    mode (under ``torch.no_grad()``: old / reference log-probs, nothing kept).

    Args:
        model: the policy (a ``transformers`` causal LM, PEFT-wrapped or not).
        prompts: the rows' prompt token-id lists (n lists; repeats are encoded once).
        bf16: bf16 autocast for the prompt forward (as the completion forward uses).
        leaves: with grad enabled, the rows read detached leaf copies of the cache and
            :meth:`backward` pushes their gradient through the prompts once (one prefix for
            many micro-batches); False: the rows read the cache with its graph (one prefix
            for one backward).
        chunk: prompts per forward call (memory; the result does not depend on it).

    Raises:
        ValueError: no prompts, or an empty prompt.
    """

    def __init__(self, model, prompts: list[list[int]], *, bf16: bool, leaves: bool = True,
                 chunk: int = 16) -> None:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("StepPrefix needs at least one prompt and no empty prompt")
        self.index: dict[tuple[int, ...], int] = {}
        for p in prompts:
            self.index.setdefault(tuple(p), len(self.index))
        distinct = list(self.index)
        width = max(len(p) for p in distinct)
        self.mask = torch.zeros((len(distinct), width), dtype=torch.long)
        ids = torch.zeros((len(distinct), width), dtype=torch.long)
        for u, p in enumerate(distinct):
            ids[u, width - len(p):] = torch.tensor(p, dtype=torch.long)
            self.mask[u, width - len(p):] = 1
        self.lengths = self.mask.sum(-1)
        self.bf16 = bf16
        self.cache_name = cache_argument(model)
        self.keys, self.values, self.last_logits = self._encode(model, ids, chunk)
        self.leaves: list[Tensor] = []
        if leaves and torch.is_grad_enabled():
            self.leaves = [t.detach().requires_grad_(True)
                           for t in (*self.keys, *self.values, self.last_logits)]

    def _encode(self, model, ids: Tensor, chunk: int):
        """Keys / values per layer [U, Hkv, width, D] and last-position logits [U, 1, V] of the
        left-padded distinct prompts ``ids`` [U, width]. A prefix that every prompt starts
        with (a system message; at least :data:`MIN_SHARED_PREFILL` tokens) runs once: the
        cache rows are then ``[prefix | padding | rest]`` and ``self.mask`` says so."""
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        shared = common_prefix_length(ids, self.mask.bool())
        past = None
        if shared >= MIN_SHARED_PREFILL:
            split = split_prefix(ids, self.mask, shared)
            past = prefix_cache(model, split.prefix_ids, bf16=self.bf16)
            ids, positions = split.rest_ids, split.rest_positions
            self.mask = torch.cat([split.rest_mask.new_ones(len(ids), shared), split.rest_mask],
                                  dim=1)
        keys: list[list[Tensor]] = []
        values: list[list[Tensor]] = []
        logits = []
        with autocast(self.bf16):
            for s in range(0, ids.shape[0], chunk):
                rows = ids[s:s + chunk]
                extra = {}
                if past is not None:  # the prefix's keys / values, as views for these rows
                    extra[self.cache_name] = expand_prefix(past, len(rows))
                out = model(input_ids=rows, attention_mask=self.mask[s:s + chunk],
                            position_ids=positions[s:s + chunk], use_cache=True,
                            logits_to_keep=1, **extra)
                cache = out[self.cache_name]
                self._cache_template = cache  # the model's own cache class and layer types
                keys.append([layer.keys for layer in cache.layers])
                values.append([layer.values for layer in cache.layers])
                logits.append(out.logits)

        def join(parts: list[Tensor]) -> Tensor:  # one chunk (the per-micro-batch use): no copy
            return parts[0] if len(parts) == 1 else torch.cat(parts)

        layers = len(keys[0])
        return ([join([k[i] for k in keys]) for i in range(layers)],
                [join([v[i] for v in values]) for i in range(layers)], join(logits))

    def log_probs(self, model, batch: SequenceBatch, *, temperature: float = 1.0,
                  entropy: str | None = None, chunk_tokens: int | None = None):
        """As :func:`rlvr.models.forward.completion_log_probs` for ``batch`` (rows whose
        prompts this prefix encoded), running only the completion tokens; ``chunk_tokens``
        as there (the head over chunks of positions).

        Returns:
            FloatTensor[n, T] (fp32) log-probs, or ``(log_probs, entropy)``.

        Raises:
            KeyError: a row's prompt is not one of this prefix's.
            ValueError: ``batch.prompts`` is None.
        """
        if chunk_tokens is None:
            logits = self.logits(model, batch)
            return log_probs_from_logits(logits, batch.completion_ids, temperature, entropy)
        decoder, head = lm_parts(model)
        last, hidden = self._body(decoder, batch, body_only=True)
        ids = batch.completion_ids
        # the prompt's last logits
        first = log_probs_from_logits(last, ids[:, :1], temperature, entropy)
        with autocast(self.bf16):
            rest = head_log_probs(hidden[:, :-1], head, ids[:, 1:], temperature=temperature,
                                  entropy=entropy, chunk_tokens=chunk_tokens)
        if entropy is None:
            return torch.cat([first, rest], dim=1)
        return tuple(torch.cat([a, b], dim=1) for a, b in zip(first, rest))

    def logits(self, model, batch: SequenceBatch) -> Tensor:
        """FloatTensor[n, T, V]: the logits that predict each completion token of ``batch``
        (position t predicts token t). Raises as :meth:`log_probs`."""
        last, body = self._body(model, batch)
        # Token 0 is predicted by the prompt's last position, token t by completion t - 1.
        return torch.cat([last, body[:, :-1]], dim=1)

    def _body(self, model, batch: SequenceBatch, body_only: bool = False
              ) -> tuple[Tensor, Tensor]:
        """The prompt's last logits gathered to the rows [n, 1, V], and ``model``'s output
        over the completion tokens on top of the cache: logits [n, T, V] of the causal LM, or
        with ``body_only`` (``model`` is the decoder body) its hidden states [n, T, H]."""
        if batch.prompts is None:
            raise ValueError("StepPrefix needs batch.prompts")
        row_prompt = torch.tensor([self.index[tuple(p)] for p in batch.prompts])
        gather = RowGather(row_prompt)
        layers = len(self.keys)
        if self.leaves:
            keys, values = self.leaves[:layers], self.leaves[layers:2 * layers]
            last = self.leaves[-1]
        else:
            keys, values, last = self.keys, self.values, self.last_logits
        cache = _cache_holding(self._cache_template, [gather(k) for k in keys],
                               [gather(v) for v in values])
        completion_ids, steps = batch.completion_ids, batch.completion_ids.shape[1]
        attention = torch.cat([self.mask[row_prompt], batch.completion_mask.long()], dim=1)
        positions = self.lengths[row_prompt, None] + torch.arange(steps)
        keep = {} if body_only else {"logits_to_keep": steps}
        with autocast(self.bf16):
            body = model(input_ids=completion_ids, attention_mask=attention,
                         position_ids=positions, use_cache=True, **keep,
                         **{self.cache_name: cache})
        out = body.last_hidden_state if body_only else body.logits
        return gather(last), out

    def backward(self) -> None:
        """Push the gradients the micro-batches left on the leaves through the prompt graph
        (adds the prompt part of the gradient to the weights); a no-op without gradients.
        Frees the graph."""
        pairs = [(t, leaf.grad) for t, leaf in
                 zip((*self.keys, *self.values, self.last_logits), self.leaves)
                 if leaf.grad is not None and t.requires_grad]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])
        self.release()

    def release(self) -> None:
        """Drop the graph and the leaves (an epoch that stops early)."""
        self.keys, self.values, self.leaves = [], [], []
        self.last_logits = self._cache_template = None

"""Each distinct prompt of an optimizer step encoded once, for every micro-batch of the step.

The per-micro-batch shared prefix (:func:`rlvr.models.forward.completion_log_probs` with
``shared_prefix``) runs each distinct prompt once *per micro-batch*: cheap when a micro-batch
holds whole groups, but it ties the micro-batches to the groups, so a micro-batch pads every
row to its longest completion (a multi-turn step's episodes run 20-96 tokens: a third of the
compute was padding). Here the step's U distinct prompts run once, before the first
micro-batch, and their key/value cache and last-position logits keep their autograd graph:

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
activations stay in memory for the whole step (U * P tokens' worth).
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import DynamicCache

from rlvr.models.forward import (SequenceBatch, _cache_argument, _from_logits, _RowGather,
                                 autocast)


class StepPrefix:
    """The distinct prompts of a step, encoded once (module doc).

    Args:
        model: the policy (a ``transformers`` causal LM, PEFT-wrapped or not).
        prompts: the step's rows' prompt token-id lists (n lists; repeats are encoded once).
        bf16: bf16 autocast for the prompt forward (as the micro-batches use).
        grad: keep the graph and make leaves (the update); False: a no-grad encoding (old /
            reference log-probs).
        chunk: prompts per forward call (memory; the result does not depend on it).

    Raises:
        ValueError: no prompts, or an empty prompt.
    """

    def __init__(self, model, prompts: list[list[int]], *, bf16: bool, grad: bool = True,
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
        self.bf16, self.grad = bf16, grad
        self.cache_name = _cache_argument(model)
        self.keys, self.values, self.last_logits = self._encode(model, ids, chunk)
        self.leaves: list[Tensor] = []
        if grad:
            self.leaves = [t.detach().requires_grad_(True)
                           for t in (*self.keys, *self.values, self.last_logits)]

    def _encode(self, model, ids: Tensor, chunk: int):
        keys: list[list[Tensor]] = []
        values: list[list[Tensor]] = []
        logits = []
        positions = (self.mask.cumsum(-1) - 1).clamp(min=0)
        context = torch.enable_grad() if self.grad else torch.no_grad()
        with context, autocast(self.bf16):
            for s in range(0, ids.shape[0], chunk):
                out = model(input_ids=ids[s:s + chunk], attention_mask=self.mask[s:s + chunk],
                            position_ids=positions[s:s + chunk], use_cache=True,
                            logits_to_keep=1)
                cache = out[self.cache_name]
                keys.append([layer.keys for layer in cache.layers])
                values.append([layer.values for layer in cache.layers])
                logits.append(out.logits)
        layers = len(keys[0])
        return ([torch.cat([k[i] for k in keys]) for i in range(layers)],
                [torch.cat([v[i] for v in values]) for i in range(layers)],
                torch.cat(logits))

    def log_probs(self, model, batch: SequenceBatch, *, temperature: float = 1.0,
                  entropy: str | None = None):
        """As :func:`rlvr.models.forward.completion_log_probs` for ``batch`` (rows whose
        prompts this prefix encoded), running only the completion tokens.

        Returns:
            FloatTensor[n, T] (fp32) log-probs, or ``(log_probs, entropy)``.

        Raises:
            KeyError: a row's prompt is not one of this prefix's.
        """
        if batch.prompts is None:
            raise ValueError("StepPrefix.log_probs needs batch.prompts")
        row_prompt = torch.tensor([self.index[tuple(p)] for p in batch.prompts])
        gather = _RowGather(row_prompt)
        layers = len(self.keys)
        if self.grad:
            keys, values = self.leaves[:layers], self.leaves[layers:2 * layers]
            last = self.leaves[-1]
        else:
            keys, values, last = self.keys, self.values, self.last_logits
        cache = DynamicCache(config=model.config)
        for i in range(layers):
            cache.update(gather(keys[i]), gather(values[i]), i)
        completion_ids, steps = batch.completion_ids, batch.completion_ids.shape[1]
        attention = torch.cat([self.mask[row_prompt], batch.completion_mask.long()], dim=1)
        positions = self.lengths[row_prompt, None] + torch.arange(steps)
        with autocast(self.bf16):
            body = model(input_ids=completion_ids, attention_mask=attention,
                         position_ids=positions, use_cache=True, logits_to_keep=steps,
                         **{self.cache_name: cache})
        # Token 0 is predicted by the prompt's last position, token t by completion t - 1.
        logits = torch.cat([gather(last), body.logits[:, :-1]], dim=1)
        return _from_logits(logits, completion_ids, temperature, entropy)

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
        self.last_logits = None

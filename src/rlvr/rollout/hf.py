"""``hf``: transformers ``generate``, the reference engine.

Sampling follows transformers' own logits processors (temperature, top-k, then top-p) and its
global RNG, seeded per call inside ``torch.random.fork_rng`` so the caller's RNG state is left
untouched. ``generate`` does not return the untruncated tempered log-probs the trainer needs, so
they are computed afterwards by one teacher-forced forward pass over prompt + completion (rows
in chunks, fp32 log-softmax): ``log_softmax(logits / T)[token]``, T = 1 when greedy. Reported
log-probs (``SamplingParams.top_logprobs`` / ``raw_logprobs``) come from the same pass's logits.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from rlvr.algo.logprobs import token_log_probs
from rlvr.rollout.engine import (
    build_output,
    check_prompts,
    default_pad_token_id,
    first_stop_lengths,
    left_pad,
    load_weights_into,
    params_version,
    register_engine,
)
from rlvr.rollout.hooks import DecodeHooks
from rlvr.rollout.reported_logprobs import ReportBuffers
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams


class _FirstTokenClock:
    """A transformers streamer that only notes when the first generated token arrives (the
    first ``put`` is the prompt, the second the first new token)."""

    def __init__(self) -> None:
        self.puts = 0
        self.first_token_at: float | None = None

    def put(self, value) -> None:
        self.puts += 1
        if self.puts == 2:
            self.first_token_at = time.perf_counter()

    def end(self) -> None:
        pass


class _HookAdapter:
    """:class:`rlvr.rollout.hooks.DecodeHooks` inside transformers' ``generate``: a logits
    processor (it runs before the temperature / top-k / top-p warpers, so it sees the model's
    logits) and a stopping criterion (called once each step's tokens are appended). Rows are
    output rows: ``generate`` runs ``n`` sequences per prompt, prompt-major."""

    def __init__(self, hooks: DecodeHooks, width: int, params: SamplingParams, rows: int):
        self.hooks, self.width, self.temperature = hooks, width, params.temperature
        stop_token_ids = params.stop_token_ids
        self.stop_ids = torch.tensor(list(stop_token_ids), dtype=torch.long)
        self.finished = torch.zeros(rows, dtype=torch.bool)
        self.ended_at = torch.zeros(rows, dtype=torch.long)  # length of rows a hook finished
        self.logits: Tensor | None = None

    def process(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        self.logits = scores.float()
        rows = torch.arange(scores.shape[0])
        return self.hooks.process_logits(rows, input_ids.shape[1] - self.width, self.logits)

    def stop(self, input_ids: Tensor, scores, **kwargs) -> Tensor:
        step = input_ids.shape[1] - self.width - 1
        tokens = input_ids[:, -1]
        live = (~self.finished).nonzero().squeeze(1)
        logits = self.logits[live]
        scaled = logits if self.temperature in (0, 1) else logits / self.temperature
        logprobs = torch.log_softmax(scaled, dim=-1).gather(
            1, tokens[live].unsqueeze(1)).squeeze(1)
        finish = self.hooks.on_step(live, step, tokens[live], logprobs, logits)
        if self.stop_ids.numel():
            self.finished |= torch.isin(tokens, self.stop_ids)
        if finish is not None:
            ended = live[finish & ~self.finished[live]]
            self.finished[ended] = True
            self.ended_at[ended] = step + 1
        return self.finished.clone()


@register_engine("hf")
class HFEngine:
    """Rollouts through ``model.generate``.

    Args:
        model: a transformers causal LM (the live policy; kept by reference).
        pad_token_id: completion padding id (default from the model config).
        dtype: run generation on a copy of the model in this dtype (e.g. ``torch.bfloat16``);
            ``None`` (default), or the model's own dtype, runs the model itself. A copy is
            refreshed when the live model's parameters change in place, or on
            ``update_weights``.
        compute_logprobs: fill ``RolloutOutput.logprobs`` with an extra forward pass (default
            True); False leaves zeros (for throughput measurements of ``generate`` alone).
        logprob_batch_rows: rows per forward pass when computing log-probs.
    """

    name = "hf"

    def __init__(self, model, *, pad_token_id: int | None = None, dtype: torch.dtype | None = None,
                 compute_logprobs: bool = True, logprob_batch_rows: int = 16):
        self.model = model
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        self.dtype = dtype
        self.compute_logprobs = compute_logprobs
        self.logprob_batch_rows = logprob_batch_rows
        self._copy = None
        self._version = -1

    def update_weights(self, source: Any = None) -> None:
        """Load ``source`` (``state_dict`` or module) into the live model when given, then
        refresh the dtype copy if there is one.

        Raises:
            TypeError: ``source`` is not None, a mapping or a module.
        """
        if source is not None:
            load_weights_into(self.model, source)
        if self.dtype is not None and not self._in_model_dtype():
            self._copy = copy.deepcopy(self.model).eval()
            # Cast parameters only: ``Module.to`` would also cast buffers such as the rotary
            # ``inv_freq``, and bf16 rotary frequencies visibly change the model's outputs.
            for param in self._copy.parameters():
                param.data = param.data.to(self.dtype)
            self._version = params_version(self.model)

    def _runner(self):
        if self.dtype is None or self._in_model_dtype():
            return self.model
        if self._copy is None or params_version(self.model) != self._version:
            self.update_weights()
        return self._copy

    def _in_model_dtype(self) -> bool:
        """The live model already computes in ``dtype`` (an fp32 run's fp32 policy): no copy."""
        return all(p.dtype == self.dtype for p in self.model.parameters())

    def _generation_config(self, params: SamplingParams):
        # optional dependency: transformers (extra `train`; importing rlvr.rollout stays free of it)
        from transformers import GenerationConfig

        sampling = {}
        if not params.greedy:
            sampling = dict(temperature=float(params.temperature), top_p=float(params.top_p),
                            top_k=params.top_k or None)
        return GenerationConfig(
            do_sample=not params.greedy,
            max_new_tokens=params.max_new_tokens,
            # Greedy rows of one prompt are identical: generate once, repeat afterwards.
            # (with hooks, greedy rows are repeated before generate: hooks see every row)
            num_return_sequences=1 if params.greedy else params.n,
            # An empty list, not None: None would fall back to the model's default eos.
            eos_token_id=list(params.stop_token_ids),
            pad_token_id=self.pad_token_id,
            **sampling,
        )

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams,
                 hooks: DecodeHooks | None = None) -> RolloutOutput:
        """Sample ``params.n`` completions per prompt with ``model.generate``; ``hooks``
        (:mod:`rlvr.rollout.hooks`) see every step's logits and tokens.

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        model = self._runner()
        prompts = check_prompts(prompt_ids, model.config.vocab_size)
        ids, mask = left_pad(prompts, self.pad_token_id)
        clock = _FirstTokenClock()
        was_training = model.training
        model.eval()
        start = time.perf_counter()
        extra, gen_ids, gen_mask = {}, ids, mask
        if hooks is not None:
            if params.greedy:
                gen_ids = ids.repeat_interleave(params.n, dim=0)
                gen_mask = mask.repeat_interleave(params.n, dim=0)
            from transformers import LogitsProcessorList, StoppingCriteriaList

            adapter = _HookAdapter(hooks, ids.shape[1], params, len(prompts) * params.n)
            extra = dict(logits_processor=LogitsProcessorList([adapter.process]),
                         stopping_criteria=StoppingCriteriaList([adapter.stop]))
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(params.resolved_seed())
                sequences = model.generate(input_ids=gen_ids, attention_mask=gen_mask.long(),
                                           generation_config=self._generation_config(params),
                                           streamer=clock, **extra)
        finally:
            model.train(was_training)
        end = time.perf_counter()
        first = clock.first_token_at or end
        timing = RolloutTiming(prefill_seconds=first - start, decode_seconds=end - first)
        completion = sequences[:, ids.shape[1]:]
        if params.greedy and hooks is None:
            completion = completion.repeat_interleave(params.n, dim=0)
        lengths, stopped = first_stop_lengths(completion, params.stop_token_ids)
        if hooks is not None:  # rows a hook finished end there
            lengths = torch.where(adapter.ended_at > 0,
                                  torch.minimum(lengths, adapter.ended_at), lengths)
        logprobs = torch.zeros(completion.shape, dtype=torch.float32)
        report = ReportBuffers.allocate(params, *completion.shape, model.config.vocab_size)
        if (self.compute_logprobs or report is not None) and completion.shape[1] > 0:
            logprobs = self._logprobs(model, ids, mask, completion, lengths, params, report)
            timing.logprob_seconds = time.perf_counter() - end
        return build_output(completion, logprobs, lengths, stopped, params.n, self.pad_token_id,
                            timing, report)

    def _logprobs(self, model, ids: Tensor, mask: Tensor, completion: Tensor, lengths: Tensor,
                  params: SamplingParams, report: ReportBuffers | None = None) -> Tensor:
        """FloatTensor[N, T]: tempered log-probs of ``completion`` by teacher forcing (and
        the reported log-probs into ``report``, from the same logits, when given)."""
        n = params.n
        width = ids.shape[1]
        full = torch.cat([ids.repeat_interleave(n, 0), completion], dim=1)
        comp_mask = torch.arange(completion.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
        attention = torch.cat([mask.repeat_interleave(n, 0), comp_mask], dim=1)
        positions = (attention.long().cumsum(1) - 1).clamp_(min=0)
        temperature = 1.0 if params.greedy else params.temperature
        parts = []
        was_training = model.training
        model.eval()
        try:
            for i in range(0, full.shape[0], self.logprob_batch_rows):
                rows = slice(i, i + self.logprob_batch_rows)
                logits = model(input_ids=full[rows], attention_mask=attention[rows].long(),
                               position_ids=positions[rows]).logits
                predicting = logits[:, width - 1: -1]  # logits at t predict token t + 1
                parts.append(token_log_probs(predicting, completion[rows],
                                             temperature=temperature))
                if report is not None:
                    report.record(rows, slice(0, completion.shape[1]), predicting,
                                  completion[rows], params)
        finally:
            model.train(was_training)
        return torch.cat(parts)

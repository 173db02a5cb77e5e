"""Log-probs an engine reports beside its samples, for ``rlvr serve`` (OpenAI's ``logprobs`` /
``top_logprobs``): the sampled token under the raw model distribution and the k most likely
tokens of every position (see :mod:`rlvr.rollout.types`).

They are computed in fp32 from the logits the tokens were drawn under: the sampler's own
logits in the ``torch`` engine; in the ``hf`` engine, the teacher-forced pass over prompt +
completion that also gives its ``RolloutOutput.logprobs`` (transformers' ``generate`` does not
return untruncated logits):

- raw: ``log_softmax(logits)`` (temperature 1, no top-p / top-k truncation), what vLLM
  reports by default (``logprobs_mode="raw_logprobs"``);
- tempered: ``log_softmax(logits / T)`` (T = 1 when greedy), the distribution of
  ``RolloutOutput.logprobs``.

The top-k tokens are the same under both (dividing by T > 0 keeps the order); ties are broken
as ``torch.topk`` breaks them. Nothing here draws random numbers, so asking for reported
log-probs never changes which tokens are sampled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.rollout.types import SamplingParams


def report_distribution(logits: Tensor, params: SamplingParams) -> Tensor:
    """fp32 log-probs of the distribution the top-k values are reported under.

    Args:
        logits: FloatTensor[..., V], any float dtype.
        params: ``raw_logprobs`` picks raw; else tempered at ``temperature`` (1 when greedy).

    Returns:
        FloatTensor[..., V]: ``log_softmax(logits / T)`` with T = 1 for raw or greedy.
    """
    scaled = logits.float()
    if not params.raw_logprobs and not params.greedy and params.temperature != 1.0:
        scaled = scaled / params.temperature
    return torch.log_softmax(scaled, dim=-1)


def position_logprobs(logits: Tensor, tokens: Tensor, params: SamplingParams
                      ) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """The reported log-probs of sampled positions.

    Args:
        logits: FloatTensor[..., V], the logits each token was drawn from.
        tokens: LongTensor[...], the drawn tokens.
        params: ``top_logprobs`` (k) and ``raw_logprobs``.

    Returns:
        ``(raw, top_ids, top_values)``: raw FloatTensor[...] ``log_softmax(logits)[token]``
        (None unless ``raw_logprobs``); top_ids LongTensor[..., k] most likely first and
        top_values FloatTensor[..., k] (both None when k == 0). k is capped at V.
    """
    reported = report_distribution(logits, params)
    raw = None
    if params.raw_logprobs:
        raw = reported.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    if params.top_logprobs == 0:
        return raw, None, None
    values, ids = reported.topk(min(params.top_logprobs, reported.shape[-1]), dim=-1)
    return raw, ids, values


@dataclass
class ReportBuffers:
    """Per-row buffers an engine fills step by step: raw FloatTensor[N, T] (or None), top
    ids LongTensor[N, T, k] and values FloatTensor[N, T, k] (or None)."""

    raw: Tensor | None
    top_ids: Tensor | None
    top_values: Tensor | None

    @classmethod
    def allocate(cls, params: SamplingParams, rows: int, steps: int, vocab: int
                 ) -> ReportBuffers | None:
        """Zeroed buffers for ``rows`` x ``steps`` positions, or None when ``params`` asks
        for no reported log-probs."""
        if not params.reports_logprobs:
            return None
        k = min(params.top_logprobs, vocab)
        return cls(raw=torch.zeros(rows, steps) if params.raw_logprobs else None,
                   top_ids=torch.zeros(rows, steps, k, dtype=torch.long) if k else None,
                   top_values=torch.zeros(rows, steps, k) if k else None)

    def record(self, rows: Tensor | slice, steps: int | slice, logits: Tensor, tokens: Tensor,
               params: SamplingParams) -> None:
        """Store positions ``[rows, steps]`` from their logits and drawn tokens: one decode
        step (rows LongTensor[R], an int step, logits FloatTensor[R, V], tokens
        LongTensor[R]) or a block (slices; logits FloatTensor[R, S, V], tokens
        LongTensor[R, S])."""
        raw, ids, values = position_logprobs(logits, tokens, params)
        if raw is not None:
            self.raw[rows, steps] = raw
        if ids is not None:
            self.top_ids[rows, steps] = ids
            self.top_values[rows, steps] = values

    def output_fields(self, width: int, mask: Tensor) -> dict[str, Tensor | None]:
        """``RolloutOutput`` keyword fields, trimmed to ``width`` steps and zeroed where
        ``mask`` (BoolTensor[N, width]) is False."""
        fields: dict[str, Tensor | None] = {"raw_logprobs": None, "top_token_ids": None,
                                            "top_logprobs": None}
        if self.raw is not None:
            fields["raw_logprobs"] = self.raw[:, :width].masked_fill(~mask, 0.0)
        if self.top_ids is not None:
            keep = mask.unsqueeze(-1)
            fields["top_token_ids"] = self.top_ids[:, :width].masked_fill(~keep, 0)
            fields["top_logprobs"] = self.top_values[:, :width].masked_fill(~keep, 0.0)
        return fields

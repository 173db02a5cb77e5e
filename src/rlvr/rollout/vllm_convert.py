"""Conversions between rlvr's rollout types and vLLM's (see :mod:`rlvr.rollout.vllm_engine` for
the versions and semantics): :class:`~rlvr.rollout.types.SamplingParams` -> one
``vllm.SamplingParams`` per prompt, and ``LLM.generate``'s ``RequestOutput`` list ->
:class:`~rlvr.rollout.types.RolloutOutput` (sampled-token log-probs, finish reasons, timing).
Pure Python over duck-typed objects: importing or using this module never imports vLLM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from rlvr.rollout.engine import build_output
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams

_SEED_LIMIT = 2**63 - 1


def vllm_sampling_kwargs(params: SamplingParams, seed: int | None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one prompt of ``params``.

    Args:
        params: rlvr sampling parameters.
        seed: the prompt's seed (``None``: vLLM's global generator).

    Greedy (``temperature == 0``) asks for a single completion (the caller repeats it ``n``
    times) and no seed; ``top_k == 0`` becomes -1, which every vLLM version reads as disabled.

    Raises:
        ValueError: ``params`` asks for reported log-probs (``top_logprobs`` or
            ``raw_logprobs``), which this engine does not return (``rlvr serve`` runs the
            ``torch`` / ``hf`` engines, which do).
    """
    if params.reports_logprobs:
        raise ValueError("SamplingParams.top_logprobs / raw_logprobs: the vllm engine does "
                         "not report them; use the torch or hf engine")
    return {
        "n": 1 if params.greedy else params.n,
        "temperature": float(params.temperature),
        "top_p": float(params.top_p),
        "top_k": params.top_k if params.top_k > 0 else -1,
        "max_tokens": params.max_new_tokens,
        "min_tokens": 0,
        "stop_token_ids": list(params.stop_token_ids),
        "ignore_eos": True,
        "logprobs": 0,
        "detokenize": False,
        "seed": None if params.greedy else seed,
    }


def build_sampling_params(factory: Callable[..., Any], params: SamplingParams, num_prompts: int,
                          per_request_seed: bool = True) -> list[Any]:
    """One ``factory(**kwargs)`` (``vllm.SamplingParams``) per prompt.

    Prompt ``i`` gets seed ``(base + i * n) mod 2**63-1`` with ``base = params.resolved_seed()``
    (vLLM V1 seeds child ``k`` of a request with ``seed + k``, so all rows differ); with
    ``per_request_seed=False`` no seed is set (faster sampling in vLLM, not reproducible).
    """
    base = params.resolved_seed() if per_request_seed and not params.greedy else None
    out = []
    for i in range(num_prompts):
        seed = None if base is None else (base + i * params.n) % _SEED_LIMIT
        out.append(factory(**vllm_sampling_kwargs(params, seed)))
    return out


def _logprob_value(entry: Any) -> float:
    """A vLLM ``Logprob`` (``.logprob``) or a plain number."""
    value = getattr(entry, "logprob", entry)
    return float(value)


def sampled_token_logprobs(token_ids: Sequence[int], logprobs: Any) -> list[float]:
    """Log-prob of each sampled token from a ``CompletionOutput.logprobs``: a list (or vLLM's
    list-like ``FlatLogprobs``) with one ``{token_id: Logprob}`` mapping per generated token
    (with ``logprobs=0`` it holds the sampled token only; with ``logprobs=k`` also the top-k).

    Raises:
        ValueError: no log-probs, wrong length, or a position without the sampled token.
    """
    if logprobs is None:
        raise ValueError("vLLM returned no log-probs (the request must set logprobs=0)")
    if len(logprobs) != len(token_ids):
        raise ValueError(f"vLLM returned {len(logprobs)} log-prob entries for "
                         f"{len(token_ids)} tokens")
    values = []
    for pos, token in enumerate(token_ids):
        entry = logprobs[pos]
        if not isinstance(entry, Mapping) or token not in entry:
            raise ValueError(f"vLLM log-probs at position {pos} lack the sampled token {token}")
        values.append(_logprob_value(entry[token]))
    return values


def request_outputs_to_rollout(outputs: Sequence[Any], params: SamplingParams, pad_token_id: int,
                               timing: RolloutTiming | None = None) -> RolloutOutput:
    """Convert ``LLM.generate``'s ``RequestOutput`` list (one per prompt, in prompt order) into
    a :class:`RolloutOutput`.

    Each request's ``outputs`` (``CompletionOutput``: ``index``, ``token_ids``, ``logprobs``,
    ``finish_reason``) are ordered by ``index``; greedy requests carry one completion, repeated
    ``params.n`` times. ``finish_reason == "stop"`` maps to ``"stop"`` (the stop token is part
    of the completion: vLLM keeps stop token ids in ``token_ids``), ``"length"`` to ``"length"``.

    Raises:
        ValueError: a request with the wrong number of completions, an aborted completion, or
            missing log-probs.
    """
    per_request = 1 if params.greedy else params.n
    rows_ids: list[list[int]] = []
    rows_lps: list[list[float]] = []
    stopped: list[bool] = []
    for i, request in enumerate(outputs):
        completions = sorted(request.outputs, key=lambda c: getattr(c, "index", 0))
        if len(completions) != per_request:
            raise ValueError(f"vLLM returned {len(completions)} completions for prompt {i}, "
                             f"expected {per_request}")
        for completion in completions:
            reason = completion.finish_reason
            if reason not in ("stop", "length"):
                raise ValueError(f"vLLM completion of prompt {i} finished with {reason!r}")
            ids = [int(t) for t in completion.token_ids]
            lps = sampled_token_logprobs(ids, completion.logprobs)
            for _ in range(params.n // per_request):
                rows_ids.append(ids)
                rows_lps.append(lps)
                stopped.append(reason == "stop")
    total = len(rows_ids)
    width = max((len(r) for r in rows_ids), default=0)
    tokens = torch.full((total, width), pad_token_id, dtype=torch.long)
    logprobs = torch.zeros((total, width), dtype=torch.float32)
    for r, (ids, lps) in enumerate(zip(rows_ids, rows_lps)):
        if ids:
            tokens[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            logprobs[r, : len(lps)] = torch.tensor(lps, dtype=torch.float32)
    lengths = torch.tensor([len(r) for r in rows_ids], dtype=torch.long)
    return build_output(tokens, logprobs, lengths, torch.tensor(stopped, dtype=torch.bool),
                        params.n, pad_token_id, timing or RolloutTiming())


def first_token_seconds(outputs: Sequence[Any], total: float) -> float | None:
    """Longest arrival -> first-token time over the requests, from vLLM's per-request metrics
    where it fills them (V0's ``RequestMetrics``); ``None`` otherwise."""
    spans = []
    for request in outputs:
        metrics = getattr(request, "metrics", None)
        first = getattr(metrics, "first_token_time", None)
        arrival = getattr(metrics, "arrival_time", None)
        if isinstance(first, (int, float)) and isinstance(arrival, (int, float)):
            spans.append(first - arrival)
    if not spans or not 0 <= max(spans) <= total:
        return None
    return max(spans)


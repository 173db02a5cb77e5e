"""Next-token sampling in fp32 over a large vocabulary, cheaply.

``torch.softmax`` + ``torch.multinomial`` (and a full sort for top-p) cost tens of milliseconds
per decode step over a 49k vocabulary. Here one step is a few streaming passes over the fp32
logits and one uniform random number per row:

- inverse-CDF sampling: ``cdf = cumsum(exp(z - max))``; the token is the first index whose
  cdf exceeds ``u * cdf[-1]`` (``u ~ U[0, 1)``, ``searchsorted``). No normalisation pass, no
  per-token random numbers (a Gumbel-max race would need V random draws per row).
- top-k: ``torch.topk`` (a partial selection), then the same inverse CDF over the k survivors.
- top-p: a partial sort first (the top 64, then 1024 candidates); only rows whose nucleus is
  still not covered fall back to a full sort.

The recorded log-prob is always ``log_softmax(z)`` of the drawn token with ``z = logits / T``
over the *whole* vocabulary (see :mod:`rlvr.rollout.types`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.rollout.types import SamplingParams

# Candidate counts tried for top-p before a full sort (a partial topk is much cheaper).
_TOP_P_CANDIDATES = (64, 1024)


def sample_next(logits: Tensor, params: SamplingParams, generator: torch.Generator | None
                ) -> tuple[Tensor, Tensor]:
    """Draw one token per row.

    Args:
        logits: FloatTensor[N, V], any float dtype (converted to fp32).
        params: temperature / top_p / top_k (``temperature == 0``: argmax).
        generator: source of the one uniform draw per row (unused when greedy).

    Returns:
        ``(tokens LongTensor[N], logprobs FloatTensor[N])``; logprobs are fp32
        ``log_softmax(logits / T)`` of the drawn tokens (T = 1 when greedy).
    """
    z = logits.float()
    if params.greedy:
        tokens = z.argmax(dim=-1)
        return tokens, _token_logprob(z, tokens)
    if params.temperature != 1.0:
        z = z / params.temperature
    vocab = z.shape[-1]
    top_k = params.top_k if 0 < params.top_k < vocab else 0
    if top_k == 0 and params.top_p >= 1.0:
        tokens = _sample_full(z, generator)
    else:
        tokens = _sample_truncated(z, top_k, params.top_p, generator)
    return tokens, _token_logprob(z, tokens)


def _token_logprob(z: Tensor, tokens: Tensor) -> Tensor:
    """``log_softmax(z)[tokens]`` per row, fp32 (one logsumexp pass)."""
    return z.gather(1, tokens.unsqueeze(1)).squeeze(1) - torch.logsumexp(z, dim=-1)


def _inverse_cdf(weights: Tensor, generator: torch.Generator | None) -> Tensor:
    """Index drawn with probability proportional to ``weights`` (FloatTensor[N, K], >= 0, each
    row with a positive entry). ``u < cdf[-1]`` and zero-weight entries add nothing to the cdf,
    so a zero-weight index can never be returned."""
    cdf = weights.cumsum(dim=-1)
    u = torch.rand(weights.shape[0], 1, generator=generator, dtype=cdf.dtype) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True).squeeze(1)
    return index.clamp_(max=weights.shape[-1] - 1)


def _sample_full(z: Tensor, generator: torch.Generator | None) -> Tensor:
    weights = (z - z.max(dim=-1, keepdim=True).values).exp_()
    return _inverse_cdf(weights, generator)


def _nucleus_keep(sorted_weights: Tensor, total: Tensor, top_p: float) -> Tensor:
    """Keep mask over descending weights: a token stays if the mass *before* it is < top_p
    (the smallest prefix reaching top_p). ``total``: FloatTensor[N, 1], the normaliser."""
    before = sorted_weights.cumsum(dim=-1) - sorted_weights
    return before < top_p * total


def _sample_truncated(z: Tensor, top_k: int, top_p: float, generator: torch.Generator | None
                      ) -> Tensor:
    """Top-k and / or top-p sampling. As in transformers, top-p applies to the distribution
    renormalised over the top-k survivors when both are set."""
    z_max = z.max(dim=-1, keepdim=True).values
    if top_k:
        values, index = z.topk(top_k, dim=-1)
        weights = (values - z_max).exp_()
        if top_p < 1.0:
            weights = weights * _nucleus_keep(weights, weights.sum(-1, keepdim=True), top_p)
        return index.gather(1, _inverse_cdf(weights, generator).unsqueeze(1)).squeeze(1)
    return _sample_top_p(z, z_max, top_p, generator)


def _sample_top_p(z: Tensor, z_max: Tensor, top_p: float, generator: torch.Generator | None
                  ) -> Tensor:
    total = (z - z_max).exp_().sum(dim=-1, keepdim=True)
    rows = z.shape[0]
    # Per-row candidate sets; rows covered by a small partial sort are finished there.
    tokens = torch.empty(rows, dtype=torch.long)
    todo = torch.arange(rows)
    uniforms = torch.rand(rows, 1, generator=generator, dtype=z.dtype)
    for k in (*_TOP_P_CANDIDATES, z.shape[-1]):
        k = min(k, z.shape[-1])
        values, index = z[todo].topk(k, dim=-1)
        weights = (values - z_max[todo]).exp_()
        covered = weights.sum(-1, keepdim=True) >= top_p * total[todo]
        if k == z.shape[-1]:
            covered = torch.ones_like(covered)
        done = covered.squeeze(1)
        if done.any():
            w = weights[done] * _nucleus_keep(weights[done], total[todo][done], top_p)
            cdf = w.cumsum(dim=-1)
            pick = torch.searchsorted(cdf, uniforms[todo][done] * cdf[:, -1:], right=True)
            pick = pick.clamp_(max=k - 1)
            tokens[todo[done]] = index[done].gather(1, pick).squeeze(1)
        todo = todo[~done]
        if todo.numel() == 0:
            break
    return tokens

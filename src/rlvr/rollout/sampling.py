"""Next-token sampling in fp32 over a large vocabulary, cheaply.

``torch.multinomial`` (a full cumsum over the vocabulary per row) and a full sort for top-p
cost tens of milliseconds per decode step over a 49k vocabulary. Here one step is one fused
``softmax`` (fp32), one blocked reduction and one uniform random number per row:

- two-level inverse CDF: the vocabulary is cut into blocks of ``BLOCK`` tokens; a row's
  uniform ``u`` first picks a block from the cumulative block sums, then a token from the
  cumulative sum inside that one block. A sequential cumsum over all 49k entries (the slow
  part of multinomial) is never computed, and no per-token random numbers are drawn (a
  Gumbel-max race would need V random draws per row).
- top-k: ``torch.topk`` (a partial selection), then an inverse CDF over the k survivors.
- top-p: a partial sort of the top 64 first; rows whose nucleus is not covered then sort only
  the tokens with ``p >= (1 - top_p) / V`` (never a full sort of the vocabulary).

The recorded log-prob is ``log softmax(logits / T)`` of the drawn token over the *whole*
vocabulary (see :mod:`rlvr.rollout.types`), i.e. the log of the fp32 probability it was drawn
from before any truncation.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.kernels import sample as native_sample
from rlvr.rollout.types import SamplingParams

BLOCK = 128
CHUNK_ELEMENTS = 64 * 49152  # fp32 probabilities per chunk (12 MiB)
# Candidates of top-p's first partial sort (a partial topk is much cheaper than a sort).
_TOP_P_CANDIDATES = 64


def sample_next(logits: Tensor, params: SamplingParams, generator: torch.Generator | None,
                library=None) -> tuple[Tensor, Tensor]:
    """Draw one token per row.

    Args:
        logits: FloatTensor[N, V], any float dtype (softmax runs in fp32).
        params: temperature / top_p / top_k (``temperature == 0``: argmax).
        generator: source of the one uniform draw per row (unused when greedy).
        library: the native kernel library (:func:`rlvr.kernels.native`) or None. With
            it, plain sampling (no top-k / top-p) of contiguous bf16 or fp32 logits is one
            kernel call (:func:`rlvr.kernels.sample`) on the same uniforms: the same
            algorithm, fp32 sums in another order.

    Returns:
        ``(tokens LongTensor[N], logprobs FloatTensor[N])``; logprobs are fp32
        ``log_softmax(logits / T)`` of the drawn tokens (T = 1 when greedy).
    """
    if (library is not None and not params.greedy and params.top_p >= 1.0
            and not 0 < params.top_k < logits.shape[-1]
            and logits.dtype in (torch.bfloat16, torch.float32)
            and logits.dim() == 2 and logits.is_contiguous()):
        return native_sample(library, logits, params.temperature,
                             _uniform(logits.shape[0], generator))
    chunk = max(1, CHUNK_ELEMENTS // logits.shape[-1])
    if logits.shape[0] > chunk:
        # Row chunks keep each fp32 buffer small (cache-resident, and below glibc's mmap
        # threshold, so no page faults on every allocation). One generator, drawn in row
        # order, so results do not depend on the chunking.
        parts = [sample_next(logits[i:i + chunk], params, generator)
                 for i in range(0, logits.shape[0], chunk)]
        return torch.cat([t for t, _ in parts]), torch.cat([lp for _, lp in parts])
    if params.greedy:
        tokens = logits.argmax(dim=-1)
        chosen = logits.gather(1, tokens.unsqueeze(1)).squeeze(1).float()
        return tokens, chosen - torch.logsumexp(logits.float(), dim=-1)
    scaled = logits if params.temperature == 1.0 else logits.float() / params.temperature
    probs = torch.softmax(scaled, dim=-1, dtype=torch.float32)
    vocab = probs.shape[-1]
    top_k = params.top_k if 0 < params.top_k < vocab else 0
    if top_k == 0 and params.top_p >= 1.0:
        tokens = _sample_blocked(probs, generator)
    elif top_k:
        tokens = _sample_top_k(probs, top_k, params.top_p, generator)
    else:
        tokens = _sample_top_p(probs, params.top_p, generator)
    return tokens, probs.gather(1, tokens.unsqueeze(1)).squeeze(1).log()


def _uniform(rows: int, generator: torch.Generator | None) -> Tensor:
    return torch.rand(rows, 1, generator=generator, dtype=torch.float32)


def _pick(weights: Tensor, target: Tensor) -> Tensor:
    """First index whose cumulative weight exceeds ``target`` (FloatTensor[N, 1]).

    ``target`` is clamped just below the row total, so rounding can never select past the end
    or land on a trailing zero-weight entry (searchsorted's ``right=True`` skips entries that
    add nothing to the cumulative sum)."""
    cdf = weights.cumsum(dim=-1)
    total = cdf[:, -1:]
    target = torch.minimum(target, total * (1 - 2**-22))
    return torch.searchsorted(cdf, target, right=True).squeeze(1).clamp_(max=weights.shape[-1] - 1)


def _sample_blocked(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """Inverse-CDF draw from FloatTensor[N, V] probabilities via per-block sums."""
    rows, vocab = probs.shape
    pad = (-vocab) % BLOCK
    if pad:
        probs = torch.nn.functional.pad(probs, (0, pad))
    blocks = probs.view(rows, -1, BLOCK)
    block_mass = blocks.sum(dim=-1)  # [N, V / BLOCK]
    u = _uniform(rows, generator)
    block_cdf = block_mass.cumsum(dim=-1)
    target = u * block_cdf[:, -1:]
    block = _pick(block_mass, target)
    before = (block_cdf.gather(1, block.unsqueeze(1)) - block_mass.gather(1, block.unsqueeze(1)))
    inside = blocks[torch.arange(rows), block]  # [N, BLOCK]
    token = block * BLOCK + _pick(inside, target - before)
    return token.clamp_(max=vocab - 1)


def _nucleus_keep(sorted_probs: Tensor, total: Tensor | float, top_p: float) -> Tensor:
    """Keep mask over descending probabilities: a token stays if the mass *before* it is
    < top_p x total (the smallest prefix reaching top_p)."""
    before = sorted_probs.cumsum(dim=-1) - sorted_probs
    return before < top_p * total


def _sample_top_k(probs: Tensor, top_k: int, top_p: float, generator: torch.Generator | None
                  ) -> Tensor:
    """Top-k (then top-p over the renormalised top-k survivors, as transformers does)."""
    values, index = probs.topk(top_k, dim=-1)
    if top_p < 1.0:
        values = values * _nucleus_keep(values, values.sum(-1, keepdim=True), top_p)
    u = _uniform(probs.shape[0], generator)
    pick = _pick(values, u * values.sum(-1, keepdim=True))
    return index.gather(1, pick.unsqueeze(1)).squeeze(1)


def _sample_top_p(probs: Tensor, top_p: float, generator: torch.Generator | None) -> Tensor:
    """Nucleus sampling with partial sorts only.

    First the top ``_TOP_P_CANDIDATES`` tokens (enough for most rows of a trained model).
    Rows not covered then sort only the tokens with ``p >= (1 - top_p) / V``: all smaller
    tokens together hold less than ``1 - top_p``, so the nucleus never needs them.
    """
    rows, vocab = probs.shape
    tokens = torch.empty(rows, dtype=torch.long)
    uniforms = _uniform(rows, generator)
    todo = torch.arange(rows)
    first = min(_TOP_P_CANDIDATES, vocab)
    for attempt in range(2):
        subset = probs[todo]
        if attempt == 0:
            k = first
        else:
            k = int((subset >= (1 - top_p) / vocab).sum(-1).max().clamp(min=1))
        values, index = subset.topk(min(k, vocab), dim=-1)
        done = values.sum(-1) >= top_p
        if attempt == 1:
            done = torch.ones_like(done)  # covered by construction (up to rounding)
        if bool(done.any()):
            kept = values[done] * _nucleus_keep(values[done], 1.0, top_p)
            pick = _pick(kept, uniforms[todo][done] * kept.sum(-1, keepdim=True))
            tokens[todo[done]] = index[done].gather(1, pick.unsqueeze(1)).squeeze(1)
        todo = todo[~done]
        if todo.numel() == 0:
            break
    return tokens

"""The fp32 sampler against exact distributions (chi-square, fixed seeds)."""

import pytest
import torch

from rlvr.rollout import SamplingParams
from rlvr.rollout.sampling import sample_next

from .conftest import chi_square_p_value

VOCAB = 300


def _logits(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, VOCAB, generator=g) * 2.5


def _reference(logits, params):
    """The exact truncated distribution (transformers' order: temperature, top-k, top-p)."""
    probs = torch.softmax(logits[0].double() / params.temperature, -1)
    order = probs.argsort(descending=True)
    keep = torch.ones(VOCAB, dtype=torch.bool)
    if params.top_k:
        keep[order[params.top_k:]] = False
    kept = torch.where(keep, probs, 0)
    if params.top_p < 1:
        sorted_kept = kept[order] / kept.sum()
        before = sorted_kept.cumsum(0) - sorted_kept
        drop = order[before >= params.top_p]
        kept[drop] = 0
    return kept / kept.sum()


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=1.4),
    SamplingParams(temperature=0.6, top_k=20),
    SamplingParams(temperature=1.2, top_p=0.9),
    SamplingParams(temperature=1.0, top_p=0.5),
    SamplingParams(temperature=1.0, top_k=40, top_p=0.8),
], ids=["t1", "t1.4", "topk20", "topp0.9", "topp0.5", "topk40-topp0.8"])
def test_empirical_distribution_matches_exact(params):
    logits = _logits()
    draws = 40_000
    generator = torch.Generator().manual_seed(1234)
    tokens, logprobs = sample_next(logits.expand(draws, VOCAB), params, generator)
    counts = torch.bincount(tokens, minlength=VOCAB)
    reference = _reference(logits, params)
    assert counts[reference == 0].sum() == 0, "drew a token outside the top-k / nucleus"
    assert chi_square_p_value(counts, reference) > 1e-3
    # Log-probs are the tempered, *untruncated* policy's.
    exact = torch.log_softmax(logits[0] / params.temperature, -1)[tokens]
    torch.testing.assert_close(logprobs, exact, atol=1e-5, rtol=1e-5)


def test_sampler_is_not_trivially_passing():
    """The chi-square check rejects a wrong temperature (guards the test itself)."""
    logits = _logits()
    tokens, _ = sample_next(logits.expand(40_000, VOCAB), SamplingParams(temperature=1.2),
                            torch.Generator().manual_seed(0))
    counts = torch.bincount(tokens, minlength=VOCAB)
    assert chi_square_p_value(counts, _reference(logits, SamplingParams(temperature=1.0))) < 1e-6


def test_greedy_is_argmax_with_untempered_logprob():
    logits = torch.randn(5, 49152)
    tokens, logprobs = sample_next(logits.to(torch.bfloat16), SamplingParams(temperature=0), None)
    assert torch.equal(tokens, logits.to(torch.bfloat16).argmax(-1))
    exact = torch.log_softmax(logits.to(torch.bfloat16).float(), -1)
    exact = exact.gather(1, tokens[:, None])[:, 0]
    torch.testing.assert_close(logprobs, exact)


def test_large_vocab_and_chunking_keep_seeded_determinism():
    logits = torch.randn(150, 49152) * 3  # > one chunk of rows, vocab not a block multiple + 1
    logits = torch.cat([logits, torch.randn(150, 1)], 1)
    a = sample_next(logits, SamplingParams(temperature=1.1), torch.Generator().manual_seed(7))
    b = sample_next(logits, SamplingParams(temperature=1.1), torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert int(a[0].max()) < logits.shape[1]
    # A near one-hot row always yields its peak token.
    peaked = torch.full((4, 49153), -1e4)
    peaked[:, 49152] = 0
    tokens, logprobs = sample_next(peaked, SamplingParams(), torch.Generator().manual_seed(0))
    assert tokens.tolist() == [49152] * 4
    assert torch.allclose(logprobs, torch.zeros(4))


def test_top_p_broad_distribution_beyond_first_candidates():
    """A flat distribution needs far more than the first 64 candidates for top_p=0.99: the
    nucleus is then (almost) the whole vocabulary, and only tokens in it are drawn."""
    logits = torch.zeros(1, 5000)
    logits[:, :10] = 0.5
    tokens, _ = sample_next(logits.expand(3000, 5000), SamplingParams(top_p=0.99),
                            torch.Generator().manual_seed(0))
    assert int(tokens.max()) < 5000
    assert len(set(tokens.tolist())) > 2000  # spread over the broad nucleus, not the top 64
    assert (tokens < 10).float().mean() < 0.01  # the 10 boosted tokens hold ~0.3% of the mass

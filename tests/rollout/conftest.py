"""Shared fixtures: a tiny Llama whose random weights are scaled up so that greedy decoding
is not degenerate (the stock init, std 0.02, gives near-uniform logits and one repeated token)."""

from __future__ import annotations

import pytest
import torch

from rlvr.models import load_model_and_tokenizer
from rlvr.models.tiny import spread_weights


@pytest.fixture(scope="session")
def tiny():
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    return spread_weights(model).eval(), tokenizer


@pytest.fixture(scope="session")
def prompts(tiny):
    """Three prompts of lengths 6, 17 and 1 (left padding differs per row)."""
    _, tokenizer = tiny
    return [tokenizer.encode(t) for t in ("12+34=", "hello world, what", "a")]


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor, min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness-of-fit p-value of ``counts`` against ``probs``; categories
    with expected count < ``min_expected`` are pooled into one."""
    total = counts.sum().double()
    expected = probs.double() * total
    small = expected < min_expected
    obs = torch.cat([counts[~small].double(), counts[small].double().sum().view(1)])
    exp = torch.cat([expected[~small], expected[small].sum().view(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    if obs.numel() < 2:
        return 1.0  # a single possible outcome: nothing to test beyond its support
    stat = ((obs - exp) ** 2 / exp).sum()
    dof = torch.tensor(float(obs.numel() - 1), dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, stat / 2))

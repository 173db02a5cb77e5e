"""The square causal form of a completion's attention on its prompt's cached keys: equal to
SDPA with the explicit mask (values and gradients, padded rows included), refused for a mask
the causal kernel would cut, and used by fused_layer_ops for a long completion on a cache."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from rlvr import kernels
from rlvr.models.sequences import cache_argument
from rlvr.update import causal_attention
from rlvr.update.causal_attention import (
    MIN_QUERY_TOKENS,
    square_causal_attention,
    square_causal_mask,
    worthwhile,
)
from rlvr.update.fused_layers import fused_layer_ops


def _mask(prompt_mask, completion_mask):
    """Bool [B, 1, T, P + T]: key j visible to completion query i when j is a real token and
    j <= P + i (what transformers builds for a completion on a cache)."""
    p, t = prompt_mask.shape[1], completion_mask.shape[1]
    keys = torch.cat([prompt_mask, completion_mask], dim=1).bool()
    causal = torch.arange(p + t)[None, :] <= (p + torch.arange(t))[:, None]
    return (causal[None] & keys[:, None, :])[:, None]


@pytest.mark.parametrize("prompt", [0, 6])
def test_equals_sdpa_with_the_explicit_mask_values_and_gradients(prompt):
    g = torch.Generator().manual_seed(0)
    b, h, t, d = 3, 2, 40, 8
    prompt_mask = torch.ones(b, prompt, dtype=torch.bool)
    if prompt:
        prompt_mask[1, :3] = False  # a left-padded prompt
    completion_mask = torch.ones(b, t, dtype=torch.bool)
    completion_mask[2, 25:] = False  # a right-padded completion
    mask = _mask(prompt_mask, completion_mask)
    q = torch.randn(b, h, t, d, generator=g, requires_grad=True)
    k, v = (torch.randn(b, h, prompt + t, d, generator=g, requires_grad=True) for _ in "kv")
    grad = torch.randn(b, h, t, d, generator=g)

    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3)
    want_grads = torch.autograd.grad(want, (q, k, v), grad)
    full = square_causal_mask(mask)
    assert full.shape == (b, 1, prompt + t, prompt + t)
    got = square_causal_attention(q, k, v, full, 0.3)
    got_grads = torch.autograd.grad(got, (q, k, v), grad)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_a_mask_that_shows_a_later_key_is_refused():
    mask = _mask(torch.ones(1, 4, dtype=torch.bool), torch.ones(1, 10, dtype=torch.bool))
    assert square_causal_mask(mask) is not None
    mask[0, 0, 2, 4 + 7] = True  # query 2 sees completion key 7
    assert square_causal_mask(mask) is None


def test_worthwhile_only_for_long_completions_on_a_short_prompt():
    assert worthwhile(MIN_QUERY_TOKENS, MIN_QUERY_TOKENS + MIN_QUERY_TOKENS // 8)
    assert not worthwhile(MIN_QUERY_TOKENS, MIN_QUERY_TOKENS + MIN_QUERY_TOKENS // 8 + 1)
    assert not worthwhile(MIN_QUERY_TOKENS - 1, MIN_QUERY_TOKENS - 1)
    assert worthwhile(2048, 2048)


def _completion_logits_and_grads(model, prompt_ids, prompt_mask, ids, mask):
    with torch.no_grad():
        positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        cache = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions,
                      use_cache=True).past_key_values
    positions = prompt_mask.sum(-1, keepdim=True) + torch.arange(ids.shape[1])
    logits = model(input_ids=ids, attention_mask=torch.cat([prompt_mask, mask], dim=1),
                   position_ids=positions, **{cache_argument(model): cache}).logits
    loss = (logits.log_softmax(-1)[..., 5] * mask).sum()
    return logits.detach(), torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.skipif(kernels.native() is None, reason="native kernels unavailable")
def test_fused_layer_ops_runs_a_long_completion_causally_and_equals_eager(monkeypatch):
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(3, 50, (2, 8), generator=g)
    prompt_mask = torch.ones(2, 8, dtype=torch.long)
    prompt_mask[1, :3] = 0
    ids = torch.randint(3, 50, (2, MIN_QUERY_TOKENS), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 700:] = 0
    calls = []
    spy = causal_attention.square_causal_attention
    monkeypatch.setattr(causal_attention, "square_causal_attention",
                        lambda *a: calls.append(1) or spy(*a))
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]

    want, want_grads = _completion_logits_and_grads(model, prompt_ids, prompt_mask, ids, mask)
    assert not calls
    with fused_layer_ops(model):
        got, got_grads = _completion_logits_and_grads(model, prompt_ids, prompt_mask, ids, mask)
    assert len(calls) == config.num_hidden_layers
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)

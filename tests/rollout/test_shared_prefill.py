"""The torch engine's shared prefill: a prefix common to every prompt of a bucket (a system
message) runs once, and the cache and logits equal the plain prefill's (fp32, to float
rounding)."""

import pytest
import torch

from rlvr.models.common_prefix import common_prefix_length
from rlvr.models.tiny import spread_weights, tiny_model, tiny_tokenizer
from rlvr.rollout.decoder import forward
from rlvr.rollout.decoder.caches import KVCache
from rlvr.rollout.engine import left_pad
from rlvr.rollout.torch_engine import TorchEngine
from rlvr.rollout.types import SamplingParams


@pytest.fixture(scope="module")
def model():
    m = tiny_model(tiny_tokenizer())
    spread_weights(m)
    return m


def _prompts(common: int, tails: list[int], seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(5, 100, (common,), generator=g).tolist()
    return [prefix + torch.randint(5, 100, (t,), generator=g).tolist() for t in tails]


def test_common_prefix_length_counts_real_tokens_after_left_padding():
    ids, mask = left_pad([[7, 8, 9, 1], [7, 8, 9, 2, 3, 4], [7, 8, 5]], 0)
    assert common_prefix_length(ids, mask) == 2  # 7 8; the third prompt differs at 5
    ids, mask = left_pad([[7, 8, 9], [7, 8, 9, 4]], 0)
    assert common_prefix_length(ids, mask) == 2  # capped: every prompt keeps a token
    ids, mask = left_pad([[1, 2, 3]], 0)
    assert common_prefix_length(ids, mask) == 0  # one prompt: nothing to share


def _cache_and_logits(engine, prompts, n, min_shared):
    decoder = engine._current_decoder()
    ids, mask = left_pad(prompts, engine.pad_token_id)
    cache = engine.new_cache(decoder, len(prompts), n, ids.shape[1], 8, mask)
    old = forward.MIN_SHARED_PREFILL
    forward.MIN_SHARED_PREFILL = min_shared
    try:
        logits = decoder.prefill(ids, mask, cache, n)
    finally:
        forward.MIN_SHARED_PREFILL = old
    return cache, logits, mask


@pytest.mark.parametrize("native", [True, False])
def test_shared_prefill_equals_plain_prefill_fp32(model, native):
    prompts = _prompts(20, [1, 4, 9, 2])
    engine = TorchEngine(model, dtype=torch.float32, native_kernels=native)
    shared, logits, mask = _cache_and_logits(engine, prompts, 3, 16)
    plain, expected, _ = _cache_and_logits(engine, prompts, 3, 10**9)
    assert torch.allclose(logits, expected, atol=1e-5, rtol=1e-5)
    for name in ("prompt_keys", "prompt_values", "prompt"):
        if hasattr(plain, name):
            a, b = getattr(shared, name), getattr(plain, name)
            if name == "prompt":  # [layer, k|v, B, Hkv, width, D]: compare real columns only
                real = mask.view(1, 1, mask.shape[0], 1, mask.shape[1], 1).expand_as(a)
                a, b = a[real], b[real]
            elif name == "prompt_values":  # [layer, B, Hkv, width, D]
                real = mask.view(1, mask.shape[0], 1, mask.shape[1], 1).expand_as(a)
                a, b = a[real], b[real]
            else:  # keys are blocked: padding columns are never read, zero them on both
                continue
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), name


def test_shared_prefill_kv_cache_when_asked(model):
    # The n-fold KVCache is the transformers-exact path (shared_prefix=False): no sharing.
    engine = TorchEngine(model, dtype=torch.float32, shared_prefix=False)
    assert not engine._current_decoder().shared_prefill
    decoder = engine._current_decoder()
    ids, mask = left_pad(_prompts(20, [1, 4]), engine.pad_token_id)
    assert isinstance(engine.new_cache(decoder, 2, 2, ids.shape[1], 8, mask), KVCache)


def test_shared_prefill_keeps_sampled_completions_fp32(model):
    prompts = _prompts(24, [3, 1, 6, 2, 5], seed=3)
    params = SamplingParams(n=4, max_new_tokens=10, temperature=1.0, seed=5)
    outputs = []
    for min_shared in (16, 10**9):
        old, forward.MIN_SHARED_PREFILL = forward.MIN_SHARED_PREFILL, min_shared
        try:
            outputs.append(TorchEngine(model, dtype=torch.float32).generate(prompts, params))
        finally:
            forward.MIN_SHARED_PREFILL = old
    shared, plain = outputs
    assert torch.equal(shared.completion_ids, plain.completion_ids)
    assert torch.allclose(shared.logprobs, plain.logprobs, atol=1e-5)


def test_shared_prefill_runs_prefix_once(model, monkeypatch):
    """The prefix's tokens go through the layers once: the layer passes see 1 x 20 prefix
    tokens and then only the prompts' own rest (5 prompts x their rest width)."""
    prompts = _prompts(20, [1, 4, 9, 2, 3])
    engine = TorchEngine(model, dtype=torch.float32)
    decoder = engine._current_decoder()
    seen = []
    layers = decoder._layers

    def counting(ids, *args):
        seen.append(tuple(ids.shape))
        return layers(ids, *args)

    monkeypatch.setattr(decoder, "_layers", counting)
    ids, mask = left_pad(prompts, engine.pad_token_id)
    decoder.prefill(ids, mask, engine.new_cache(decoder, 5, 2, ids.shape[1], 8, mask), 2)
    assert seen == [(1, 20), (5, 9)]

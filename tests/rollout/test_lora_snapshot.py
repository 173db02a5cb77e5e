"""The torch engine over a peft LoRA policy samples what it samples from a merged copy."""

from __future__ import annotations

import torch

from rlvr.models.lora import apply_lora, merged_copy
from rlvr.models.tiny import spread_weights, tiny_model, tiny_tokenizer
from rlvr.rollout import SamplingParams, TorchEngine
from rlvr.rollout.decoder.snapshot import snapshot_weights


def _lora_policy():
    model = spread_weights(tiny_model(tiny_tokenizer(), hidden_size=64, layers=2), std=0.2)
    policy = apply_lora(model, 4, 8.0)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # a trained adapter: B is zero at initialisation
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=g) * 0.3)
    return policy


def test_snapshot_of_a_lora_policy_equals_the_merged_copy_bit_for_bit():
    policy = _lora_policy()
    plain = merged_copy(policy)
    ours = snapshot_weights(policy, torch.float32, prepack_fp32=False)
    theirs = snapshot_weights(plain, torch.float32, prepack_fp32=False)
    for a, b in zip(ours.layers, theirs.layers):
        for name in ("qkv", "o", "gate_up", "down"):
            assert torch.equal(getattr(a, name).weight, getattr(b, name).weight), name
    base = policy.get_base_model().model.layers[0].self_attn.q_proj
    assert not torch.equal(ours.layers[0].qkv.weight[:64], base.base_layer.weight)


def test_engine_over_a_lora_policy_samples_like_the_merged_copy_and_follows_updates():
    policy = _lora_policy()
    params = SamplingParams(temperature=1.0, max_new_tokens=10, n=3, seed=5)
    prompts = [[5, 6, 7, 8], [9, 10]]
    engine = TorchEngine(policy, dtype=torch.float32)
    ours = engine.generate(prompts, params)
    theirs = TorchEngine(merged_copy(policy), dtype=torch.float32).generate(prompts, params)
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.logprobs, theirs.logprobs)
    with torch.no_grad():  # an optimizer step on the adapters: the engine re-snapshots
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.mul_(-1.0)
    after = engine.generate(prompts, params)
    fresh = TorchEngine(merged_copy(policy), dtype=torch.float32).generate(prompts, params)
    assert torch.equal(after.logprobs, fresh.logprobs)
    assert not torch.equal(after.logprobs, ours.logprobs)

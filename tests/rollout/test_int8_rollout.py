"""The ``torch`` engine's int8 rollout snapshot (``quantization="int8"``,
``rlvr.rollout.decoder.int8``): each int8 matmul within its worst-case quantisation error, the
engine's log-probs close to the fp32 policy's, re-quantised on every weight update, and the
errors for what it cannot run."""

import copy

import pytest
import torch

from rlvr.rollout import SamplingParams, TorchEngine
from rlvr.rollout.decoder import int8
from rlvr.rollout.decoder.int8 import Int8Linear, Int8Unavailable, quantize_per_channel

needs_fbgemm = pytest.mark.skipif(
    not any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm")),
    reason="int8 rollouts need fbgemm (x86-64 torch builds); the refusal is tested below")


def _fresh_forward_log_probs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """log pi(completion_t | prefix) at temperature 1 under a teacher-forced fp32 forward."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1: -1]
    return torch.log_softmax(logits.float(), -1).gather(
        1, torch.tensor(completion)[:, None])[:, 0]


def test_weight_codes_are_symmetric_per_channel_7_bit():
    w = torch.tensor([[0.4, -1.0, 0.25], [0.0, 0.0, 0.0], [3.0, 1.4, -0.75]])
    codes, scales = quantize_per_channel(w)
    torch.testing.assert_close(scales, torch.tensor([1.0 / 63, 1.0, 3.0 / 63]))
    # round(w / s): 25.2, -63, 15.75 | zero row: scale 1, codes 0 | 63, 29.4, -15.75
    assert codes.tolist() == [[25, -63, 16], [0, 0, 0], [63, 29, -16]]
    assert codes.dtype == torch.int8


@needs_fbgemm
def test_int8_linear_within_its_worst_case_error():
    """Per output o of row r: |y - x W^T| <= ||x_r||_1 s_o / 2 (weight rounding, each weight
    off by at most half its channel's step s_o) + a_r / 255 * ||q_o s_o||_1 (activation
    rounding: row r divided by its max |x| a_r lies in [-1, 1], which fbgemm's 8-bit codes
    cover in steps of at most 2 / 255, so each activation is off by at most a_r / 255)."""
    torch.manual_seed(0)
    weight = torch.randn(96, 48) * torch.rand(96, 1) * 3  # channels of different scales
    bias = torch.randn(96)
    x = torch.randn(2, 7, 48) * torch.rand(2, 7, 1) * 10  # rows of different scales
    y = Int8Linear(weight, bias)(x)
    exact = x @ weight.T + bias
    codes, scales = quantize_per_channel(weight)
    flat = x.reshape(-1, 48)
    bound = (flat.abs().sum(1, keepdim=True) * scales / 2
             + flat.abs().amax(1, keepdim=True) / 255 * (codes.float() * scales[:, None]
                                                          ).abs().sum(1))
    assert y.shape == exact.shape
    assert torch.all((y - exact).reshape(-1, 96).abs() <= bound * 1.001)
    assert not torch.allclose(y, exact, atol=1e-4)  # it is quantised


@needs_fbgemm
def test_int8_log_probs_close_to_the_fp32_policy(tiny, prompts):
    """Prefill runs the fp32 layers, so each completion's first token is the policy's to fp32
    rounding; decode steps run int8 layers. Measured on this model (logits ~10, 2 layers),
    seeds 0-2: mean |gap| 0.11-0.12 nats, max 0.5-0.85; the bound allows 2x (mean) and
    ~2.4x (max) of that, while a stale or mis-scaled weight gives gaps of nats."""
    model, _ = tiny
    params = SamplingParams(temperature=1.0, max_new_tokens=20, n=3, seed=0)
    out = TorchEngine(model, dtype=torch.float32, quantization="int8").generate(prompts, params)
    first, later = [], []
    for row in range(out.num_rows):
        prompt, completion = prompts[int(out.prompt_index[row])], out.completion(row)
        gap = (out.logprobs[row, :len(completion)]
               - _fresh_forward_log_probs(model, prompt, completion)).abs()
        first.append(gap[0])
        later.append(gap[1:])
    later = torch.cat(later)
    assert max(first) < 1e-4
    assert later.mean() < 0.25 and later.max() < 2.0
    assert later.mean() > 1e-3  # the decode steps did run int8 weights


@needs_fbgemm
def test_update_weights_requantises(tiny, prompts):
    model, _ = tiny
    policy, updated = copy.deepcopy(model), copy.deepcopy(model)
    with torch.no_grad():  # a change inside the int8 layers (not the fp32 LM head)
        for block in updated.model.layers:
            block.mlp.down_proj.weight.mul_(-1.5)
    engine = TorchEngine(policy, dtype=torch.float32, quantization="int8")
    params = SamplingParams(temperature=1.0, max_new_tokens=12, n=2, seed=3)
    before = engine.generate(prompts, params)
    engine.update_weights(updated.state_dict())
    after = engine.generate(prompts, params)
    fresh = TorchEngine(updated, dtype=torch.float32, quantization="int8").generate(prompts, params)
    assert not torch.equal(before.logprobs, after.logprobs)
    assert torch.equal(after.completion_ids, fresh.completion_ids)
    assert torch.equal(after.logprobs, fresh.logprobs)  # decode steps included: re-quantised


@needs_fbgemm
def test_int8_refuses_bf16_and_unknown_modes(tiny):
    model, _ = tiny
    with pytest.raises(ValueError, match="int8.*float32"):
        TorchEngine(model, dtype=torch.bfloat16, quantization="int8")
    with pytest.raises(ValueError, match="quantization must be one of none, int8"):
        TorchEngine(model, dtype=torch.float32, quantization="int4")
    assert TorchEngine(model, quantization="int8").dtype == torch.float32


def test_a_build_without_fbgemm_gets_a_clear_error(monkeypatch, tiny):
    model, _ = tiny
    monkeypatch.setattr(int8, "_supported_engines", lambda: ["qnnpack", "none"])
    with pytest.raises(Int8Unavailable, match=r"rollout.quantization: int8 needs.*fbgemm.*"
                                              r"\['qnnpack', 'none'\].*quantization: none"):
        TorchEngine(model, dtype=torch.float32, quantization="int8")

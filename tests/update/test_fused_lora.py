"""LoRALinearFunction: the fused LoRA projection's output and gradients equal the formula
computed in float64 (with and without a base bias, any scaling), which peft layers it takes,
and that the patched forward falls back to peft's own for what it does not take."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from torch import nn

from rlvr.update.fused_lora import LoRALinearFunction, fusable, fused_lora_forward


def _fits(*tensors):
    return all(t.dtype == torch.float32 for t in tensors)


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("scaling", [2.0, 0.37])
def test_values_and_gradients_equal_the_float64_formula(bias, scaling):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 12, generator=g, requires_grad=True)
    w = torch.randn(7, 12, generator=g)
    b = torch.randn(7, generator=g) if bias else None
    a = torch.randn(4, 12, generator=g, requires_grad=True)
    up = torch.randn(7, 4, generator=g, requires_grad=True)
    out = LoRALinearFunction.apply(x, w, b, a, up, scaling)
    grad = torch.randn(out.shape, generator=g)
    dx, da, db = torch.autograd.grad(out, (x, a, up), grad)

    x64, a64, up64 = (t.detach().double().requires_grad_() for t in (x, a, up))
    ref = x64 @ w.double().t() + scaling * (x64 @ a64.t()) @ up64.t()
    if bias:
        ref = ref + b.double()
    ref_grads = torch.autograd.grad(ref, (x64, a64, up64), grad.double())
    assert out.shape == (3, 5, 7)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    for got, want in zip((dx, da, db), ref_grads, strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_a_frozen_input_gets_no_gradient_and_the_adapters_still_do():
    x = torch.randn(4, 6)
    a = torch.randn(2, 6, requires_grad=True)
    up = torch.randn(3, 2, requires_grad=True)
    out = LoRALinearFunction.apply(x, torch.randn(3, 6), None, a, up, 1.5)
    out.sum().backward()
    # d sum / dB = s (x A^T) summed over rows, per output: every row of dB equal
    expected = 1.5 * (x @ a.detach().t()).sum(0)
    torch.testing.assert_close(up.grad, expected.expand(3, 2))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 6)


def _wrapped(**config):
    torch.manual_seed(0)
    model = get_peft_model(_Net(), LoraConfig(r=2, lora_alpha=4, target_modules=["proj"],
                                              **config))
    nn.init.normal_(model.base_model.model.proj.lora_B["default"].weight)
    return model, model.base_model.model.proj


def test_the_plain_adapter_is_fused_and_equals_peft():
    model, layer = _wrapped()
    assert fusable(layer)
    x = torch.randn(5, 8)
    peft_out = layer(x)
    layer.forward = fused_lora_forward(layer, _fits)
    fused = layer(x)
    assert fused.grad_fn is not None and "LoRALinear" in type(fused.grad_fn).__name__
    torch.testing.assert_close(fused, peft_out)
    layer.double()  # an input the fused node does not take: peft's own forward runs
    out = layer(x.double())
    assert out.dtype == torch.float64 and "LoRALinear" not in type(out.grad_fn).__name__
    torch.testing.assert_close(out, peft_out.double(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("config", [{"lora_dropout": 0.1}, {"use_dora": True},
                                    {"lora_bias": True}], ids=["dropout", "dora", "lora-bias"])
def test_what_the_fused_node_does_not_compute_stays_with_peft(config):
    _, layer = _wrapped(**config)
    assert not fusable(layer)


def test_a_merged_disabled_or_hooked_layer_stays_with_peft():
    model, layer = _wrapped()
    layer.merge()
    assert not fusable(layer)
    layer.unmerge()
    assert fusable(layer)
    with model.disable_adapter():
        assert not fusable(layer)
    handle = layer.base_layer.register_forward_hook(lambda *args: None)
    assert not fusable(layer)
    handle.remove()
    layer.base_layer.weight.requires_grad_(True)
    assert not fusable(layer)

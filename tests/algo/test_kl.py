"""KL estimators (Schulman 2020) and KL coefficient controllers."""

import math

import pytest
import torch

from rlvr.algo import (
    KL_ESTIMATORS,
    AdaptiveKLController,
    FixedKLController,
    kl_divergence,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_penalized_rewards,
)


def test_estimators_by_hand():
    # pi_theta = 0.5, pi_ref = 0.25: x = log(0.25 / 0.5) = -ln 2
    lp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25)]])
    ln2 = math.log(2)
    assert kl_k1(lp, ref).item() == pytest.approx(ln2, abs=1e-6)  # 0.693147
    assert kl_k2(lp, ref).item() == pytest.approx(ln2**2 / 2, abs=1e-6)  # 0.240227
    k3 = kl_k3(lp, ref)
    # exp(-ln 2) + ln 2 - 1 = 0.5 + 0.693147 - 1 = 0.193147
    assert k3.item() == pytest.approx(0.193147, abs=1e-6)
    # d k3 / d logp = 1 - exp(x) = 0.5
    (grad,) = torch.autograd.grad(k3.sum(), lp)
    assert grad.item() == pytest.approx(0.5, abs=1e-6)


def test_gradients_of_k1_k2():
    lp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25)]])
    (g1,) = torch.autograd.grad(kl_k1(lp, ref).sum(), lp)
    (g2,) = torch.autograd.grad(kl_k2(lp, ref).sum(), lp)
    assert g1.item() == pytest.approx(1.0)
    assert g2.item() == pytest.approx(math.log(2), abs=1e-6)  # -x


def test_identical_policies_give_zero_and_k3_is_nonnegative():
    lp = torch.log_softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(0)), -1)
    ref = torch.log_softmax(torch.randn(3, 5, generator=torch.Generator().manual_seed(1)), -1)
    for name in ("k1", "k2", "k3"):
        assert torch.all(kl_divergence(name, lp, lp) == 0)
    assert torch.all(kl_k3(lp, ref) >= 0)
    assert torch.any(kl_k1(lp, ref) < 0)  # k1 can be negative per token


def test_k3_clamps_log_ratio_before_exp():
    lp = torch.tensor([[-50.0]], requires_grad=True)
    value = kl_k3(lp, torch.tensor([[0.0]]))  # x = 50, clamped to 10
    assert value.item() == pytest.approx(math.exp(10) - 11, rel=1e-6)  # 22015.4658
    (grad,) = torch.autograd.grad(value.sum(), lp)
    assert torch.isfinite(grad).all()


def test_estimators_are_fp32_and_reference_is_constant():
    lp = torch.zeros(2, 2, dtype=torch.bfloat16)
    ref = torch.full((2, 2), -1.0, requires_grad=True)
    out = kl_k3(lp, ref)
    assert out.dtype == torch.float32
    assert not out.requires_grad
    assert KL_ESTIMATORS.names() == ["k1", "k2", "k3"]


def test_kl_penalized_rewards():
    rewards = torch.tensor([1.0, 0.0])
    kl = torch.tensor([[0.1, 0.2, 9.0], [0.3, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    out = kl_penalized_rewards(rewards, kl, mask, coef=0.5)
    torch.testing.assert_close(out, torch.tensor([1 - 0.15, -0.15]))


def test_adaptive_controller_follows_ziegler():
    ctl = AdaptiveKLController(init_coef=0.1, target=6.0)
    # error (6.6 - 6) / 6 = 0.1 -> beta * (1 + 0.1 * 0.1)
    assert ctl.update(6.6) == pytest.approx(0.101)
    ctl = AdaptiveKLController(init_coef=0.1, target=6.0)
    assert ctl.update(12.0) == pytest.approx(0.1 * 1.02)  # error clipped to +0.2
    ctl = AdaptiveKLController(init_coef=0.1, target=6.0)
    assert ctl.update(0.0) == pytest.approx(0.1 * 0.98)  # error clipped to -0.2
    ctl = AdaptiveKLController(init_coef=0.1, target=6.0, horizon=10000)
    assert ctl.update(12.0, n_steps=256) == pytest.approx(0.1 * (1 + 0.2 * 0.0256))
    assert ctl.update(float("nan")) == pytest.approx(0.1 * (1 + 0.2 * 0.0256))
    assert FixedKLController(0.01).update(100.0) == 0.01
    with pytest.raises(ValueError):
        AdaptiveKLController(init_coef=0.1, target=0.0)

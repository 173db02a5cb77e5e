"""Truncated importance sampling (``rlvr.algo.importance``, ``algo.tis_cap``): the weights by
hand, their place in the objective, and TIS off leaving the loss exactly as it was."""

import math

import pytest
import torch

from rlvr.algo import policy_objective
from rlvr.algo.importance import truncated_importance_weights

MASK = torch.tensor([[True, True, False]])


def test_weights_by_hand():
    # token 0: pi_old 0.5, pi_rollout 0.25 -> ratio 2, capped at 1.5;
    # token 1: pi_old 0.1, pi_rollout 0.4 -> ratio 0.25; token 2 is padding (garbage values)
    old = torch.tensor([[math.log(0.5), math.log(0.1), 50.0]])
    rollout = torch.tensor([[math.log(0.25), math.log(0.4), -50.0]])
    tis = truncated_importance_weights(old, rollout, MASK, cap=1.5)
    torch.testing.assert_close(tis.weights, torch.tensor([[1.5, 0.25, 0.0]]))
    assert tis.metrics["tis_weight_mean"].item() == pytest.approx((1.5 + 0.25) / 2)
    assert tis.metrics["tis_clipped_fraction"].item() == pytest.approx(0.5)
    # below the cap the weight is the plain ratio
    wide = truncated_importance_weights(old, rollout, MASK, cap=10.0)
    torch.testing.assert_close(wide.weights, torch.tensor([[2.0, 0.25, 0.0]]))
    assert wide.metrics["tis_clipped_fraction"].item() == 0.0


def test_weights_carry_no_gradient_and_bad_input_is_refused():
    old = torch.zeros(1, 3, requires_grad=True)
    tis = truncated_importance_weights(old, torch.zeros(1, 3), MASK, cap=2.0)
    assert not tis.weights.requires_grad
    with pytest.raises(ValueError, match="cap must be > 0"):
        truncated_importance_weights(old, torch.zeros(1, 3), MASK, cap=0.0)
    with pytest.raises(ValueError, match="rollout_log_probs"):
        truncated_importance_weights(old, torch.zeros(1, 2), MASK, cap=2.0)


def test_objective_weights_the_policy_term_by_hand():
    # one row, two completion tokens, A = 1, ratio pi / pi_old = 1: each token's policy loss
    # is -A = -1; TIS weights 1.5 and 0.25 (as above); grpo aggregation = token mean:
    # loss = -(1.5 + 0.25) / 2 = -0.875, d loss / d logp_t = -w_t / 2
    old = torch.tensor([[math.log(0.5), math.log(0.1), 0.0]])
    rollout = torch.tensor([[math.log(0.25), math.log(0.4), 0.0]])
    lp = old.clone().requires_grad_(True)
    out = policy_objective(lp, old, torch.ones(1), MASK, rollout_log_probs=rollout, tis_cap=1.5)
    assert out.loss.item() == pytest.approx(-0.875, abs=1e-6)
    assert out.metrics["pg_loss"].item() == pytest.approx(-0.875, abs=1e-6)
    assert out.metrics["tis_weight_mean"].item() == pytest.approx(0.875)
    (grad,) = torch.autograd.grad(out.loss, lp)
    torch.testing.assert_close(grad, torch.tensor([[-0.75, -0.125, 0.0]]))
    with pytest.raises(ValueError, match="tis_cap needs rollout_log_probs"):
        policy_objective(lp, old, torch.ones(1), MASK, tis_cap=1.5)


def test_tis_off_gives_exactly_the_old_loss():
    torch.manual_seed(0)
    lp = torch.randn(4, 6, requires_grad=True)
    old = lp.detach() + 0.1 * torch.randn(4, 6)
    ref = lp.detach() + 0.2 * torch.randn(4, 6)
    rollout = old + 0.3 * torch.randn(4, 6)
    mask = torch.rand(4, 6) > 0.3
    adv = torch.randn(4)
    kwargs = {"ref_log_probs": ref, "kl_coef": 0.05}
    plain = policy_objective(lp, old, adv, mask, **kwargs)
    off = policy_objective(lp, old, adv, mask, rollout_log_probs=rollout, tis_cap=None, **kwargs)
    assert torch.equal(plain.loss, off.loss)
    assert "tis_weight_mean" not in off.metrics
    g_plain, = torch.autograd.grad(plain.loss, lp)
    g_off, = torch.autograd.grad(off.loss, lp)
    assert torch.equal(g_plain, g_off)
    # a sampler that agrees with pi_old: every weight is exactly 1, so the loss is unchanged
    same = policy_objective(lp, old, adv, mask, rollout_log_probs=old, tis_cap=2.0, **kwargs)
    assert torch.equal(plain.loss, same.loss)
    assert same.metrics["tis_weight_mean"].item() == 1.0
    # and a mismatched one changes it
    moved = policy_objective(lp, old, adv, mask, rollout_log_probs=rollout, tis_cap=2.0, **kwargs)
    assert not torch.equal(plain.loss, moved.loss)

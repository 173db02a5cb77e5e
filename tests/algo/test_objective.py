"""The combined objective: policy loss + beta * KL - entropy bonus, aggregated; registries."""

import math

import pytest
import torch

from rlvr.algo import (
    ADVANTAGE_ESTIMATORS,
    Registry,
    compute_advantages,
    policy_objective,
    token_entropy,
)


def test_kl_term_by_hand():
    # one token, A = 0 (no policy gradient), pi = 0.5, pi_ref = 0.25:
    # loss = beta * k3 = 0.1 * 0.193147; d loss / d logp = beta * (1 - exp(x)) = 0.05
    lp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25)]])
    out = policy_objective(
        lp,
        lp.detach(),
        torch.zeros(1),
        torch.ones(1, 1, dtype=torch.bool),
        ref_log_probs=ref,
        kl_coef=0.1,
    )
    assert out.loss.item() == pytest.approx(0.1 * (0.5 + math.log(2) - 1), abs=1e-7)
    assert out.metrics["kl"].item() == pytest.approx(0.193147, abs=1e-6)
    (grad,) = torch.autograd.grad(out.loss, lp)
    assert grad.item() == pytest.approx(0.05, abs=1e-6)


def test_kl_is_reported_but_not_added_with_zero_coef():
    lp = torch.tensor([[math.log(0.5)]], requires_grad=True)
    ref = torch.tensor([[math.log(0.25)]])
    out = policy_objective(
        lp, lp.detach(), torch.zeros(1), torch.ones(1, 1, dtype=torch.bool), ref_log_probs=ref
    )
    assert out.loss.item() == 0.0 and out.metrics["kl"].item() > 0


def test_dr_grpo_weighs_every_token_equally_grpo_does_not():
    # completions of 3 tokens and 1 token, same advantage; ratio 1
    lp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, False, False]])
    adv = torch.tensor([1.0, 1.0])
    grads = {}
    for agg, opts in (("grpo", {}), ("dr_grpo", {"max_completion_length": 3})):
        out = policy_objective(lp, lp.detach(), adv, mask, loss_agg=agg, loss_agg_options=opts)
        (grads[agg],) = torch.autograd.grad(out.loss, lp)
    # grpo: -A / (N |o_i|) -> -1/6 per long-completion token, -1/2 for the short one
    torch.testing.assert_close(grads["grpo"][mask], torch.tensor([-1 / 6, -1 / 6, -1 / 6, -1 / 2]))
    # dr_grpo: -A / (N L_max) = -1/6 for every token
    torch.testing.assert_close(grads["dr_grpo"][mask], torch.full((4,), -1 / 6))


def test_padding_nan_never_reaches_loss_or_gradient():
    lp = torch.tensor([[-1.0, float("nan")]], requires_grad=True)
    ref = torch.tensor([[-1.5, float("nan")]])
    mask = torch.tensor([[True, False]])
    out = policy_objective(
        lp, lp.detach(), torch.tensor([1.0]), mask, ref_log_probs=ref, kl_coef=0.1
    )
    (grad,) = torch.autograd.grad(out.loss, lp)
    assert torch.isfinite(out.loss) and torch.isfinite(grad).all() and grad[0, 1] == 0


def test_entropy_bonus_lowers_loss_and_raises_entropy():
    logits = torch.tensor([[[2.0, 0.0, -1.0]]], requires_grad=True)
    mask = torch.ones(1, 1, dtype=torch.bool)
    lp = torch.zeros(1, 1)
    entropy = token_entropy(logits)
    out = policy_objective(lp, lp, torch.zeros(1), mask, entropy=entropy, entropy_coef=0.5)
    assert out.loss.item() == pytest.approx(-0.5 * entropy.item())
    (grad,) = torch.autograd.grad(out.loss, logits)
    # a gradient step (logits - lr * grad) must increase the entropy
    assert token_entropy(logits.detach() - 0.1 * grad).item() > entropy.item()


def test_argument_errors():
    lp = torch.zeros(1, 1)
    mask = torch.ones(1, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match="ref_log_probs"):
        policy_objective(lp, lp, torch.zeros(1), mask, kl_coef=0.1)
    with pytest.raises(ValueError, match="entropy"):
        policy_objective(lp, lp, torch.zeros(1), mask, entropy_coef=0.1)
    with pytest.raises(KeyError, match="policy loss"):
        policy_objective(lp, lp, torch.zeros(1), mask, policy_loss="ppo")


def test_a_new_variant_is_one_decorated_function():
    @ADVANTAGE_ESTIMATORS.register("test_raw_reward")
    def raw(rewards, group_ids):
        return rewards.float()

    try:
        out = compute_advantages("test_raw_reward", torch.tensor([1.0, 2.0]), torch.tensor([0, 0]))
        assert out.tolist() == [1.0, 2.0]
        with pytest.raises(ValueError, match="already registered"):
            ADVANTAGE_ESTIMATORS.register("test_raw_reward")(lambda r, g: r)
    finally:
        ADVANTAGE_ESTIMATORS.unregister("test_raw_reward")


def test_registry_basics():
    reg = Registry("widget")
    reg.register("a")(len)
    assert "a" in reg and reg.get("a") is len and list(reg) == ["a"]
    with pytest.raises(KeyError, match="unknown widget 'b'"):
        reg.get("b")

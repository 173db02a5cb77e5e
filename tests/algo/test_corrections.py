"""Off-policy corrections (``rlvr.algo.corrections``): each weight worked by hand from its
source's formula, the corrections inside the objective, and the config's field checks."""

import math
from types import SimpleNamespace

import pytest
import torch

from rlvr.algo import OFF_POLICY_CORRECTIONS, compute_correction, policy_objective
from rlvr.algo.corrections import check_correction_fields

# rho = pi_prox / pi_behav per token: row 0: 0.6/0.2 = 3, 0.3/0.5 = 0.6, 0.1/0.4 = 0.25, pad;
# row 1: 0.5/0.5 = 1, 0.9/0.1 = 9, pad, pad (padding holds garbage)
PROX = torch.tensor([[math.log(0.6), math.log(0.3), math.log(0.1), 80.0],
                     [math.log(0.5), math.log(0.9), -80.0, float("nan")]])
BEHAV = torch.tensor([[math.log(0.2), math.log(0.5), math.log(0.4), -80.0],
                      [math.log(0.5), math.log(0.1), 80.0, 0.0]])
MASK = torch.tensor([[True, True, True, False], [True, True, False, False]])


def _close(actual, expected):
    torch.testing.assert_close(actual, torch.tensor(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, options, weights, truncated, masked", [
    # Yao et al. 2025: w = min(rho, C), C = 2
    ("tis", {"cap": 2.0}, [[2.0, 0.6, 0.25, 0], [1.0, 2.0, 0, 0]], 2 / 5, 0.0),
    # masked IS: w = rho if rho <= C else 0, C = 2
    ("mis", {"cap": 2.0}, [[0.0, 0.6, 0.25, 0], [1.0, 0.0, 0, 0]], 0.0, 2 / 5),
    # IcePop: w = rho inside [0.5, 5], else 0 (0.25 below, 9 above)
    ("icepop", {"low": 0.5, "high": 5.0}, [[3.0, 0.6, 0.0, 0], [1.0, 0.0, 0, 0]], 0.0, 2 / 5),
    # AReaL's behaviour weight, masked above behav_imp_weight_cap = 5
    ("decoupled", {"cap": 5.0}, [[3.0, 0.6, 0.25, 0], [1.0, 0.0, 0, 0]], 0.0, 1 / 5),
    # ... and without a cap, the plain weight
    ("decoupled", {"cap": None}, [[3.0, 0.6, 0.25, 0], [1.0, 9.0, 0, 0]], 0.0, 0.0),
    ("none", {}, [[1.0, 1.0, 1.0, 0], [1.0, 1.0, 0, 0]], 0.0, 0.0),
])
def test_weights_by_hand(name, options, weights, truncated, masked):
    out = compute_correction(name, PROX, BEHAV, MASK, **options)
    _close(out.weights, weights)
    assert not out.weights.requires_grad
    real = [w for row, keep in zip(weights, MASK.tolist()) for w, k in zip(row, keep) if k]
    assert out.metrics["is_weight_mean"].item() == pytest.approx(sum(real) / 5, rel=1e-5)
    assert out.metrics["is_weight_max"].item() == pytest.approx(max(real), rel=1e-5)
    assert out.metrics["is_truncated_fraction"].item() == pytest.approx(truncated)
    assert out.metrics["is_masked_fraction"].item() == pytest.approx(masked)
    # the behaviour ratio itself, whichever correction: (3 + 0.6 + 0.25 + 1 + 9) / 5, max 9
    assert out.metrics["is_ratio_mean"].item() == pytest.approx(13.85 / 5, rel=1e-5)
    assert out.metrics["is_ratio_max"].item() == pytest.approx(9.0, rel=1e-5)


def test_tis_keeps_its_own_metrics():
    out = compute_correction("tis", PROX, BEHAV, MASK, cap=2.0)
    assert out.metrics["tis_weight_mean"].item() == pytest.approx(5.85 / 5, rel=1e-5)
    assert out.metrics["tis_clipped_fraction"].item() == pytest.approx(2 / 5)


def test_decoupled_objective_by_hand():
    """AReaL (Fu et al. 2025, arXiv:2505.24298, Sec. 5.2): loss_t = -(pi_prox / pi_behav) *
    min(u A, clip(u, 1 - eps, 1 + eps) A), u = pi_theta / pi_prox; eps = 0.2, A = 1.

    token 0: pi_behav 0.2, pi_prox 0.4 (weight 2), pi_theta 0.5: u = 1.25, clipped to 1.2:
             loss -2 * 1.2 = -2.4, no gradient (the clip binds);
    token 1: pi_behav 0.5, pi_prox 0.25 (weight 0.5), pi_theta 0.275: u = 1.1 inside the clip:
             loss -0.5 * 1.1 = -0.55, d loss / d log pi_theta = -0.5 * 1.1 = -0.55.
    grpo aggregation (token mean of one row): loss -(2.4 + 0.55) / 2 = -1.475, gradient
    [0, -0.275]."""
    behav = torch.tensor([[math.log(0.2), math.log(0.5)]])
    prox = torch.tensor([[math.log(0.4), math.log(0.25)]])
    theta = torch.tensor([[math.log(0.5), math.log(0.275)]], requires_grad=True)
    mask = torch.ones(1, 2, dtype=torch.bool)
    out = policy_objective(theta, prox, torch.ones(1), mask, policy_loss_options={"eps": 0.2},
                           rollout_log_probs=behav, off_policy_correction="decoupled",
                           correction_options={"cap": None})
    assert out.loss.item() == pytest.approx(-1.475, rel=1e-5)
    (grad,) = torch.autograd.grad(out.loss, theta)
    _close(grad, [[0.0, -0.275]])
    # with AReaL's cap at 1.5 the first token (weight 2) is dropped: -(0 + 0.55) / 2
    capped = policy_objective(theta, prox, torch.ones(1), mask,
                              policy_loss_options={"eps": 0.2}, rollout_log_probs=behav,
                              off_policy_correction="decoupled",
                              correction_options={"cap": 1.5})
    assert capped.loss.item() == pytest.approx(-0.275, rel=1e-5)
    assert capped.metrics["is_masked_fraction"].item() == pytest.approx(0.5)


@pytest.mark.parametrize("name, options", [("tis", {"cap": 2.0}), ("mis", {"cap": 2.0}),
                                           ("icepop", {}), ("decoupled", {})])
def test_each_correction_weights_the_policy_term(name, options):
    """At pi_theta = pi_prox (ratio 1, no clip) a token's loss is -w A and its gradient
    -w A / n over the n tokens of the row (grpo aggregation); A = 2."""
    theta = PROX.clone().requires_grad_(True)
    out = policy_objective(theta, PROX, torch.full((2,), 2.0), MASK, rollout_log_probs=BEHAV,
                           off_policy_correction=name, correction_options=options)
    w = compute_correction(name, PROX, BEHAV, MASK, **options).weights
    n = MASK.sum(1, keepdim=True).float()
    expected_loss = (-(2 * w).sum(1) / n.squeeze(1)).mean()
    assert out.loss.item() == pytest.approx(expected_loss.item(), rel=1e-5)
    (grad,) = torch.autograd.grad(out.loss, theta)
    torch.testing.assert_close(grad, torch.where(MASK, -2 * w / n / 2, torch.zeros_like(w)))


def test_none_leaves_the_loss_exactly_as_it_was_and_logs_the_ratio():
    torch.manual_seed(0)
    lp = torch.randn(3, 5, requires_grad=True)
    old = lp.detach() + 0.1 * torch.randn(3, 5)
    sampler = old + 0.05 * torch.randn(3, 5)
    mask = torch.rand(3, 5) > 0.3
    adv = torch.randn(3)
    plain = policy_objective(lp, old, adv, mask)
    logged = policy_objective(lp, old, adv, mask, rollout_log_probs=sampler)
    assert torch.equal(plain.loss, logged.loss)
    assert "is_ratio_mean" in logged.metrics and "is_weight_mean" not in logged.metrics
    ratio = torch.exp(old - sampler)[mask]
    assert logged.metrics["is_ratio_max"].item() == pytest.approx(ratio.max().item(), rel=1e-6)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="mis cap must be > 1"):
        compute_correction("mis", PROX, BEHAV, MASK, cap=1.0)
    with pytest.raises(ValueError, match="icepop band"):
        compute_correction("icepop", PROX, BEHAV, MASK, low=1.2, high=5.0)
    with pytest.raises(KeyError, match="did you mean 'icepop'"):
        compute_correction("ice_pop", PROX, BEHAV, MASK)
    lp = PROX.clone()
    with pytest.raises(ValueError, match="off_policy_correction 'mis' needs rollout_log_probs"):
        policy_objective(lp, PROX, torch.ones(2), MASK, off_policy_correction="mis")
    with pytest.raises(ValueError, match="tis_cap is the cap of the tis correction"):
        policy_objective(lp, PROX, torch.ones(2), MASK, rollout_log_probs=BEHAV, tis_cap=2.0,
                         off_policy_correction="icepop")
    assert OFF_POLICY_CORRECTIONS.names() == ["decoupled", "icepop", "mis", "none", "tis"]


def _algo(**fields):
    base = {"off_policy_correction": "auto", "mis_cap": 2.0, "icepop_low": 0.5,
            "icepop_high": 5.0, "decoupled_cap": 5.0, "policy_loss": "clip",
            "gspo_eps_low": 3e-4, "gspo_eps_high": 4e-4, "gspo_token": False,
            "clip_eps": 0.2, "clip_eps_high": 0.28}
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize("fields, message", [
    ({"off_policy_correction": "ice_pop"}, "did you mean 'icepop'"),
    ({"mis_cap": 3.0}, "mis_cap: 3.0 applies to off_policy_correction: mis only"),
    ({"off_policy_correction": "tis", "icepop_high": 4.0}, "icepop_high: 4.0 applies to"),
    ({"off_policy_correction": "mis", "decoupled_cap": 3.0}, "decoupled_cap: 3.0 applies to"),
    ({"gspo_token": True}, "gspo_token: True applies to policy_loss: gspo only"),
    ({"policy_loss": "gspo", "clip_eps": 0.1}, "clip_eps: 0.1 does not apply to policy_loss"),
])
def test_contradicting_fields_are_named(fields, message):
    with pytest.raises(ValueError, match=message):
        check_correction_fields(_algo(**fields))


@pytest.mark.parametrize("fields", [
    {}, {"off_policy_correction": "mis", "mis_cap": 3.0}, {"decoupled_cap": 3.0},
    {"off_policy_correction": "icepop", "icepop_low": 0.2},
    {"policy_loss": "gspo", "gspo_eps_low": 1e-3, "gspo_token": True},
])
def test_consistent_fields_pass(fields):
    check_correction_fields(_algo(**fields))

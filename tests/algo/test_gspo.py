"""GSPO (``rlvr.algo.gspo``, Zheng et al. 2025, arXiv:2507.18071): the sequence ratio, its
clip and gradient worked by hand, and GSPO-token's equivalence."""

import math

import pytest
import torch

from rlvr.algo import POLICY_LOSSES, policy_objective
from rlvr.algo.gspo import gspo_loss

# Three completions (token ratios pi_theta / pi_old):
#   row 0: 1.21, 1.0         s = sqrt(1.21 * 1.0) = 1.1, A = +1: clipped at 1.05
#   row 1: e^0.02, e^0       s = e^0.01,               A = +2: inside the clip
#   row 2: 0.81, 1.0, (pad)  s = sqrt(0.81) = 0.9,     A = -1: clipped at 0.95
OLD = torch.log(torch.tensor([[0.5, 0.4, 0.3], [0.2, 0.6, 0.1], [0.5, 0.5, 0.7]]))
RATIOS = torch.tensor([[1.21, 1.0, 1.0], [math.exp(0.02), 1.0, 1.0], [0.81, 1.0, 1.0]])
MASK = torch.tensor([[True, True, False], [True, True, False], [True, True, False]])
ADV = torch.tensor([1.0, 2.0, -1.0])
EPS = 0.05
S1 = math.exp(0.01)


def _theta():
    return (OLD + torch.log(RATIOS)).requires_grad_(True)


def test_sequence_ratio_clip_and_gradient_by_hand():
    theta = _theta()
    out = gspo_loss(theta, OLD, ADV, MASK, eps_low=EPS, eps_high=EPS)
    # per token of row i: -min(s_i A_i, clip(s_i, 0.95, 1.05) A_i)
    expected = torch.tensor([[-1.05, -1.05, 0.0], [-2 * S1, -2 * S1, 0.0], [0.95, 0.95, 0.0]])
    torch.testing.assert_close(out.token_loss.detach(), expected, rtol=1e-5, atol=1e-6)
    # the objective (grpo aggregation: token mean per row, mean over rows)
    loss = policy_objective(theta, OLD, ADV, MASK, policy_loss="gspo",
                            policy_loss_options={"eps_low": EPS, "eps_high": EPS}).loss
    assert loss.item() == pytest.approx((-1.05 - 2 * S1 + 0.95) / 3, rel=1e-5)
    # gradient: rows 0 and 2 are clipped (none); row 1: d(-A s)/d log pi_t = -A s / |y|,
    # over 3 rows: -2 * e^0.01 / 2 / 3 per token
    (grad,) = torch.autograd.grad(loss, theta)
    g = -2 * S1 / 2 / 3
    torch.testing.assert_close(grad, torch.tensor([[0.0, 0.0, 0.0], [g, g, 0.0], [0.0] * 3]),
                               rtol=1e-5, atol=1e-7)
    # metrics: ratio mean over the 6 tokens = (2 * 1.1 + 2 * e^0.01 + 2 * 0.9) / 6
    assert out.metrics["ratio_mean"].item() == pytest.approx((2.2 + 2 * S1 + 1.8) / 6, rel=1e-5)
    assert out.metrics["ratio_max"].item() == pytest.approx(1.1, rel=1e-5)
    assert out.metrics["clip_frac_high"].item() == pytest.approx(2 / 6)
    assert out.metrics["clip_frac_low"].item() == pytest.approx(2 / 6)


def test_gspo_token_matches_gspo_with_one_advantage_per_completion():
    seq, tok = _theta(), _theta()
    kw = {"policy_loss": "gspo"}
    a = policy_objective(seq, OLD, ADV, MASK, **kw,
                         policy_loss_options={"eps_low": EPS, "eps_high": EPS})
    b = policy_objective(tok, OLD, ADV, MASK, **kw,
                         policy_loss_options={"eps_low": EPS, "eps_high": EPS,
                                              "token_level": True})
    assert a.loss.item() == pytest.approx(b.loss.item(), rel=1e-6)
    (ga,) = torch.autograd.grad(a.loss, seq)
    (gb,) = torch.autograd.grad(b.loss, tok)
    torch.testing.assert_close(ga, gb)


def test_gspo_token_takes_per_token_advantages():
    """GSPO-token with A_{1,t} = (2, 4) on row 1 (unclipped): d/d log pi_t = -A_t s / |y|,
    over 3 rows."""
    theta = _theta()
    adv = torch.tensor([[1.0, 1.0, 0.0], [2.0, 4.0, 0.0], [-1.0, -1.0, 0.0]])
    out = gspo_loss(theta, OLD, adv, MASK, eps_low=EPS, eps_high=EPS, token_level=True)
    loss = (out.token_loss.sum(1) / MASK.sum(1)).mean()
    (grad,) = torch.autograd.grad(loss, theta)
    assert grad[1, 0].item() == pytest.approx(-2 * S1 / 2 / 3, rel=1e-5)
    assert grad[1, 1].item() == pytest.approx(-4 * S1 / 2 / 3, rel=1e-5)


def test_registered_with_the_papers_clip_range_and_refuses_bad_eps():
    config = type("C", (), {"algo": type("A", (), {"gspo_eps_low": 3e-4, "gspo_eps_high": 4e-4,
                                                   "gspo_token": False})})
    assert POLICY_LOSSES.options("gspo", config) == {"eps_low": 3e-4, "eps_high": 4e-4,
                                                     "token_level": False}
    with pytest.raises(ValueError, match="eps_low"):
        gspo_loss(_theta(), OLD, ADV, MASK, eps_low=1.5)

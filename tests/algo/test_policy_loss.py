"""Clipped surrogate, clip-higher and dual-clip on hand-made ratios, checked via autograd."""

import math

import pytest
import torch

from rlvr.algo import POLICY_LOSSES, clipped_surrogate_loss, compute_policy_loss


def setup(ratios, advantages):
    """One token per completion with the given ratios; returns (log_probs, old, adv, mask)."""
    old = torch.full((len(ratios), 1), -1.0)
    log_probs = (old + torch.log(torch.tensor(ratios)).unsqueeze(-1)).requires_grad_(True)
    adv = torch.tensor(advantages, dtype=torch.float32)
    return log_probs, old, adv, torch.ones(len(ratios), 1, dtype=torch.bool)


def loss_and_grad(name, ratios, advantages, **options):
    lp, old, adv, mask = setup(ratios, advantages)
    out = compute_policy_loss(name, lp, old, adv, mask, **options)
    (grad,) = torch.autograd.grad(out.token_loss.sum(), lp)
    return out.token_loss.squeeze(-1).tolist(), grad.squeeze(-1).tolist(), out.metrics


def test_symmetric_clip_by_hand():
    # (r, A) -> objective min(rA, clip(r, 0.8, 1.2) A); d loss / d logp = -rA if unclipped else 0
    loss, grad, m = loss_and_grad("clip", [1.5, 0.5, 0.5, 1.5], [1.0, 1.0, -1.0, -1.0])
    assert loss == pytest.approx([-1.2, -0.5, 0.8, 1.5])
    assert grad == pytest.approx([0.0, -0.5, 0.0, 1.5])
    assert m["clip_frac_low"].item() == pytest.approx(0.25)  # (0.5, -1)
    assert m["clip_frac_high"].item() == pytest.approx(0.25)  # (1.5, +1)
    assert m["clip_frac"].item() == pytest.approx(0.5)
    assert m["ratio_max"].item() == pytest.approx(1.5)
    # approx KL(old || new) = mean((r - 1) - ln r)
    expected = ((0.5 - math.log(1.5)) * 2 + (-0.5 - math.log(0.5)) * 2) / 4
    assert m["approx_kl"].item() == pytest.approx(expected, abs=1e-6)


def test_ratio_one_gives_minus_advantage_and_nonzero_gradient():
    # one update per batch: r = 1, loss value -A (mean ~0 for centred A) but gradient -A
    lp = torch.tensor([[-1.0, -2.0], [-0.5, -3.0]], requires_grad=True)
    adv = torch.tensor([0.5, -0.5])
    mask = torch.ones(2, 2, dtype=torch.bool)
    out = clipped_surrogate_loss(lp, lp.detach(), adv, mask)
    assert out.token_loss.sum().item() == pytest.approx(0.0)
    (grad,) = torch.autograd.grad(out.token_loss.sum(), lp)
    torch.testing.assert_close(grad, torch.tensor([[-0.5, -0.5], [0.5, 0.5]]))
    assert out.metrics["clip_frac"].item() == 0.0


def test_clip_higher_lets_positive_ratio_rise_above_one_plus_eps_low():
    # r = 1.25, A = +1: symmetric eps 0.2 clips at 1.2 (no gradient), clip-higher
    # (eps_high 0.28) does not, so the token's probability keeps being pushed up.
    sym_loss, sym_grad, _ = loss_and_grad("clip", [1.25], [1.0])
    hi_loss, hi_grad, hi_m = loss_and_grad("clip_higher", [1.25], [1.0])
    assert sym_loss == pytest.approx([-1.2]) and sym_grad == [0.0]
    assert hi_loss == pytest.approx([-1.25]) and hi_grad == pytest.approx([-1.25])
    assert hi_m["clip_frac_high"].item() == 0.0
    # beyond 1 + eps_high it clips at 1.28
    loss, grad, m = loss_and_grad("clip_higher", [1.3], [1.0])
    assert loss == pytest.approx([-1.28]) and grad == [0.0]
    assert m["clip_frac_high"].item() == 1.0
    # the low side is unchanged: r = 0.75, A = -1 is clipped by eps_low = 0.2 in both
    for name in ("clip", "clip_higher"):
        loss, grad, _ = loss_and_grad(name, [0.75], [-1.0])
        assert loss == pytest.approx([0.8]) and grad == [0.0]


def test_dual_clip_bounds_negative_advantage_objective_at_c_times_a():
    # r = 5, A = -1: plain clip objective min(-5, -1.2) = -5 (loss 5, gradient 5);
    # dual-clip bounds it at c * A = -3 (loss 3, no gradient).
    loss, grad, _ = loss_and_grad("clip", [5.0], [-1.0])
    assert loss == pytest.approx([5.0]) and grad == pytest.approx([5.0])
    loss, grad, m = loss_and_grad("dual_clip", [5.0], [-1.0])
    assert loss == pytest.approx([3.0]) and grad == [0.0]
    assert m["dual_clip_frac"].item() == 1.0
    # below c the bound is inactive: r = 2 -> loss 2, gradient 2
    loss, grad, m = loss_and_grad("dual_clip", [2.0], [-1.0])
    assert loss == pytest.approx([2.0]) and grad == pytest.approx([2.0])
    assert m["dual_clip_frac"].item() == 0.0
    # positive advantages are untouched by dual-clip
    assert loss_and_grad("dual_clip", [5.0], [1.0])[0] == pytest.approx([-1.2])


def test_clip_higher_combines_with_dual_clip():
    loss, _, _ = loss_and_grad("clip_higher", [1.25, 5.0], [1.0, -1.0], dual_clip=3.0)
    assert loss == pytest.approx([-1.25, 3.0])


def test_padding_is_ignored_even_if_nan():
    lp = torch.tensor([[-1.0, float("nan")], [-2.0, -1.0]], requires_grad=True)
    old = torch.tensor([[-1.0, float("nan")], [-2.0, -1.0]])
    mask = torch.tensor([[True, False], [True, True]])
    out = clipped_surrogate_loss(lp, old, torch.tensor([1.0, -1.0]), mask)
    assert out.token_loss.tolist() == [[-1.0, 0.0], [1.0, 1.0]]
    (grad,) = torch.autograd.grad(out.token_loss.sum(), lp)
    assert torch.isfinite(grad).all() and grad[0, 1].item() == 0.0
    assert all(torch.isfinite(v) for v in out.metrics.values())


def test_token_level_advantages_and_bf16_inputs():
    lp = torch.zeros(1, 2, dtype=torch.bfloat16, requires_grad=True)
    adv = torch.tensor([[1.0, -2.0]])
    out = clipped_surrogate_loss(lp, lp.detach(), adv, torch.ones(1, 2, dtype=torch.bool))
    assert out.token_loss.dtype == torch.float32
    assert out.token_loss.tolist() == [[-1.0, 2.0]]


def test_argument_errors():
    lp, old, adv, mask = setup([1.0], [1.0])
    with pytest.raises(ValueError, match="dual_clip"):
        clipped_surrogate_loss(lp, old, adv, mask, dual_clip=1.0)
    with pytest.raises(ValueError, match="eps_low"):
        clipped_surrogate_loss(lp, old, adv, mask, eps_low=1.5)
    with pytest.raises(ValueError, match="rows"):
        clipped_surrogate_loss(lp, old, torch.tensor([1.0, 2.0]), mask)
    assert POLICY_LOSSES.names() == ["cispo", "clip", "clip_higher", "dual_clip", "gspo"]


def test_cispo_keeps_the_gradient_of_clipped_tokens():
    # d loss / d logp = -min(r, 1 + eps_high) * A: (1.5, +1) is clipped to 1.28 but keeps a
    # gradient (PPO's clip gives 0 there); (0.5, -1) is not clipped
    _, grad, m = loss_and_grad("cispo", [1.5, 0.5], [1.0, -1.0])
    assert grad == pytest.approx([-1.28, 0.5])
    assert m["clip_frac"].item() == pytest.approx(0.5)

"""Advantage estimators against hand-computed values (R13, R14)."""

import math

import pytest
import torch

from rlvr.algo import (
    ADVANTAGE_ESTIMATORS,
    add_reward_noise,
    compute_advantages,
    dr_grpo_advantages,
    grpo_advantages,
    make_group_ids,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
    scale_negative_advantages,
    zero_variance_groups,
)


def t(*xs):
    return torch.tensor(xs, dtype=torch.float32)


def test_grpo_uses_sample_std():
    # mean 0.5; sample std = sqrt(4 * 0.25 / 3) = 0.57735; 0.5 / 0.57735 = 0.866025
    adv = grpo_advantages(t(1, 0, 0, 1), torch.zeros(4, dtype=torch.long))
    expected = 0.5 / math.sqrt(1 / 3)
    assert expected == pytest.approx(0.866025, abs=1e-6)
    torch.testing.assert_close(adv, t(expected, -expected, -expected, expected), atol=1e-5, rtol=0)
    # the population std (0.5) would have given exactly +-1
    assert abs(adv[0].item() - 1.0) > 0.1


def test_grpo_two_groups_with_arbitrary_ids():
    # group 7: [3, 1] -> mean 2, sample std sqrt(2) -> +-0.707107; group 2: [0, 1, 2] ->
    # mean 1, sample std 1 -> [-1, 0, 1]
    rewards = t(3, 0, 1, 1, 2)
    group_ids = torch.tensor([7, 2, 7, 2, 2])
    adv = grpo_advantages(rewards, group_ids, eps=0.0)
    torch.testing.assert_close(adv, t(0.707107, -1, -0.707107, 0, 1), atol=1e-5, rtol=0)


def test_grpo_is_permutation_equivariant():
    rewards = t(1, 0, 0.5, 0, 1, 1)
    group_ids = make_group_ids(2, 3)
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    adv = grpo_advantages(rewards, group_ids)
    torch.testing.assert_close(grpo_advantages(rewards[perm], group_ids[perm]), adv[perm])


def test_zero_variance_groups_get_exactly_zero_and_are_counted():
    # 0.1 three times: the float mean is not exactly 0.1, yet the advantage must be exactly 0.
    rewards = t(0.1, 0.1, 0.1, 1, 0, 1, 1, 1, 1)
    group_ids = make_group_ids(3, 3)
    for name in ADVANTAGE_ESTIMATORS.names():
        adv = compute_advantages(name, rewards, group_ids)
        assert torch.all(adv[:3] == 0.0), name
        assert torch.all(adv[6:] == 0.0), name
        assert torch.all(adv[3:6] != 0.0), name
    zv = zero_variance_groups(rewards, group_ids)
    assert zv.count == 2 and zv.num_groups == 3
    assert zv.mask.tolist() == [True] * 3 + [False] * 3 + [True] * 3


def test_group_of_one_is_zero_variance():
    zv = zero_variance_groups(t(1, 0, 1), torch.tensor([0, 1, 1]))
    assert zv.count == 1 and zv.mask.tolist() == [True, False, False]
    assert rloo_advantages(t(1, 0, 1), torch.tensor([0, 1, 1]))[0].item() == 0.0


def test_std_scale_batch():
    # groups [1, 0] and [0, 0]; batch sample std of [1, 0, 0, 0] = sqrt(0.75 / 3) = 0.5
    adv = grpo_advantages(t(1, 0, 0, 0), make_group_ids(2, 2), std_scale="batch", eps=0.0)
    torch.testing.assert_close(adv, t(1, -1, 0, 0))


def test_std_scale_none_equals_dr_grpo():
    rewards, groups = t(1, 0, 0, 1), make_group_ids(1, 4)
    torch.testing.assert_close(
        grpo_advantages(rewards, groups, std_scale="none"), t(0.5, -0.5, -0.5, 0.5)
    )
    torch.testing.assert_close(dr_grpo_advantages(rewards, groups), t(0.5, -0.5, -0.5, 0.5))


def test_unknown_std_scale_raises():
    with pytest.raises(ValueError, match="std_scale"):
        grpo_advantages(t(1, 0), make_group_ids(1, 2), std_scale="token")


def test_rloo_leave_one_out():
    # A_0 = 1 - (0 + 0 + 0) / 3 = 1; A_1 = 0 - (1 + 0 + 0) / 3 = -1/3
    adv = rloo_advantages(t(1, 0, 0, 0), make_group_ids(1, 4))
    torch.testing.assert_close(adv, t(1, -1 / 3, -1 / 3, -1 / 3))


def test_reinforce_pp_baseline_global_normalisation():
    rewards = t(1, 0, 1, 1, 0, 0, 0, 1)
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2, 2])
    # centred: [.5, -.5, 0, 0, -.25, -.25, -.25, .75]; sum of squares 1.25;
    # sample std over 8 = sqrt(1.25 / 7) = 0.422577
    s = math.sqrt(1.25 / 7)
    expected = t(0.5 / s, -0.5 / s, 0, 0, -0.25 / s, -0.25 / s, -0.25 / s, 0.75 / s)
    torch.testing.assert_close(reinforce_pp_baseline_advantages(rewards, groups, eps=0.0), expected)


def test_outputs_are_fp32_whatever_the_input():
    for dtype in (torch.bfloat16, torch.float64):
        adv = grpo_advantages(torch.tensor([1.0, 0.0], dtype=dtype), make_group_ids(1, 2))
        assert adv.dtype == torch.float32


def test_shape_errors():
    with pytest.raises(ValueError, match="shape mismatch"):
        grpo_advantages(t(1, 0, 1), make_group_ids(1, 2))
    with pytest.raises(ValueError, match="dimension"):
        grpo_advantages(torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.long))


def test_reward_noise_is_seeded_and_breaks_ties():
    rewards = t(1, 1, 1, 1)
    a = add_reward_noise(rewards, 0.01, torch.Generator().manual_seed(3))
    b = add_reward_noise(rewards, 0.01, torch.Generator().manual_seed(3))
    c = add_reward_noise(rewards, 0.01, torch.Generator().manual_seed(4))
    torch.testing.assert_close(a, b)
    assert not torch.equal(a, c)
    assert (a - rewards).abs().max() < 0.1
    assert zero_variance_groups(a, make_group_ids(1, 4)).count == 0
    torch.testing.assert_close(add_reward_noise(rewards, 0.0, torch.Generator()), rewards)
    with pytest.raises(ValueError):
        add_reward_noise(rewards, -1.0, torch.Generator())


def test_registry_lookup_error_suggests_closest():
    with pytest.raises(KeyError, match="did you mean 'rloo'"):
        compute_advantages("rlo", t(1, 0), make_group_ids(1, 2))


def test_scale_negative_advantages_by_hand():
    # One group, R = 1, 0, 0, 0: mean 0.25, sample std sqrt(0.75 / 3) = 0.5, so GRPO gives
    # A = (0.75, -0.25, -0.25, -0.25) / (0.5 + 1e-6); a second, zero-variance group stays 0.
    adv = grpo_advantages(t(1, 0, 0, 0, 1, 1), torch.tensor([0, 0, 0, 0, 1, 1]))
    d = 0.5 + 1e-6
    expected = {1.0: [0.75 / d, -0.25 / d, -0.25 / d, -0.25 / d, 0.0, 0.0],
                0.5: [0.75 / d, -0.125 / d, -0.125 / d, -0.125 / d, 0.0, 0.0],
                0.0: [0.75 / d, 0.0, 0.0, 0.0, 0.0, 0.0],
                2.0: [0.75 / d, -0.5 / d, -0.5 / d, -0.5 / d, 0.0, 0.0]}
    for scale, want in expected.items():
        got = scale_negative_advantages(adv, scale)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, t(*want), atol=1e-6, rtol=0)
    assert scale_negative_advantages(adv, 0.5)[4:].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("scale", [-0.1, float("nan"), float("inf")])
def test_scale_negative_advantages_rejects_bad_scale(scale):
    with pytest.raises(ValueError, match="negative-advantage scale"):
        scale_negative_advantages(t(1.0, -1.0), scale)

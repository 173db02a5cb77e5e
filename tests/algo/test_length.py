"""Length shaping: DAPO overlong punishment, truncation masking, length penalties (R19)."""

import pytest
import torch

from rlvr.algo import (
    concise_correct_bonus,
    inference_length_limit,
    length_penalty,
    make_group_ids,
    mask_truncated,
    overlong_penalty,
)


def test_overlong_penalty_at_the_boundaries():
    # L_max = 20, L_cache = 5: 0 up to 15, linear (15 - |y|) / 5 up to 20, -1 beyond
    lengths = torch.tensor([0, 10, 15, 16, 18, 20, 21, 100])
    out = overlong_penalty(lengths, max_length=20, cache_length=5)
    assert out.dtype == torch.float32
    assert out.tolist() == pytest.approx([0, 0, 0, -0.2, -0.6, -1.0, -1.0, -1.0])


def test_overlong_penalty_without_soft_window():
    out = overlong_penalty(torch.tensor([20, 21]), max_length=20, cache_length=0)
    assert out.tolist() == [0.0, -1.0]
    with pytest.raises(ValueError):
        overlong_penalty(torch.tensor([1]), max_length=20, cache_length=21)


def test_mask_truncated_drops_whole_rows():
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    out = mask_truncated(mask, torch.tensor([False, True]))
    assert out.tolist() == [[True, True, False], [False, False, False]]


def test_linear_length_penalty():
    out = length_penalty(torch.tensor([0, 50, 100]), max_length=100, coef=0.1)
    assert out.tolist() == pytest.approx([0.0, -0.05, -0.1])


def test_concise_correct_bonus_by_hand():
    # group 0: lengths 10, 20, 30 -> lambda 0.5, 0, -0.5; the wrong one keeps min(0, -0.5)
    # group 1: lengths 10 (wrong), 30 (right) -> lambda 0.5, -0.5; wrong & short gets min(0, .5) = 0
    # group 2: equal lengths -> 0
    lengths = torch.tensor([10, 20, 30, 10, 30, 7, 7])
    correct = torch.tensor([True, True, False, False, True, True, False])
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    out = concise_correct_bonus(lengths, correct, groups, coef=0.2)
    assert out.tolist() == pytest.approx([0.1, 0.0, -0.1, 0.0, -0.1, 0.0, 0.0])


def test_inference_length_limit_is_p90_times_1_2():
    # lengths 1..10: P90 (linear interpolation) = 9.1; x 1.2 = 10.92 -> 11
    assert inference_length_limit(list(range(1, 11))) == 11
    assert inference_length_limit([100] * 5) == 120
    with pytest.raises(ValueError):
        inference_length_limit([])


def test_group_ids_helper():
    assert make_group_ids(2, 3).tolist() == [0, 0, 0, 1, 1, 1]

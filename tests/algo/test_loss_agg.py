"""Loss aggregation modes: values and per-token gradient weights."""

import pytest
import torch

from rlvr.algo import LOSS_AGGREGATIONS, aggregate_loss

NAN = float("nan")
# two completions of lengths 3 and 1; padding holds NaN to prove it never leaks
TOKEN_LOSS = [[1.0, 2.0, 3.0, NAN], [4.0, NAN, NAN, NAN]]
MASK = torch.tensor([[True, True, True, False], [True, False, False, False]])


def agg(name, **options):
    x = torch.tensor(TOKEN_LOSS, requires_grad=True)
    value = aggregate_loss(name, x, MASK, **options)
    (grad,) = torch.autograd.grad(value, x)
    return value.item(), grad


def test_values_by_hand():
    assert agg("grpo")[0] == pytest.approx((2.0 + 4.0) / 2)  # mean of per-completion means
    assert agg("bnpo")[0] == pytest.approx(10.0 / 4)  # 4 tokens
    assert agg("dapo")[0] == pytest.approx(10.0 / 4)  # local count by default
    # another rank holds 6 more tokens: global count 10, DDP averages over 2 ranks
    assert agg("dapo", global_token_count=10, world_size=2)[0] == pytest.approx(10.0 * 2 / 10)
    assert agg("dr_grpo", max_completion_length=4)[0] == pytest.approx(10.0 / (2 * 4))


def test_gradient_weights_per_token():
    # grpo: 1 / (N |o_i|): 1/6 for the long completion's tokens, 1/2 for the short one's
    _, g = agg("grpo")
    torch.testing.assert_close(g[0, :3], torch.full((3,), 1 / 6))
    assert g[1, 0].item() == pytest.approx(1 / 2)
    # dr_grpo: the same 1 / (N L_max) for every token, whatever the length
    _, g = agg("dr_grpo", max_completion_length=4)
    torch.testing.assert_close(g[MASK], torch.full((4,), 1 / 8))
    for name in ("bnpo", "dapo"):
        _, g = agg(name)
        torch.testing.assert_close(g[MASK], torch.full((4,), 1 / 4))
    # padding gets exactly zero gradient in every mode
    for name in LOSS_AGGREGATIONS.names():
        _, g = agg(name, max_completion_length=4)
        assert torch.all(g[~MASK] == 0) and torch.isfinite(g).all()


def test_data_parallel_dapo_equals_global_token_mean():
    # split one batch over two "ranks"; averaging their losses must give the global mean
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [5.0, 6.0, 0.0]])
    m = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0]], dtype=torch.bool)
    total = int(m.sum())
    ranks = [
        aggregate_loss("dapo", x[a:b], m[a:b], global_token_count=total, world_size=2)
        for a, b in ((0, 1), (1, 3))
    ]
    assert (sum(ranks) / 2).item() == pytest.approx(x[m].sum().item() / total)


def test_fully_masked_rows_and_batches():
    x = torch.tensor([[1.0, 1.0], [9.0, 9.0]])
    m = torch.tensor([[True, True], [False, False]])
    assert aggregate_loss("grpo", x, m).item() == 1.0  # the empty completion is dropped
    none = torch.zeros(2, 2, dtype=torch.bool)
    for name in ("grpo", "bnpo", "dapo"):
        assert aggregate_loss(name, x, none).item() == 0.0


def test_errors():
    x = torch.zeros(1, 2)
    m = torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="max_completion_length"):
        aggregate_loss("dr_grpo", x, m)
    with pytest.raises(ValueError, match="global_token_count"):
        aggregate_loss("dapo", x, m, global_token_count=0)
    with pytest.raises(ValueError, match="shape mismatch"):
        aggregate_loss("bnpo", x, torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(KeyError, match="seq"):
        aggregate_loss("seq_mean", x, m)

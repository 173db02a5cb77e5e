"""Micro-batches cut by rows and by padded completion tokens (``grpo.micro_batch_tokens``):
hand-worked cuts, and the update that uses them takes the same optimizer step as one
micro-batch (bit for bit when the budget is not reached)."""

import copy

import pytest
import torch

from rlvr.algo.loss_agg import BatchCounts
from rlvr.models.forward import build_sequences
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update
from rlvr.update.loop import _micro_batches
from rlvr.update.micro_batches import micro_batch_slices

PROMPTS = [[11, 12, 13, 14, 15]] * 3 + [[21, 22]] * 3 + [[31, 32, 33]] * 2
LENGTHS = [6, 2, 4, 1, 6, 3, 5, 2]


def test_token_budget_cuts_sorted_rows_by_rows_times_longest():
    # 1+2+2+3 -> 4 rows x 3 = 12 fits; a fifth (4 tokens) makes 5 x 4 = 20 > 12
    # 4, 5 -> 2 x 5 = 10; a third (6) makes 18;  6, 6 -> 12
    assert micro_batch_slices([1, 2, 2, 3, 4, 5, 6, 6], 8, 12) == [
        slice(0, 4), slice(4, 6), slice(6, 8)]


def test_rows_bound_and_a_row_longer_than_the_budget():
    assert micro_batch_slices([1] * 5, 2) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert micro_batch_slices([3, 20, 2], 8, 10) == [slice(0, 1), slice(1, 2), slice(2, 3)]
    assert micro_batch_slices([], 4, 10) == []
    assert micro_batch_slices([5, 5, 5], 8, None) == [slice(0, 3)]


@pytest.mark.parametrize("rows, tokens", [(0, None), (4, 0)])
def test_bad_bounds_raise(rows, tokens):
    with pytest.raises(ValueError, match="must be >= 1"):
        micro_batch_slices([1, 2], rows, tokens)


def test_config_rejects_a_zero_budget():
    with pytest.raises(ValueError, match="micro_batch_tokens"):
        RunConfig.model_validate({"grpo": {"micro_batch_tokens": 0}})


def _config(tokens, size=8):
    return RunConfig.model_validate({
        "model": {"name": "tiny-random", "precision": "fp32"},
        "grpo": {"micro_batch_size": size, "micro_batch_tokens": tokens, "max_new_tokens": 8,
                 "max_grad_norm": 1e3},
        "algo": {"clip_eps": 0.2}})


def _batch():
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(40, 90, (len(PROMPTS), max(LENGTHS)), generator=g)
    mask = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]
    return build_sequences(PROMPTS, ids, mask, 0)


def test_the_update_sorts_then_cuts_only_when_the_budget_binds():
    seqs, backend = _batch(), LocalBackend(torch.nn.Linear(1, 1))
    slices, order = _micro_batches(seqs, 8, _config(12).grpo, backend)
    assert slices == [slice(0, 4), slice(4, 6), slice(6, 8)]
    assert [LENGTHS[i] for i in order.tolist()] == [1, 2, 2, 3, 4, 5, 6, 6]
    # 8 rows x 6 = 48 tokens fit: one micro-batch in group order, as without a budget
    assert _micro_batches(seqs, 8, _config(48).grpo, backend) == ([slice(0, 8)], None)


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()


def _step(model, tokens, micro_batches=None):
    seqs = _batch()
    adv = torch.tensor([1.0, -0.5, 0.25, -1.0, 0.75, 0.5, -0.25, 1.5])
    old = -torch.rand(seqs.completion_mask.shape, generator=torch.Generator().manual_seed(2))
    policy = copy.deepcopy(model)
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    counts = BatchCounts(rows=len(PROMPTS), tokens=int(seqs.loss_mask.sum()))
    metrics = policy_update(LocalBackend(policy), opt, seqs, adv, old, _config(tokens), counts,
                            bf16=False)
    assert micro_batches is None or metrics["micro_batches"] == micro_batches
    return torch.cat([p.detach().flatten() for p in policy.parameters()])


def test_budgeted_update_takes_the_one_micro_batch_step(model):
    whole = _step(model, None, micro_batches=1)
    start = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert float((whole - start).abs().max()) > 1e-3  # the step did something
    torch.testing.assert_close(_step(model, 12, micro_batches=3), whole, rtol=1e-4, atol=1e-6)
    assert torch.equal(_step(model, 48, micro_batches=1), whole)  # budget not reached: bit for bit

"""The step-level shared prefix (each distinct prompt encoded once per optimizer step, its
gradient pushed through once after the micro-batches) gives the plain forward's log-probs and
gradient, and the update that uses it (rows sorted by length, micro-batches mixing groups)
takes the same optimizer step as the plain per-row update."""

import copy

import pytest
import torch

from rlvr.algo.loss_agg import BatchCounts
from rlvr.models.forward import build_sequences, completion_log_probs
from rlvr.models.step_prefix import StepPrefix
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update

PROMPTS = [[11, 12, 13, 14, 15]] * 3 + [[21, 22]] * 3 + [[31, 32, 33]] * 2
# the same after an 18-token system message: the common prefix is encoded once
SYSTEM = list(range(60, 78))
SYSTEM_PROMPTS = [SYSTEM + p for p in PROMPTS]
LENGTHS = [6, 2, 4, 1, 6, 3, 5, 2]


@pytest.fixture()
def model():
    torch.manual_seed(0)
    return tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()


def _batch(prompts=PROMPTS):
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(40, 90, (len(prompts), max(LENGTHS)), generator=g)
    mask = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]
    return build_sequences(prompts, ids, mask, 0)


def _grads(model):
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("prompts", [PROMPTS, SYSTEM_PROMPTS], ids=["distinct", "system"])
def test_log_probs_and_gradient_equal_the_plain_forward(model, prompts):
    seqs = _batch(prompts)
    weights = torch.linspace(-1.0, 1.0, len(PROMPTS))[:, None]  # a loss that weights rows
    model.zero_grad()
    plain = completion_log_probs(model, seqs, bf16=False, temperature=0.7)
    (plain * weights * seqs.completion_mask).sum().backward()
    want = _grads(model)

    model.zero_grad()
    prefix = StepPrefix(model, seqs.prompts, bf16=False, chunk=2)
    assert len(prefix.index) == 3  # three distinct prompts, encoded once
    # with a system message: cache rows [system | padding | rest], the system part once
    assert bool(prefix.mask[:, :len(SYSTEM)].all()) == (prompts is SYSTEM_PROMPTS)
    got = torch.zeros_like(plain)
    # micro-batches that cut across groups, in a shuffled row order
    for rows in (torch.tensor([7, 0, 4]), torch.tensor([2, 5]), torch.tensor([1, 3, 6])):
        micro = seqs.rows(rows).trimmed()
        logp = prefix.log_probs(model, micro, temperature=0.7)
        (logp * weights[rows] * micro.completion_mask).sum().backward()
        got[rows, :logp.shape[1]] = logp.detach()
    prefix.backward()
    mask = seqs.completion_mask
    torch.testing.assert_close(got[mask], plain.detach()[mask], rtol=0, atol=1e-5)
    for g_plain, g_step in zip(want, _grads(model)):
        torch.testing.assert_close(g_step, g_plain, rtol=1e-4, atol=1e-6)


def test_without_the_prompt_backward_the_gradient_misses_the_prompt_part(model):
    """Control: the leaves really carry the prompt part (a prefix that forgot its backward
    would give a different gradient, so the equality above is not vacuous)."""
    seqs = _batch()
    model.zero_grad()
    (completion_log_probs(model, seqs, bf16=False) * seqs.completion_mask).sum().backward()
    want = _grads(model)
    model.zero_grad()
    prefix = StepPrefix(model, seqs.prompts, bf16=False)
    (prefix.log_probs(model, seqs) * seqs.completion_mask).sum().backward()
    partial = _grads(model)
    assert max(float((a - b).abs().max()) for a, b in zip(want, partial)) > 1e-4
    prefix.backward()
    for a, b in zip(want, _grads(model)):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("prompts", [PROMPTS, SYSTEM_PROMPTS], ids=["distinct", "system"])
@pytest.mark.parametrize("loss_agg", ["grpo", "dapo"])
def test_update_with_the_step_prefix_takes_the_plain_updates_step(model, loss_agg, prompts):
    seqs = _batch(prompts)
    adv = torch.tensor([1.0, -0.5, 0.25, -1.0, 0.75, 0.5, -0.25, 1.5])
    old = -torch.rand(seqs.completion_mask.shape, generator=torch.Generator().manual_seed(2))
    params = []
    for shared in (False, True):
        config = RunConfig.model_validate({
            "model": {"name": "tiny-random", "precision": "fp32"},
            "grpo": {"micro_batch_size": 3, "max_new_tokens": 8, "max_grad_norm": 1e3,
                     "shared_prefix": shared},
            "algo": {"clip_eps": 0.2, "loss_agg": loss_agg}})
        policy = copy.deepcopy(model)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        counts = BatchCounts(rows=len(PROMPTS), tokens=int(seqs.loss_mask.sum()))
        policy_update(LocalBackend(policy), opt, seqs, adv, old, config, counts, bf16=False)
        params.append(torch.cat([p.detach().flatten() for p in policy.parameters()]))
    now = torch.cat([p.detach().flatten() for p in model.parameters()])
    moved = float((params[0] - now).abs().max())
    assert moved > 1e-3  # the step did something
    torch.testing.assert_close(params[1], params[0], rtol=1e-4, atol=1e-6)


def test_step_prefix_update_is_bitwise_repeatable(model):
    seqs = _batch()
    config = RunConfig.model_validate({
        "model": {"name": "tiny-random", "precision": "fp32"},
        "grpo": {"micro_batch_size": 3, "max_new_tokens": 8}})
    runs = []
    for _ in range(2):
        policy = copy.deepcopy(model)
        opt = torch.optim.SGD(policy.parameters(), lr=0.5)
        policy_update(LocalBackend(policy), opt, seqs, torch.linspace(-1, 1, 8), None, config,
                      BatchCounts(8, int(seqs.loss_mask.sum())), bf16=True)
        runs.append(torch.cat([p.detach().flatten() for p in policy.parameters()]))
    assert torch.equal(runs[0], runs[1])

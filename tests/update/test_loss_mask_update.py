"""The policy update trains only a multi-turn episode's sampled tokens: the loss mask keeps the
inserted observation tokens out of the policy loss and the KL term, so their old / reference
log-probs do not change the step, while an assistant token's do; without a loss mask the update
is the single-turn one (the completion mask)."""


import torch

from rlvr.algo.loss_agg import BatchCounts
from rlvr.models.forward import build_sequences
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update

CONFIG = RunConfig.model_validate({
    "model": {"name": "tiny-random", "precision": "fp32"},
    "grpo": {"micro_batch_size": 2, "max_new_tokens": 8, "max_grad_norm": 1e3},
    "algo": {"kl_coef": 0.1, "clip_eps": 0.2, "loss_agg": "dapo"},
})


def _batch(loss_mask=True):
    tok = tiny_tokenizer()
    prompts = [tok(t).input_ids for t in ("1+2=", "12*3-4=", "7=", "99-100+1=")]
    ids = torch.randint(4, len(tok), (4, 8), generator=torch.Generator().manual_seed(5))
    mask = torch.arange(8)[None, :] < torch.tensor([8, 6, 8, 5])[:, None]
    loss = mask.clone()
    loss[:, 2:5] = False  # an observation inserted after a 2-token turn
    return build_sequences(prompts, ids, mask, tok.pad_token_id,
                           loss if loss_mask else None), ~loss & mask


def _step(seqs, old, ref):
    torch.manual_seed(0)
    policy = tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    counts = BatchCounts(rows=4, tokens=int(seqs.loss_mask.sum()))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    metrics = policy_update(LocalBackend(policy), opt, seqs, adv, old, CONFIG, counts,
                            ref_log_probs=ref, kl_coef=0.1, bf16=False)
    return torch.cat([p.detach().flatten() for p in policy.parameters()]), metrics


def _log_probs(seed):
    return -torch.rand((4, 8), generator=torch.Generator().manual_seed(seed)) - 0.5


def test_observation_log_probs_do_not_change_the_step():
    seqs, observation = _batch()
    old, ref = _log_probs(1), _log_probs(2)
    base, metrics = _step(seqs, old, ref)
    moved_old = old.where(~observation, old - 3.0)
    moved_ref = ref.where(~observation, ref + 2.0)
    same, same_metrics = _step(seqs, moved_old, moved_ref)
    torch.testing.assert_close(same, base, atol=0, rtol=0)
    assert same_metrics["kl"] == metrics["kl"]
    # control: an assistant token's old log-prob does change it
    touched = old.clone()
    touched[0, 0] -= 3.0
    changed, _ = _step(seqs, touched, ref)
    assert (changed - base).abs().max() > 1e-6


def test_without_a_loss_mask_observation_tokens_are_trained():
    seqs, observation = _batch(loss_mask=False)
    assert torch.equal(seqs.loss_mask, seqs.completion_mask)
    old, ref = _log_probs(1), _log_probs(2)
    base, _ = _step(seqs, old, ref)
    moved, _ = _step(seqs, old.where(~observation, old - 3.0), ref)
    assert (moved - base).abs().max() > 1e-6

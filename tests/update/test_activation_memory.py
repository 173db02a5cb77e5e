"""Activation checkpointing and the chunked LM head compute what the plain update computes."""

from __future__ import annotations

import pytest
import torch

from rlvr.algo.logprobs import token_log_probs, token_log_probs_and_entropy
from rlvr.algo.loss_agg import BatchCounts
from rlvr.models.activation_memory import checkpoint_layers, decoder_layers, head_log_probs
from rlvr.models.forward import build_sequences, completion_log_probs
from rlvr.models.tiny import spread_weights, tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update


@pytest.mark.parametrize("chunk", [1, 3, 10, 100])
@pytest.mark.parametrize("entropy", [None, "grad"])
def test_head_log_probs_equal_the_whole_head(chunk, entropy):
    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(8, 50, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(50, 8, generator=g))
    hidden = torch.randn(2, 5, 8, generator=g, requires_grad=True)
    ids = torch.randint(0, 50, (2, 5), generator=g)
    weights = torch.randn(2, 5, generator=g)

    def loss_of(out):
        logp, ent = out if entropy else (out, torch.zeros(()))
        return (logp * weights).sum() + 0.1 * ent.sum(), logp, ent

    logits = head(hidden)
    reference = token_log_probs(logits, ids, temperature=0.7)
    ref_out = (token_log_probs_and_entropy(logits, ids, temperature=0.7, entropy=entropy)
               if entropy else reference)
    ref_loss, ref_logp, ref_ent = loss_of(ref_out)
    ref_grads = torch.autograd.grad(ref_loss, [hidden, head.weight])
    loss, logp, ent = loss_of(head_log_probs(hidden, head, ids, temperature=0.7,
                                             entropy=entropy, chunk_tokens=chunk))
    grads = torch.autograd.grad(loss, [hidden, head.weight])
    torch.testing.assert_close(logp, ref_logp, rtol=0, atol=2e-6)
    torch.testing.assert_close(ent, ref_ent, rtol=0, atol=2e-6)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_head_log_probs_refuses_bad_arguments():
    head, hidden, ids = torch.nn.Linear(4, 6), torch.zeros(1, 2, 4), torch.zeros(1, 2).long()
    with pytest.raises(ValueError, match="logprob_chunk_tokens must be >= 1"):
        head_log_probs(hidden, head, ids, chunk_tokens=0)
    with pytest.raises(ValueError, match="does not align"):
        head_log_probs(hidden, head, torch.zeros(1, 3).long())
    with pytest.raises(ValueError, match="entropy"):
        head_log_probs(hidden, head, ids, entropy="yes")


def _rows(tokenizer):
    g = torch.Generator().manual_seed(0)
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]]
    ids = torch.randint(4, len(tokenizer), (6, 9), generator=g)
    lengths = torch.tensor([9, 3, 5, 7, 2, 9])
    mask = torch.arange(9)[None] < lengths[:, None]
    return build_sequences([prompts[i // 3] for i in range(6)], ids, mask,
                           tokenizer.pad_token_id)


def _update(tokenizer, **grpo):
    model = spread_weights(tiny_model(tokenizer, hidden_size=64, layers=2), std=0.1)
    seqs = _rows(tokenizer)
    config = RunConfig.model_validate({"grpo": {"micro_batch_size": 2, **grpo},
                                       "algo": {"entropy_coef": 0.01}})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    metrics = policy_update(LocalBackend(model), optimizer, seqs, torch.linspace(-1, 1, 6),
                            None, config, BatchCounts(6, int(seqs.completion_mask.sum())),
                            bf16=False)
    return model, metrics


@pytest.mark.parametrize("mode", ["step", "micro_batch", "off"])
def test_update_with_memory_savers_equals_the_plain_update(mode):
    tokenizer = tiny_tokenizer()
    plain, plain_metrics = _update(tokenizer, shared_prefix=mode)
    checkpointed, ck_metrics = _update(tokenizer, shared_prefix=mode,
                                       activation_checkpointing=True)
    # the same ops in the same order, replayed: the same bits
    for a, b in zip(plain.parameters(), checkpointed.parameters()):
        assert torch.equal(a, b)
    assert ck_metrics["grad_norm"] == plain_metrics["grad_norm"]
    both, both_metrics = _update(tokenizer, shared_prefix=mode, activation_checkpointing=True,
                                 logprob_chunk_tokens=4)
    for a, b in zip(plain.parameters(), both.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert both_metrics["grad_norm"] == pytest.approx(plain_metrics["grad_norm"], rel=1e-5)
    assert both_metrics["entropy"] == pytest.approx(plain_metrics["entropy"], rel=1e-5)
    # the layers run plainly again after the update
    assert all("forward" not in vars(layer) for layer in decoder_layers(both))


def _saved_bytes(model, seqs, **options) -> int:
    saved = 0

    def pack(t):
        nonlocal saved
        saved += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        completion_log_probs(model, seqs, bf16=False, **options)
    return saved


def test_checkpointing_and_chunks_save_fewer_activations():
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, hidden_size=64, layers=2)
    seqs = _rows(tokenizer)
    plain = _saved_bytes(model, seqs)
    restore = checkpoint_layers(model)
    try:
        checkpointed = _saved_bytes(model, seqs)
    finally:
        restore()
    chunked = _saved_bytes(model, seqs, chunk_tokens=4)
    # per layer only its input [6, 16, 64] fp32 is kept by the checkpoint (plus the head's
    # logits, [6, 10, 100]): far below the ~20 tensors per layer of the plain forward
    assert checkpointed < plain / 2
    logits = 6 * 10 * 100 * 4
    assert chunked < plain - logits  # the [n, T, V] logits and log-softmax are not kept

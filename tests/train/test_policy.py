"""Policy forward passes: prompt and padding tokens are masked out of completion log-probs,
and the shared-prefix path equals the plain one (values and gradients)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.models.forward import build_sequences, completion_log_probs  # noqa: E402

PAD = 0


@pytest.fixture(scope="module")
def model():
    m, _ = load_model_and_tokenizer(TINY_RANDOM, seed=5)
    return m.eval()


def _batch(prompts, completions, lengths):
    width = max(len(c) for c in completions)
    ids = torch.full((len(completions), width), 7, dtype=torch.long)
    mask = torch.zeros((len(completions), width), dtype=torch.bool)
    for i, (c, n) in enumerate(zip(completions, lengths)):
        ids[i, :len(c)] = torch.tensor(c)
        mask[i, :n] = True
    return build_sequences(prompts, ids, mask, PAD)


def test_layout_left_pads_prompts_and_counts_positions_over_real_tokens():
    b = _batch([[11, 12, 13], [21]], [[31, 32], [41, 42]], [2, 1])
    assert b.input_ids.tolist() == [[11, 12, 13, 31, 32], [PAD, PAD, 21, 41, PAD]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 0]]
    assert b.position_ids[0].tolist() == [0, 1, 2, 3, 4]
    assert b.position_ids[1, 2:4].tolist() == [0, 1]
    assert b.completion_mask.tolist() == [[True, True], [True, False]]


def test_padding_and_batch_neighbours_do_not_change_a_rows_log_probs(model):
    alone = completion_log_probs(model, _batch([[21, 22]], [[41, 42, 43]], [3]), bf16=False)
    # Same row next to a longer prompt (more left padding) and a shorter completion (right
    # padding, whose ids are garbage): its real-token log-probs must not move.
    mixed = completion_log_probs(
        model, _batch([[11, 12, 13, 14, 15, 16], [21, 22]], [[31, 99, 98], [41, 42, 43]],
                      [1, 3]), bf16=False)
    torch.testing.assert_close(mixed[1], alone[0], rtol=0, atol=1e-5)
    # Hand check of row 0, token 0: the log-softmax of the logits after the prompt.
    logits = model(input_ids=torch.tensor([[11, 12, 13, 14, 15, 16]])).logits[0, -1]
    torch.testing.assert_close(mixed[0, 0], torch.log_softmax(logits, -1)[31], rtol=0, atol=1e-5)


def test_shared_prefix_matches_plain_forward_in_values_and_gradients(model):
    prompts = [[11, 12, 13, 14, 15]] * 3 + [[21, 22]] * 2 + [[31, 32, 33]]
    completions = [[41, 42, 43, 44], [45, 46, 47, 48], [49, 50, 51, 52], [53, 54, 55, 56],
                   [57, 58, 59, 60], [61, 62, 63, 64]]
    b = _batch(prompts, completions, [4, 2, 3, 4, 1, 4])
    mask = b.completion_mask
    grads, logps = [], []
    for shared in (False, True):
        model.zero_grad()
        logp = completion_log_probs(model, b, bf16=False, shared_prefix=shared, temperature=0.7)
        (logp * mask).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        logps.append(logp.detach())
    plain, shared_logp = logps
    torch.testing.assert_close(shared_logp[mask], plain[mask], rtol=0, atol=1e-5)
    for g_plain, g_shared in zip(*grads):
        torch.testing.assert_close(g_shared, g_plain, rtol=1e-4, atol=1e-5)


def test_shared_prefix_gradients_are_bitwise_repeatable(model):
    """Same-seed runs must give the same numbers: the shared path's gather has a fixed-order
    backward (no accumulating scatter)."""
    prompts = [[11, 12, 13]] * 4 + [[21, 22, 23, 24]] * 4
    b = _batch(prompts, [[40 + i, 50 + i, 60 + i] for i in range(8)], [3] * 8)
    runs = []
    for _ in range(3):
        model.zero_grad()
        completion_log_probs(model, b, bf16=True, shared_prefix=True).sum().backward()
        runs.append([p.grad.clone() for p in model.parameters()])
    for other in runs[1:]:
        assert all(torch.equal(a, c) for a, c in zip(runs[0], other))

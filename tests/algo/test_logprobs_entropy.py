"""Per-token log-probs, entropy and completion masks."""

import math

import pytest
import torch

from rlvr.algo import (
    completion_mask,
    lengths_to_mask,
    mask_after_eos,
    next_token_log_probs,
    token_entropy,
    token_log_probs,
    token_log_probs_and_entropy,
)

LN3 = math.log(3.0)


def test_token_log_probs_by_hand():
    # logits [0, ln 3] -> p = [0.25, 0.75]
    logits = torch.tensor([[[0.0, LN3], [0.0, LN3]]])
    out = token_log_probs(logits, torch.tensor([[1, 0]]))
    assert out.tolist()[0] == pytest.approx([math.log(0.75), math.log(0.25)], abs=1e-6)
    # temperature 2: logits [0, ln3 / 2] -> p1 = sqrt3 / (1 + sqrt3) = 0.633975
    out = token_log_probs(logits, torch.tensor([[1, 1]]), temperature=2.0)
    assert out[0, 0].item() == pytest.approx(math.log(math.sqrt(3) / (1 + math.sqrt(3))), abs=1e-6)


def test_token_log_probs_chunking_and_dtype():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 7, generator=g)
    ids = torch.randint(0, 7, (2, 5), generator=g)
    a = logits.clone().requires_grad_(True)
    b = logits.clone().requires_grad_(True)
    full = token_log_probs(a, ids)
    chunked = token_log_probs(b, ids, chunk_bytes=4 * 7 * 3)  # 3 positions per chunk
    torch.testing.assert_close(full, chunked)
    ga, gb = torch.autograd.grad(full.sum(), a)[0], torch.autograd.grad(chunked.sum(), b)[0]
    torch.testing.assert_close(ga, gb)
    reference = torch.log_softmax(logits.double(), -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(full.double(), reference, atol=1e-6, rtol=0)
    assert token_log_probs(logits.bfloat16(), ids).dtype == torch.float32


def test_next_token_log_probs_shifts_by_one():
    logits = torch.tensor([[[0.0, LN3], [LN3, 0.0], [5.0, 5.0]]])
    ids = torch.tensor([[0, 1, 1]])
    out = next_token_log_probs(logits, ids)
    # position 0 scores ids[1] = 1 under [0, ln3]; position 1 scores ids[2] = 1 under [ln3, 0]
    assert out.shape == (1, 2)
    assert out.tolist()[0] == pytest.approx([math.log(0.75), math.log(0.25)], abs=1e-6)


def test_entropy_by_hand_and_chunked():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, LN3, -1e4, -1e4]]])
    out = token_entropy(logits)
    # uniform over 4: ln 4 = 1.386294; [0.25, 0.75]: 0.562335
    expected = [math.log(4), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]
    assert out.tolist()[0] == pytest.approx(expected, abs=1e-5)
    torch.testing.assert_close(token_entropy(logits, chunk_bytes=1), out)
    assert token_entropy(logits.bfloat16()).dtype == torch.float32
    # temperature -> infinity approaches uniform
    assert token_entropy(logits, temperature=1e6)[0, 1].item() == pytest.approx(
        math.log(4), abs=1e-3
    )


def test_log_probs_and_entropy_by_hand():
    # logits [0, ln 3] -> p = [1/4, 3/4]: H = -(1/4 ln 1/4 + 3/4 ln 3/4) = ln 4 - 3/4 ln 3
    logits = torch.tensor([[[0.0, LN3], [0.0, LN3]]])
    logp, h = token_log_probs_and_entropy(logits, torch.tensor([[1, 0]]))
    assert logp.tolist()[0] == pytest.approx([math.log(0.75), math.log(0.25)], abs=1e-6)
    assert h.tolist()[0] == pytest.approx([math.log(4) - 0.75 * LN3] * 2, abs=1e-6)
    # temperature 2: p1 = sqrt3 / (1 + sqrt3)
    p1 = math.sqrt(3) / (1 + math.sqrt(3))
    _, h = token_log_probs_and_entropy(logits, torch.tensor([[1, 1]]), temperature=2.0)
    expected = -(p1 * math.log(p1) + (1 - p1) * math.log(1 - p1))
    assert h.tolist()[0] == pytest.approx([expected] * 2, abs=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_log_probs_and_entropy_match_float64_reference(temperature):
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 4, 50, generator=g) * 3
    ids = torch.randint(0, 50, (3, 4), generator=g)
    z = logits.double() / temperature
    ref_p = torch.softmax(z, -1)
    ref_h = -(ref_p * torch.log_softmax(z, -1)).sum(-1)
    ref_logp = torch.log_softmax(z, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    x = logits.clone().requires_grad_(True)
    logp, h = token_log_probs_and_entropy(x, ids, temperature=temperature, entropy="grad",
                                          chunk_bytes=4 * 50 * 5)  # 5 positions per chunk
    torch.testing.assert_close(logp.double(), ref_logp, atol=1e-5, rtol=0)
    torch.testing.assert_close(h.double(), ref_h, atol=1e-5, rtol=0)
    # dH/dz_v = -p_v (log p_v + H) / tau, summed over positions
    grad = torch.autograd.grad(h.sum(), x)[0]
    expected = -ref_p * (torch.log_softmax(z, -1) + ref_h.unsqueeze(-1)) / temperature
    torch.testing.assert_close(grad.double(), expected, atol=1e-5, rtol=0)
    # detached: the log-probs carry the gradient, the entropy none
    logp, h = token_log_probs_and_entropy(x, ids, temperature=temperature)
    assert logp.requires_grad and not h.requires_grad


def test_log_probs_and_entropy_refuse_bad_input():
    logits, ids = torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="entropy must be"):
        token_log_probs_and_entropy(logits, ids, entropy="none")
    with pytest.raises(ValueError, match="temperature"):
        token_log_probs_and_entropy(logits, ids, temperature=0.0)
    with pytest.raises(ValueError, match="do not align"):
        token_log_probs_and_entropy(logits, ids[:, :1])


def test_completion_mask_excludes_prompt_and_padding():
    # left-padded prompt block of width 3, then completions right-padded
    attention = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    out = completion_mask(attention, 3)
    assert out.tolist() == [
        [False, False, False, True, True, False],
        [False, False, False, True, True, True],
    ]
    # per-row prompt lengths (right padding)
    out = completion_mask(attention.new_ones(2, 4), torch.tensor([1, 3]))
    assert out.tolist() == [[False, True, True, True], [False, False, False, True]]


def test_mask_after_eos_keeps_the_first_eos():
    ids = torch.tensor([[5, 6, 2, 2, 0], [5, 5, 5, 5, 5], [9, 3, 4, 3, 2]])
    assert mask_after_eos(ids, 2).int().tolist() == [
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1],
    ]
    assert mask_after_eos(ids, [2, 3]).int().tolist()[2] == [1, 1, 0, 0, 0]


def test_lengths_to_mask():
    assert lengths_to_mask(torch.tensor([0, 2, 3]), 3).int().tolist() == [
        [0, 0, 0],
        [1, 1, 0],
        [1, 1, 1],
    ]

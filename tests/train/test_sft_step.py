"""The SFT loss: mean NLL of the answer tokens, whatever the padding and prompt lengths."""

import pytest

torch = pytest.importorskip("torch")

from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.train.sft import _step  # noqa: E402


@pytest.fixture(scope="module")
def model():
    model, _ = load_model_and_tokenizer(TINY_RANDOM, seed=0)
    return model.eval()


def _row_nll(model, ids: list[int], labels: list[int]) -> tuple[float, int]:
    """Summed NLL of the labelled tokens of one unpadded row, from a full forward pass."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    total, count = 0.0, 0
    for t in range(1, len(ids)):
        if labels[t] != -100:
            total -= float(logp[t - 1, labels[t]])
            count += 1
    return total, count


def test_sft_loss_is_the_mean_answer_nll_of_unpadded_rows(model):
    batch = []
    for prompt_len, answer_len, seed in [(7, 3, 0), (2, 5, 1), (11, 1, 2)]:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, 100, (prompt_len + answer_len,), generator=g).tolist()
        batch.append((ids, [-100] * prompt_len + ids[prompt_len:]))
    with torch.no_grad():
        loss = float(_step(model, batch, pad_id=0, bf16=False))
    rows = [_row_nll(model, ids, labels) for ids, labels in batch]
    expected = sum(t for t, _ in rows) / sum(c for _, c in rows)
    assert loss == pytest.approx(expected, rel=1e-5)


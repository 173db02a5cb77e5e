"""The SFT loss: mean NLL of the answer tokens, whatever the padding and prompt lengths."""

import pytest

torch = pytest.importorskip("torch")

from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.models.common_prefix import MIN_SHARED_PREFILL  # noqa: E402
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



def _chat_like_batch(shared: int = 20):
    """Rows that open with the same ``shared`` tokens (a system message), then prompts and
    answers of different lengths; the last row's answer has an unlabelled span in the middle
    (a multi-turn demonstration's tool output)."""
    g = torch.Generator().manual_seed(5)
    system = torch.randint(3, 100, (shared,), generator=g).tolist()
    batch = []
    for rest, answer in [(4, 3), (9, 6), (1, 2), (6, 5)]:
        prompt = system + torch.randint(3, 100, (rest,), generator=g).tolist()
        reply = torch.randint(3, 100, (answer,), generator=g).tolist()
        batch.append((prompt + reply, [-100] * len(prompt) + reply))
    ids, labels = batch[-1]
    batch[-1] = (ids, labels[:-4] + [-100, -100] + labels[-2:])
    return batch


def test_shared_prefix_sft_loss_is_the_mean_answer_nll_of_unpadded_rows(model):
    batch = _chat_like_batch()
    with torch.no_grad():
        loss = float(_step(model, batch, pad_id=0, bf16=False))
    rows = [_row_nll(model, ids, labels) for ids, labels in batch]
    assert loss == pytest.approx(sum(t for t, _ in rows) / sum(c for _, c in rows), rel=1e-5)


def _embedded_tokens(model, batch, shared_prefix: bool) -> int:
    """Tokens (padding included) that pass the embedding during one loss and backward."""
    counted = []
    hook = model.get_input_embeddings().register_forward_hook(
        lambda _module, args, _out: counted.append(args[0].numel()))
    try:
        _step(model, batch, 0, False, shared_prefix).backward()
    finally:
        hook.remove()
    model.zero_grad(set_to_none=True)
    return sum(counted)


def test_shared_prefix_sft_runs_the_common_prefix_once(model):
    batch = _chat_like_batch(shared=20)
    width = max(len(ids) for ids, _ in batch)  # 20 + 9 + 6: the longest prompt and answer
    assert width == 35
    # the prefix once (20 tokens), then every row's rest padded to width - 20
    assert _embedded_tokens(model, batch, True) == 20 + 4 * (width - 20)
    assert _embedded_tokens(model, batch, False) == 4 * width


def test_shared_prefix_sft_gradient_is_the_plain_forwards(model):
    batch = _chat_like_batch()
    grads = []
    for shared_prefix in (True, False):
        model.zero_grad(set_to_none=True)
        _step(model, batch, 0, False, shared_prefix).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    model.zero_grad(set_to_none=True)
    for name, plain in grads[1].items():
        torch.testing.assert_close(grads[0][name], plain, rtol=1e-4, atol=1e-6, msg=name)


def test_short_common_prefix_runs_rows_whole(model):
    batch = _chat_like_batch(shared=MIN_SHARED_PREFILL - 1)
    assert _embedded_tokens(model, batch, True) == _embedded_tokens(model, batch, False)


def test_a_prompt_that_is_all_prefix_keeps_its_last_token_out_of_the_cache(model):
    """The last prompt token's logits predict the first answer token: a row whose prompt is
    the common prefix itself shares all but that token."""
    batch = _chat_like_batch(shared=20)
    ids, labels = batch[0]
    batch.append((ids[:20] + [7, 8], [-100] * 20 + [7, 8]))
    width = max(len(i) for i, _ in batch)
    assert _embedded_tokens(model, batch, True) == 19 + 5 * (width - 19)
    with torch.no_grad():
        loss = float(_step(model, batch, pad_id=0, bf16=False))
    rows = [_row_nll(model, i, y) for i, y in batch]
    assert loss == pytest.approx(sum(t for t, _ in rows) / sum(c for _, c in rows), rel=1e-5)

"""Model loading: the tiny random model and its tokenizer (the default model is exercised by
the slow tests and the training run)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.models.loader import ModelLoadError  # noqa: E402


def test_tiny_tokenizer_round_trips_text_and_has_chat_template():
    _, tok = load_model_and_tokenizer(TINY_RANDOM)
    text = "12 + 3 = 15\n#### 15"
    ids = tok(text).input_ids
    assert len(ids) == len(text)  # one token per character
    assert tok.decode(ids) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}],
                                     add_generation_prompt=True, tokenize=False)
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tiny_model_is_deterministic_by_seed():
    a, tok = load_model_and_tokenizer(TINY_RANDOM, seed=1)
    b, _ = load_model_and_tokenizer(TINY_RANDOM, seed=1)
    c, _ = load_model_and_tokenizer(TINY_RANDOM, seed=2)
    ids = torch.tensor([tok("1+1=2").input_ids])
    assert torch.equal(a(ids).logits, b(ids).logits)
    assert not torch.equal(a(ids).logits, c(ids).logits)
    assert a(ids).logits.shape == (1, 5, len(tok))


def test_missing_model_path_raises_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="does not load"):
        load_model_and_tokenizer(str(tmp_path / "no-such-model"))

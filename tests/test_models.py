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
    # it read "Repo id must be in the form 'repo_name' or ..." (the hub's
    # answer to a path it cannot take for a repo id)
    for name in (str(tmp_path / "no-such-model"), "runs/x/sft_model", "./sft_model"):
        with pytest.raises(ModelLoadError) as err:
            load_model_and_tokenizer(name)
        assert str(err.value) == f"model path {name} does not exist"


def test_a_directory_without_a_model_names_the_models_of_a_run_in_it(tmp_path):
    # a run directory given as --model failed with transformers' advice to
    # install sentencepiece / tiktoken
    run = tmp_path / "run"
    for sub in ("sft_model", "checkpoints/step-000002", "checkpoints/step-000010",
                "checkpoints/step-000011"):
        (run / sub).mkdir(parents=True)
    for sub in ("sft_model", "checkpoints/step-000002", "checkpoints/step-000010"):
        (run / sub / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError) as err:
        load_model_and_tokenizer(str(run))
    assert str(err.value) == (f"model path {run} holds no model (no config.json or "
                              f"adapter_config.json); did you mean {run / 'sft_model'} or "
                              f"{run / 'checkpoints' / 'step-000010'}?")
    from rlvr.models.loader import missing_model_path

    assert missing_model_path(str(run / "sft_model")) is None
    assert missing_model_path(str(tmp_path)).endswith("(no config.json or adapter_config.json)")


def test_only_names_that_cannot_be_hub_ids_are_taken_for_paths():
    from rlvr.models.loader import looks_like_path, missing_model_path

    assert [looks_like_path(n) for n in ("/abs/model", "./m", "../m", "~/m", "runs/a/b", "m/",
                                         "HuggingFaceTB/SmolLM2-135M", "gpt2", TINY_RANDOM)] \
        == [True, True, True, True, True, True, False, False, False]
    assert missing_model_path("HuggingFaceTB/SmolLM2-135M") is None  # the hub's to answer
    assert missing_model_path(TINY_RANDOM) is None


def test_a_cached_conversion_that_kept_the_gguf_marker_is_redone(tmp_path):
    """A de-quantised cache whose config still says GGUF would make every fine-tuned copy
    refuse save_pretrained; the loader treats it as stale and converts again."""
    import json

    from rlvr.models.loader import _stale

    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "quantization_config": {"quant_method": "gguf"}}))
    assert _stale(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not _stale(tmp_path)
    assert _stale(tmp_path / "missing")


@pytest.mark.slow
def test_default_model_loads_from_the_embedded_gguf_and_round_trips_through_save(tmp_path):
    from rlvr.models import DEFAULT_MODEL

    model, tok = load_model_and_tokenizer(DEFAULT_MODEL)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert "<|im_start|>" in tok.apply_chat_template([{"role": "user", "content": "hi"}],
                                                     tokenize=False)
    model.save_pretrained(tmp_path, safe_serialization=True)  # refused for GGUF-marked models
    tok.save_pretrained(tmp_path)
    again, _ = load_model_and_tokenizer(str(tmp_path))
    ids = torch.tensor([tok("12 + 30 = 42").input_ids])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)


def test_saving_and_loading_print_no_progress_bars(tmp_path, capfd):
    """transformers' "Writing model shards" / "Loading weights" tqdm bars are off during
    rlvr's saves and loads (every checkpoint), and back on afterwards."""
    from transformers.utils import logging as hf_logging

    from rlvr.models.loader import save_model

    model, tok = load_model_and_tokenizer(TINY_RANDOM)
    hf_logging.enable_progress_bar()
    capfd.readouterr()
    save_model(tmp_path / "m", model, tok)
    load_model_and_tokenizer(str(tmp_path / "m"))
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err and "it/s" not in err
    assert hf_logging.is_progress_bar_enabled()


def test_lora_calls_raise_no_known_peft_future_warning():
    """peft's transformers deprecation (`is_gradient_checkpointing`) is filtered around rlvr's
    peft calls only: the filter does not leak out of them."""
    import warnings

    from rlvr.models.lora import apply_lora, merged_copy

    model, _ = load_model_and_tokenizer(TINY_RANDOM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged_copy(apply_lora(model, 4, 8.0))
        warnings.warn("`is_gradient_checkpointing` is deprecated (the user's own)", FutureWarning,
                      stacklevel=1)
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert messages == ["`is_gradient_checkpointing` is deprecated (the user's own)"]

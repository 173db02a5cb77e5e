"""Model and tokenizer loading: the embedded default model, tiny random models, any HF model
(:mod:`rlvr.models.loader`); checkpoints for inference, LoRA adapters merged
(:mod:`rlvr.models.inference`)."""

from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM, load_model_and_tokenizer

__all__ = ["DEFAULT_MODEL", "TINY_RANDOM", "load_model_and_tokenizer"]

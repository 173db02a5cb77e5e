"""Model and tokenizer loading: the embedded default model, tiny random models, any HF model."""

from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM, load_model_and_tokenizer

__all__ = ["DEFAULT_MODEL", "TINY_RANDOM", "load_model_and_tokenizer"]

"""Which models the ``torch`` engine runs: plain transformers Llama-family causal LMs
(Llama, SmolLM2, Qwen2, Mistral without a sliding window). Anything else raises
:class:`UnsupportedModelError`, which ``create_auto_engine`` turns into a fallback to ``hf``.
"""

from __future__ import annotations

_SUPPORTED = ("llama", "qwen2", "mistral")


class UnsupportedModelError(ValueError):
    """The ``torch`` engine does not implement this architecture (use the ``hf`` engine)."""


def check_supported_model(model) -> None:
    """Raise :class:`UnsupportedModelError` unless ``model`` is a plain transformers
    ``*ForCausalLM`` of a supported type (see :func:`check_supported`). Adapter-wrapped models
    (LoRA) are refused: their linear layers' ``.weight`` lacks the adapter delta, so a weight
    snapshot would silently sample from the base model (merge the adapters, or use ``hf``)."""
    check_supported(model.config)
    if any(hasattr(module, "lora_A") for module in model.modules()):
        raise UnsupportedModelError("torch engine cannot snapshot LoRA-wrapped weights; merge "
                                    "the adapters first or use engine 'hf'")
    inner = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not hasattr(model, "lm_head") or not all(hasattr(inner, n) for n in needed):
        raise UnsupportedModelError(f"torch engine expects a transformers *ForCausalLM with "
                                    f".model.{{{', '.join(needed)}}} and .lm_head, got "
                                    f"{type(model).__name__}; use engine 'hf'")


def check_supported(config) -> None:
    """Raise :class:`UnsupportedModelError` unless ``config`` describes a decoder this engine runs:
    model type in llama / qwen2 / mistral, SiLU MLP, no sliding window."""
    kind = getattr(config, "model_type", None)
    if kind not in _SUPPORTED:
        raise UnsupportedModelError(
            f"torch engine supports model types {', '.join(_SUPPORTED)}, not {kind!r}; "
            f"use engine 'hf'")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise UnsupportedModelError(
            f"torch engine needs hidden_act 'silu', not {config.hidden_act!r}")
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        if kind == "mistral":
            raise UnsupportedModelError("torch engine does not implement sliding-window attention")


"""Which models the ``torch`` engine runs: plain transformers Llama-family causal LMs
(Llama, SmolLM2, Qwen2, Mistral without a sliding window). Anything else raises
:class:`UnsupportedModelError`, which ``create_auto_engine`` turns into a fallback to ``hf``.
"""

from __future__ import annotations

_SUPPORTED = ("llama", "qwen2", "mistral")


class UnsupportedModelError(ValueError):
    """The ``torch`` engine does not implement this architecture (use the ``hf`` engine)."""


def check_supported_model(model) -> None:
    """Raise :class:`UnsupportedModelError` unless ``model`` is a transformers
    ``*ForCausalLM`` of a supported type (see :func:`check_supported`), plain or wrapped by
    peft with plain LoRA adapters on its linear layers (the snapshot then adds each adapter's
    delta, :func:`merged_weight`). Other adapters (on embeddings, LoRA variants such as DoRA,
    LoRA biases, or a ``lora_A`` outside peft) are refused: the snapshot would silently
    sample from weights without them (merge the adapters, or use ``hf``)."""
    check_supported(model.config)
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    for module in model.modules():
        if hasattr(module, "lora_A") and not _plain_lora(module):
            raise UnsupportedModelError("torch engine cannot snapshot these LoRA-wrapped "
                                        "weights (only peft's plain LoRA on linear layers); "
                                        "merge the adapters first or use engine 'hf'")
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



def _plain_lora(module) -> bool:
    """A peft LoRA linear layer whose adapters are plain ``W + scale * B A`` (no variant, no
    LoRA bias, no embedding adapter)."""
    return (hasattr(module, "get_delta_weight") and hasattr(module, "base_layer")
            and not getattr(module, "lora_variant", {})
            and not any(getattr(module, "lora_bias", {}).values())
            and not getattr(module, "lora_embedding_A", None))


def merged_weight(module):
    """``module``'s weight as the model computes with it: a plain layer's ``.weight``; a peft
    LoRA layer's base weight plus each active, not yet merged adapter's delta (peft's own merge
    arithmetic, ``W + get_delta_weight(a)`` in order, so the values equal a merged copy's bit
    for bit). A fresh tensor for a LoRA layer, else the layer's own."""
    if not hasattr(module, "base_layer"):
        return module.weight
    weight = module.base_layer.weight
    if getattr(module, "disable_adapters", False):
        return weight
    merged = set(getattr(module, "merged_adapters", ()))
    for name in module.active_adapters:
        if name in module.lora_A and name not in merged:
            weight = weight + module.get_delta_weight(name)
    return weight


def unwrapped(model):
    """The transformers model inside a peft wrapper, or ``model`` itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model

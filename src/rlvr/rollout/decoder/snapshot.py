"""The weight snapshot of the ``torch`` engine: a policy's weights copied into the engine's
compute dtype, fused and prepacked for its decode loop.

:func:`snapshot_weights` is the one place where policy weights enter the engine; the engine
calls it before its first generation, on ``update_weights`` and whenever the live model's
parameters changed (their version counters moved). It casts every weight to the compute
dtype (``detach().to(dtype).contiguous()``: a copy unless the parameter already has that
dtype and layout), concatenates q / k / v into one matmul weight and gate / up into
another (one matmul each instead of three / two per decode step), and wraps every matmul
weight in a :class:`~rlvr.rollout.decoder.linear.Linear` (prepacked for oneDNN once per
snapshot). A tied LM head shares the embedding copy. With ``quantization="int8"`` the decode steps'
layer matmuls (q / k / v, o, gate / up, down) are
:class:`~rlvr.rollout.decoder.int8.Int8Linear` (int8 weights, per output channel,
re-quantised from the live weights at every snapshot) and prefill keeps the fp32 ones
(measured on the default model: mean |int8 - fp32| sampled-token log-prob 0.22 -> 0.15 nats,
tokens whose fp32 / int8 probability ratio exceeds 2 2.1% -> 0.5%); embeddings, norms and the
LM head stay fp32 (an int8 LM head alone gave a 0.105-nat gap for a small share of a step's
multiply-adds, ~21% on the default model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from rlvr.rollout.decoder.int8 import QUANTIZATIONS, Int8Linear
from rlvr.rollout.decoder.linear import Linear
from rlvr.rollout.decoder.support import check_supported_model, merged_weight, unwrapped


@dataclass
class LayerWeights:
    """One decoder layer's weights in the compute dtype (``[out, in]`` like ``nn.Linear``)."""

    ln1: Tensor  # [H]
    qkv: Linear | Int8Linear  # [(Hq + 2 Hkv) D, H], bias on Qwen2
    o: Linear | Int8Linear  # [H, Hq D]
    ln2: Tensor  # [H]
    gate_up: Linear | Int8Linear  # [2 I, H]: gate rows then up rows
    down: Linear | Int8Linear  # [H, I]


@dataclass
class DecoderWeights:
    """A compute-dtype snapshot of a Llama-family model's weights plus its rotary module
    (built by :func:`snapshot_weights`).

    Attributes:
        dtype: the compute dtype (bf16 or fp32).
        quantization: ``"none"`` or ``"int8"`` (the decoder layers' matmuls in int8).
        heads, kv_heads, head_dim, intermediate: attention / MLP sizes; eps: RMSNorm epsilon;
            vocab_size: V.
        embed: [V, H] token embeddings; lm_head: [V, H] output projection; norm: [H] final
            RMSNorm weight.
        layers: the per-layer weights of the decode steps.
        prefill_layers: the per-layer weights of prefill when they differ from ``layers``
            (int8: prefill runs the compute dtype's, so prompts' keys / values and each
            prompt's first sampled token are exact), else None.
        rotary_emb: the model's own rotary-embedding module (see :meth:`rotary`).
    """

    dtype: torch.dtype
    quantization: str
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    vocab_size: int
    embed: Tensor
    lm_head: Linear
    norm: Tensor
    layers: list[LayerWeights]
    prefill_layers: list[LayerWeights] | None
    rotary_emb: Any
    _probe: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._probe = torch.zeros(1, dtype=self.dtype)  # tells the rotary module the output dtype

    def rotary(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``(cos, sin)`` of shape ``positions.shape + [D]`` in the compute dtype, from the
        model's own rotary module (so any rope scaling it implements applies).

        Computed per call rather than looked up in a table: the vectorised fp32 cos / sin
        round the last bit differently depending on tensor shape, and calling the module on the
        same ``[rows, length]`` positions as transformers does keeps bf16 greedy decoding
        identical to the ``hf`` engine.
        """
        cos, sin = self.rotary_emb(self._probe, positions.view(-1, positions.shape[-1]))
        return cos.view(*positions.shape, -1), sin.view(*positions.shape, -1)


def snapshot_weights(model, dtype: torch.dtype, batch_hint: int = 64,
                     prepack_fp32: bool = True, quantization: str = "none") -> DecoderWeights:
    """Copy ``model``'s weights into ``dtype`` for the engine's forward passes.

    Args:
        model: a supported transformers causal LM (:func:`check_supported_model`), any
            parameter dtype; left unchanged.
        dtype: compute dtype (bf16 or fp32).
        batch_hint: typical decode rows, for oneDNN's packing heuristics.
        prepack_fp32: prepack fp32 matmul weights for oneDNN (see
            :class:`~rlvr.rollout.decoder.linear.Linear`; bf16 weights are always prepacked).
        quantization: ``"none"`` (default) or ``"int8"``: the decode steps' layer matmuls as
            :class:`~rlvr.rollout.decoder.int8.Int8Linear`, prefill's in ``dtype`` (needs
            ``dtype=torch.float32``).

    Returns:
        The snapshot. Fused weights (q / k / v, gate / up) are fresh tensors; a weight already
        in ``dtype`` and contiguous (an fp32 policy's embeddings and norms in an fp32
        snapshot) is the model's own tensor, detached, not a copy.

    Raises:
        UnsupportedModelError: the architecture is not Llama-family, or the model has adapters
            other than peft's plain LoRA (a LoRA model's layer weights are snapshot merged:
            base + delta, :func:`~rlvr.rollout.decoder.support.merged_weight`; no merged copy
            of the whole model is needed).
        ValueError: an unknown ``quantization``, or int8 with a compute dtype other than fp32.
        Int8Unavailable: int8 in a torch build without fbgemm.
    """
    check_supported_model(model)
    check_quantization(quantization, dtype)
    model = unwrapped(model)  # peft LoRA: each layer's weight merged on the fly
    cfg = model.config
    inner = model.model
    heads = cfg.num_attention_heads

    def cast(t: Tensor) -> Tensor:
        return t.detach().to(dtype).contiguous()

    def linear(weight: Tensor, bias: Tensor | None) -> Linear:
        return Linear(weight, bias, batch_hint, prepack_fp32)

    def layer(block, linear=linear) -> LayerWeights:
        att, mlp = block.self_attn, block.mlp
        projections = (att.q_proj, att.k_proj, att.v_proj)
        bias = None
        if getattr(att.q_proj, "base_layer", att.q_proj).bias is not None:
            bias = cast(torch.cat([getattr(p, "base_layer", p).bias for p in projections]))
        return LayerWeights(
            ln1=cast(block.input_layernorm.weight),
            qkv=linear(cast(torch.cat([merged_weight(p) for p in projections])), bias),
            o=linear(cast(merged_weight(att.o_proj)), None),
            ln2=cast(block.post_attention_layernorm.weight),
            gate_up=linear(cast(torch.cat([merged_weight(mlp.gate_proj),
                                           merged_weight(mlp.up_proj)])), None),
            down=linear(cast(merged_weight(mlp.down_proj)), None),
        )

    with torch.no_grad():
        embed = cast(inner.embed_tokens.weight)
        head = (embed if model.lm_head.weight is inner.embed_tokens.weight
                else cast(model.lm_head.weight))
        lm_head = Linear(head, None, batch_hint, prepack_fp32)
        norm = cast(inner.norm.weight)
        layers = [layer(block) for block in inner.layers]
        prefill_layers = None
        if quantization == "int8":
            prefill_layers, layers = layers, [layer(block, Int8Linear) for block in inner.layers]
    return DecoderWeights(
        dtype=dtype,
        quantization=quantization,
        heads=heads,
        kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
        intermediate=cfg.intermediate_size,
        eps=float(cfg.rms_norm_eps),
        vocab_size=cfg.vocab_size,
        embed=embed,
        lm_head=lm_head,
        norm=norm,
        layers=layers,
        prefill_layers=prefill_layers,
        rotary_emb=inner.rotary_emb,
    )


def check_quantization(quantization: str, dtype: torch.dtype) -> None:
    """Raise ``ValueError`` unless ``quantization`` is one of
    :data:`~rlvr.rollout.decoder.int8.QUANTIZATIONS` and, for ``"int8"``, ``dtype`` is fp32
    (fbgemm's int8 matmuls take fp32 activations; a bf16 snapshot is for CPUs whose native
    bf16 matmuls are fast already)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got "
                         f"{quantization!r}")
    if quantization == "int8" and dtype != torch.float32:
        raise ValueError(f"quantization 'int8' runs fp32 activations; the compute dtype is "
                         f"{dtype} (use dtype torch.float32 / model.precision: fp32)")

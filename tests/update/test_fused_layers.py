"""fused_layer_ops: the update's forward and backward with fused RMSNorm, rotary embedding and
SwiGLU equal transformers' eager ones (Llama, Qwen2, Qwen3 and Mistral layers, full and LoRA),
the fused ops do run inside the block, and everything is put back after it (also on an
error)."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)
from transformers.models.llama import modeling_llama

from rlvr import kernels
from rlvr.models.lora import apply_lora
from rlvr.models.tiny import spread_weights, tiny_model, tiny_tokenizer
from rlvr.update import fused_layers
from rlvr.update.fused_layers import fused_layer_ops

pytestmark = pytest.mark.skipif(kernels.native() is None, reason="native kernels unavailable")


def _llama():
    return spread_weights(tiny_model(tiny_tokenizer(), hidden_size=64, layers=2), std=0.1)


def _small(config_cls, model_cls, **extra):
    def build():
        config = config_cls(vocab_size=97, hidden_size=48, intermediate_size=80,
                            num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                            max_position_embeddings=128, tie_word_embeddings=True, **extra)
        torch.manual_seed(3)
        return model_cls(config)
    return build


_qwen2 = _small(Qwen2Config, Qwen2ForCausalLM)
_qwen3 = _small(Qwen3Config, Qwen3ForCausalLM, head_dim=8)  # RMSNorm on q and k heads too
_mistral = _small(MistralConfig, MistralForCausalLM)


def _batch(vocab: int):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # a left-padded row
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _loss_and_grads(model):
    ids, mask, pos = _batch(model.config.vocab_size)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, 5:-1]
    logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 6:, None]).squeeze(-1)
    loss = -logp.mean()
    params = [p for p in model.parameters() if p.requires_grad]
    return logp.detach(), loss, torch.autograd.grad(loss, params)


def _backward_names(loss) -> set[str]:
    seen, stack, names = set(), [loss.grad_fn], set()
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.add(type(fn).__name__)
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return names


@pytest.mark.parametrize("build", [_llama, _qwen2, _qwen3, _mistral],
                         ids=["llama", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_fused_forward_and_gradients_equal_eager(build, lora):
    model = build()
    if lora:
        model = apply_lora(model, 4, 8.0)
        for name, p in model.named_parameters():  # adapters away from zero: B's grads matter
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.1)
    eager_logp, _, eager_grads = _loss_and_grads(model)
    with fused_layer_ops(model):
        logp, loss, grads = _loss_and_grads(model)
    names = _backward_names(loss)
    assert {"RMSNormFunctionBackward", "SiluMulFunctionBackward",
            "RotaryFunctionBackward"} <= names
    assert ("LoRALinearFunctionBackward" in names) == lora
    torch.testing.assert_close(logp, eager_logp, rtol=1e-5, atol=1e-5)
    for fused, eager in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(fused, eager, rtol=1e-4, atol=1e-6)


def test_everything_is_put_back_after_the_block_even_on_an_error():
    model = _llama()
    rotary = modeling_llama.apply_rotary_pos_emb
    with pytest.raises(RuntimeError, match="inside"):
        with fused_layer_ops(model):
            assert modeling_llama.apply_rotary_pos_emb is not rotary
            assert "forward" in model.model.norm.__dict__
            raise RuntimeError("inside")
    assert modeling_llama.apply_rotary_pos_emb is rotary
    assert all("forward" not in m.__dict__ for m in model.modules())
    assert not hasattr(model, "_rlvr_fused_layer_ops")
    _, loss, _ = _loss_and_grads(model)
    assert "RMSNormFunctionBackward" not in _backward_names(loss)


def test_a_nested_block_leaves_the_outer_one_fused():
    model = _llama()
    with fused_layer_ops(model):
        with fused_layer_ops(model):
            pass
        _, loss, _ = _loss_and_grads(model)
        assert "RMSNormFunctionBackward" in _backward_names(loss)


def test_bf16_and_autocast_run_the_original_ops_bit_for_bit():
    model = _llama()
    ids, mask, pos = _batch(model.config.vocab_size)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        with fused_layer_ops(model):
            fused = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert torch.equal(fused, eager)
    half = _llama().to(torch.bfloat16)
    eager = half(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    with fused_layer_ops(half):
        assert torch.equal(half(input_ids=ids, attention_mask=mask, position_ids=pos).logits,
                           eager)


def test_without_native_kernels_nothing_is_patched(monkeypatch):
    monkeypatch.setattr(fused_layers.kernels, "native", lambda: None)
    model = _llama()
    with fused_layer_ops(model):
        assert all("forward" not in m.__dict__ for m in model.modules())
        _, loss, _ = _loss_and_grads(model)
    assert "RMSNormFunctionBackward" not in _backward_names(loss)

"""Fused fp32 RMSNorm, rotary embedding and SwiGLU for the policy update's forward and backward.

Eager transformers runs each of these as a chain of elementwise torch ops, and autograd runs
the chain's backward op by op: RMSNorm is 6 forward and ~10 backward passes over the hidden
states, rotary embedding's ``rotate_half`` slices come back as zero-filled gradients, SwiGLU
keeps ``silu(gate)`` for its backward. On a CPU every pass is a trip through memory: measured on
SmolLM2-135M (16 rows x 256 tokens, AVX2 fp32), these chains were about a fifth of the
update's time, the matmuls most of the rest. Here each op is one ``torch.autograd.Function``
whose forward and backward are one native pass each (``update_ops_f32.c`` and
``fused_ops_f32.c`` of :mod:`rlvr.kernels`), the CPU counterpart of what
Liger-Kernel's Triton kernels do on GPUs. The arithmetic is the eager ops' up to fp32
summation order and fused multiply-adds (~1e-7 relative).

:func:`fused_layer_ops` swaps them in for one block of code (the update, the old and
reference log-probs), for the architectures whose ops are exactly Llama's (:data:`NORMS`,
:data:`MLPS`): each RMSNorm and MLP module of the model gets an instance ``forward``, the
modeling module's ``apply_rotary_pos_emb`` is replaced, each peft LoRA linear it can fuse gets
:mod:`rlvr.update.fused_lora`'s single-node forward, and transformers' ``sdpa`` attention runs
long completions causally (:mod:`rlvr.update.causal_attention`); everything is put back on
exit. Each fused op checks its inputs at every call and runs the original code for anything
else (bf16 or autocast, another device, a layout it does not take), so a forward that does not
fit loses nothing but the speed. Off with ``RLVR_NATIVE_KERNELS=0``, as the rollout engine's
kernels.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import torch
from torch import Tensor

from rlvr import kernels
from rlvr.update.causal_attention import causal_sdpa
from rlvr.update.fused_lora import fusable, fused_lora_forward

#: RMSNorm classes computing ``weight * (x * rsqrt(mean(x^2) + eps))`` (``variance_epsilon``)
NORMS = frozenset({"LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "MistralRMSNorm"})
#: MLP classes computing ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``
MLPS = frozenset({"LlamaMLP", "Qwen2MLP", "Qwen3MLP", "MistralMLP"})
_SILU = frozenset({"SiLU", "SiLUActivation"})
_LOCK = threading.Lock()


def _fits(*tensors: Tensor) -> bool:
    """fp32 CPU tensors, outside autocast: what the fp32 kernels compute exactly."""
    return (not torch.is_autocast_enabled("cpu")
            and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors))


class RMSNormFunction(torch.autograd.Function):
    """``y = w * x * (mean(x^2) + eps)^(-1/2)`` over the last dim (Zhang & Sennrich 2019,
    arXiv:1910.07467, eq. 4; transformers' LlamaRMSNorm in fp32).

    ``apply(x, weight, eps, lib)``: x FloatTensor[..., H], weight FloatTensor[H] -> y
    FloatTensor[..., H]. Keeps x (not the normalised copy); the backward recomputes the
    reciprocal RMS from it and returns dx and, when the weight needs one, dw (summed over rows
    per thread, then over threads)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, eps: float, lib) -> Tensor:
        rows = x.detach().reshape(-1, x.shape[-1]).contiguous()
        out = kernels.add_rms_norm(lib, rows, None, weight.detach(), eps)
        ctx.save_for_backward(rows, weight)
        ctx.eps, ctx.lib, ctx.shape = eps, lib, x.shape
        return out.view(x.shape)

    @staticmethod
    def backward(ctx, grad: Tensor):
        rows, weight = ctx.saved_tensors
        grad = grad.reshape(rows.shape).contiguous()
        dx = torch.empty_like(rows)
        threads = torch.get_num_threads()
        part = (torch.zeros(threads, rows.shape[1]) if ctx.needs_input_grad[1] else None)
        ctx.lib.rms_norm_backward_f32(rows.data_ptr(), weight.data_ptr(), grad.data_ptr(),
                                      ctx.eps, dx.data_ptr(),
                                      None if part is None else part.data_ptr(),
                                      rows.shape[0], rows.shape[1], threads)
        return dx.view(ctx.shape), None if part is None else part.sum(0), None, None


class SiluMulFunction(torch.autograd.Function):
    """SwiGLU's gate ``silu(gate) * up`` (Shazeer 2020, arXiv:2002.05202, eq. 5).

    ``apply(gate, up, lib)``: two FloatTensor[..., I] of one shape -> FloatTensor[..., I].
    Keeps gate and up (eager keeps ``silu(gate)`` as well)."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor, lib) -> Tensor:
        gate, up = gate.detach().contiguous(), up.detach().contiguous()
        out = torch.empty_like(gate)
        lib.silu_mul_flat_f32(gate.data_ptr(), up.data_ptr(), out.data_ptr(), gate.numel(),
                              torch.get_num_threads())
        ctx.save_for_backward(gate, up)
        ctx.lib = lib
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        gate, up = ctx.saved_tensors
        grad = grad.contiguous()
        dg, du = torch.empty_like(gate), torch.empty_like(up)
        ctx.lib.silu_mul_backward_f32(gate.data_ptr(), up.data_ptr(), grad.data_ptr(),
                                      dg.data_ptr(), du.data_ptr(), gate.numel(),
                                      torch.get_num_threads())
        return dg, du, None


class RotaryFunction(torch.autograd.Function):
    """Rotary embedding ``x cos + rotate_half(x) sin`` (Su et al. 2021, RoFormer,
    arXiv:2104.09864, eq. 34) of one [B, heads, S, D] tensor.

    ``apply(x, cos, signed_sin, back_sin, lib)``: x FloatTensor[B, heads, S, D]; cos,
    signed_sin = ``cat(-sin1, sin2)`` and back_sin = ``cat(sin2, -sin1)``, each
    FloatTensor[B S, D] -> FloatTensor[B, heads, S, D] (strided: [B, S, heads, D] in memory).
    The backward is the same rotation with back_sin: with d the output's gradient,
    ``dx1 = d1 cos1 + d2 sin2`` and ``dx2 = d2 cos2 - d1 sin1``."""

    @staticmethod
    def forward(ctx, x: Tensor, cos: Tensor, signed_sin: Tensor, back_sin: Tensor, lib):
        ctx.save_for_backward(cos, back_sin)
        ctx.lib = lib
        return _rotate(lib, x.detach(), cos, signed_sin)

    @staticmethod
    def backward(ctx, grad: Tensor):
        cos, back_sin = ctx.saved_tensors
        return _rotate(ctx.lib, grad, cos, back_sin), None, None, None, None


def _rotate(lib, x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """The engine's rotary kernel on x [B, heads, S, D] as [B S, heads, D] token rows (a view
    when x is the usual transpose of a [B, S, heads, D] projection, else one copy)."""
    b, h, s, d = x.shape
    rows = x.transpose(1, 2).reshape(b * s, h, d)
    if rows.stride(1) != d or rows.stride(2) != 1:
        rows = rows.contiguous()
    return kernels.rope(lib, rows, cos, signed_sin).view(b, s, h, d).transpose(1, 2)


def _rms_norm_forward(module, lib):
    original = module.forward

    def forward(hidden_states: Tensor) -> Tensor:
        if not _fits(hidden_states, module.weight):
            return original(hidden_states)
        return RMSNormFunction.apply(hidden_states, module.weight, module.variance_epsilon, lib)
    return forward


def _mlp_forward(module, lib):
    original = module.forward

    def forward(x: Tensor) -> Tensor:
        if not _fits(x):
            return original(x)
        gate, up = module.gate_proj(x), module.up_proj(x)
        if not _fits(gate, up) or gate.shape != up.shape:
            return module.down_proj(module.act_fn(gate) * up)
        return module.down_proj(SiluMulFunction.apply(gate, up, lib))
    return forward


def _rotary(original, lib):
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        if (unsqueeze_dim != 1 or q.dim() != 4 or k.dim() != 4 or cos.dim() != 3
                or q.shape[-1] % 2 or not _fits(q, k, cos, sin)
                or cos.shape[0] not in (1, q.shape[0]) or sin.shape != cos.shape
                or cos.shape[1:] != (q.shape[2], q.shape[3])
                or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]):
            return original(q, k, cos, sin, unsqueeze_dim)
        b, _, s, d = q.shape
        cos, sin = (t.detach().expand(b, s, d).reshape(b * s, d).contiguous()
                    for t in (cos, sin))
        half = d // 2
        signed = torch.cat([-sin[:, :half], sin[:, half:]], dim=1)
        back = torch.cat([sin[:, half:], -sin[:, :half]], dim=1)
        return (RotaryFunction.apply(q, cos, signed, back, lib),
                RotaryFunction.apply(k, cos, signed, back, lib))
    return apply_rotary_pos_emb


def _patch_targets(model) -> tuple[list, list, list, set]:
    """The model's fusable norm modules, MLP modules, peft LoRA linears and modeling modules
    (by class name)."""
    norms, mlps, loras, modules = [], [], [], set()
    for m in model.modules():
        name = type(m).__name__
        if name in NORMS and hasattr(m, "variance_epsilon"):
            norms.append(m)
        elif name in MLPS and type(getattr(m, "act_fn", None)).__name__ in _SILU:
            mlps.append(m)
            modules.add(sys.modules.get(type(m).__module__))
        elif fusable(m):
            loras.append(m)
    return norms, mlps, loras, {m for m in modules if hasattr(m, "apply_rotary_pos_emb")}


def _patch_sdpa():
    """Point transformers' ``sdpa`` attention entry at :func:`causal_sdpa`; returns the
    function that puts the entry back (and drops the converted mask it keeps)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as table

    had = "sdpa" in table._local_mapping
    previous = table._local_mapping.get("sdpa")
    patched = causal_sdpa(table["sdpa"], _fits)
    table["sdpa"] = patched

    def restore():
        patched.clear()
        if had:
            table["sdpa"] = previous
        else:
            del table["sdpa"]
    return restore


@contextmanager
def fused_layer_ops(model):
    """Run the block with ``model``'s RMSNorm, rotary embedding, SwiGLU and LoRA linears fused
    and long completions' attention causal (module doc).

    Args:
        model: the policy (an ``nn.Module``, wrapped or not, or an object whose
            ``get_base_model()`` returns one).

    Does nothing when the native kernels are unavailable (no compiler, ``RLVR_NATIVE_KERNELS=0``)
    or when ``model`` is already inside such a block (a nested call). Not for two threads
    patching one architecture at once (the rotary function is the modeling module's global):
    a lock makes the second caller run unfused instead.
    """
    if not isinstance(model, torch.nn.Module) and hasattr(model, "get_base_model"):
        model = model.get_base_model()  # a forward wrapper (rlvr.distributed.ddp)
    lib = kernels.native()
    if (lib is None or not isinstance(model, torch.nn.Module)
            or getattr(model, "_rlvr_fused_layer_ops", False) or not _LOCK.acquire(False)):
        yield
        return
    norms, mlps, loras, modules = _patch_targets(model)
    originals = {mod: mod.apply_rotary_pos_emb for mod in modules}
    own = [(m, m.__dict__.get("forward")) for m in norms + mlps + loras]  # to put back
    attention = None
    try:
        model._rlvr_fused_layer_ops = True
        for m in norms:
            m.forward = _rms_norm_forward(m, lib)
        for m in mlps:
            m.forward = _mlp_forward(m, lib)
        for m in loras:
            m.forward = fused_lora_forward(m, _fits)
        for mod, fn in originals.items():
            mod.apply_rotary_pos_emb = _rotary(fn, lib)
        attention = _patch_sdpa() if modules else None
        yield
    finally:
        if attention is not None:
            attention()
        for m, forward in own:
            if forward is None:
                m.__dict__.pop("forward", None)
            else:
                m.forward = forward
        for mod, fn in originals.items():
            mod.apply_rotary_pos_emb = fn
        model.__dict__.pop("_rlvr_fused_layer_ops", None)
        _LOCK.release()

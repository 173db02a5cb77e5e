"""A LoRA linear layer as one autograd node for the policy update (fp32, CPU).

peft computes a LoRA projection as ``base(x) + lora_B(lora_A(x)) * scaling``: besides the two
rank-r matmuls, every projection writes its adapter output, the scaled copy and the sum as
three fresh [tokens, out] tensors, and autograd's backward runs the chain in reverse (the
gradient scaled, the adapter's input gradient written apart and then added to the base's). On
a CPU each of those is a pass through memory: measured on SmolLM2-135M with rank-16 adapters
(4 rows x 256 tokens, AVX2 fp32), the scale, add and rank-r output passes were about 8% of the
update. :class:`LoRALinearFunction` writes the adapter's product into the base output in place
(``addmm`` with ``alpha = scaling``) and, in the backward, the adapter's input gradient into the
base's, so a projection costs its matmuls and nothing else. The arithmetic is peft's up to where
the scaling is applied (before or after the rank-r sum, ~1e-7 relative; exact for a power-of-two
scaling, as rlvr's default ``alpha = 2 r``).

:func:`fused_lora_forward` returns the instance ``forward`` that
:func:`rlvr.update.fused_layers.fused_layer_ops` gives each peft LoRA ``Linear`` it can fuse
(:func:`fusable`); the forward checks its input at every call and runs peft's own code for
anything else (bf16 or autocast, another device, extra arguments).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class LoRALinearFunction(torch.autograd.Function):
    """``y = x W^T + b + s (x A^T) B^T`` (Hu et al. 2021, LoRA, arXiv:2106.09685, eq. 3, with
    peft's ``s = lora_alpha / r``) with the base weight frozen.

    ``apply(x, weight, bias, lora_a, lora_b, scaling)``: x FloatTensor[..., in]; weight
    FloatTensor[out, in] (no grad); bias FloatTensor[out] or None; lora_a FloatTensor[r, in];
    lora_b FloatTensor[out, r]; scaling a float -> FloatTensor[..., out]. Keeps x (shared with
    the layer's other projections when they read the same tensor) and ``x A^T`` [tokens, r],
    as peft does. Backward, with g the output's gradient and u = g B:
    ``dx = g W + s u A``, ``dA = s u^T x``, ``dB = s g^T (x A^T)``, ``db = sum(g)``."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, lora_a: Tensor,
                lora_b: Tensor, scaling: float) -> Tensor:
        rows = x.detach().reshape(-1, x.shape[-1])
        low = rows @ lora_a.detach().t()
        out = (rows @ weight.t() if bias is None
               else torch.addmm(bias.detach(), rows, weight.t()))
        out.addmm_(low, lora_b.detach().t(), alpha=scaling)
        ctx.save_for_backward(rows, weight, lora_a, lora_b, low)
        ctx.scaling, ctx.shape, ctx.has_bias = scaling, x.shape, bias is not None
        return out.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad: Tensor):
        rows, weight, lora_a, lora_b, low = ctx.saved_tensors
        s = ctx.scaling
        grad = grad.reshape(-1, weight.shape[0])
        up = grad @ lora_b  # [tokens, r]
        dx = da = db = dbias = None
        if ctx.needs_input_grad[0]:
            dx = (grad @ weight).addmm_(up, lora_a, alpha=s).view(ctx.shape)
        if ctx.needs_input_grad[2] and ctx.has_bias:
            dbias = grad.sum(0)
        if ctx.needs_input_grad[3]:
            da = torch.mm(up.t(), rows).mul_(s)
        if ctx.needs_input_grad[4]:
            db = torch.mm(grad.t(), low).mul_(s)
        return dx, None, dbias, da, db, None


def _no_hooks(*modules: nn.Module) -> bool:
    return not any(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                   for m in modules)


def fusable(module: nn.Module) -> bool:
    """True for a peft LoRA ``Linear`` that :class:`LoRALinearFunction` computes exactly: one
    active, unmerged, plain adapter (no DoRA or other variant, no LoRA bias, no dropout) on an
    ``nn.Linear`` whose weight is frozen, no hooks on the layer or its parts."""
    base = getattr(module, "base_layer", None)
    if (type(module).__name__ != "Linear" or not hasattr(module, "lora_A")
            or type(base) is not nn.Linear or base.weight.requires_grad
            or getattr(module, "fan_in_fan_out", False)
            or getattr(module, "disable_adapters", True) or getattr(module, "merged", True)
            or getattr(module, "lora_variant", {})):
        return False
    name = _active(module)
    if name is None or name not in module.lora_A or any(getattr(module, "lora_bias", {}).values()):
        return False
    a, b = module.lora_A[name], module.lora_B[name]
    return (type(a) is nn.Linear and type(b) is nn.Linear and a.bias is None and b.bias is None
            and type(module.lora_dropout[name]) is nn.Identity
            and _no_hooks(module, base, a, b))


def _active(module) -> str | None:
    names = list(getattr(module, "active_adapters", ()))
    return names[0] if len(names) == 1 else None


def fused_lora_forward(module: nn.Module, fits):
    """The instance ``forward`` for a :func:`fusable` peft LoRA ``Linear``: the fused node for
    an input ``fits(x)`` accepts (fp32 CPU outside autocast), peft's forward otherwise."""
    original = module.forward
    base, name = module.base_layer, _active(module)
    a, b = module.lora_A[name], module.lora_B[name]
    extra = () if base.bias is None else (base.bias,)

    def forward(x: Tensor, *args, **kwargs) -> Tensor:
        if args or kwargs or not fits(x, base.weight, a.weight, b.weight, *extra):
            return original(x, *args, **kwargs)
        return LoRALinearFunction.apply(x, base.weight, base.bias, a.weight, b.weight,
                                        float(module.scaling[name]))
    return forward

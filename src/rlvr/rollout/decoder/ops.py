"""The pure-torch elementwise ops of the decoder's forward passes, with transformers' Llama
arithmetic in the compute dtype: RMSNorm, rotary embedding, SwiGLU MLP. (The native kernels
in :mod:`rlvr.kernels` reproduce them on the fused decode path.)"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rlvr.rollout.decoder.snapshot import LayerWeights


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm of ``x`` [..., H] with ``weight`` [H]: ``weight * (x * rsqrt(mean(x^2) + eps))``,
    normalised in fp32 and cast back to ``x``'s dtype before the scale."""
    # Same arithmetic as transformers' LlamaRMSNorm (normalise in fp32, cast, then scale).
    # Not ``xf.mul_``: for fp32 input ``x.float()`` is ``x`` itself (the residual stream).
    xf = x.float()
    scale = xf.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()
    return weight * (xf * scale).to(x.dtype)


def signed_sin(sin: Tensor) -> Tensor:
    """``sin`` with its first half negated, so ``roll(x) * signed_sin == rotate_half(x) * sin``
    bit for bit (negation is exact): one op per rotation fewer (no ``neg`` + ``cat``)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rope(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """Rotary embedding ``x * cos + rotate_half(x) * sin`` (``signed_sin`` from
    :func:`signed_sin`); ``rotate_half(x) = cat(-x2, x1)`` and ``roll(x, D/2) = cat(x2, x1)``."""
    rotated = torch.roll(x, x.shape[-1] // 2, dims=-1)
    return x * cos + rotated * signed_sin


def swiglu(h: Tensor, layer: LayerWeights, intermediate: int) -> Tensor:
    """The layer's SwiGLU MLP ``down(silu(gate(h)) * up(h))`` of ``h`` [..., H], gate and up as
    one fused matmul (``gate_up``'s first ``intermediate`` outputs are the gate's)."""
    gate_up = layer.gate_up(h)
    return layer.down(F.silu(gate_up[..., :intermediate]) * gate_up[..., intermediate:])


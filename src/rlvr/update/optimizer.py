"""The policy's optimizer: AdamW through torch's fused kernel wherever the parameters allow.

The single-tensor AdamW runs five to six elementwise passes per parameter tensor from Python
(lerp, mul, addcmul, sqrt, div, addcdiv); the fused kernel does one pass per tensor. Measured
on SmolLM2-135M (fp32, 2 cores, AVX2-only EPYC): an optimizer step 0.37-0.46 s -> 0.06-0.08 s,
the weights within 1.2e-7 of the single-tensor result after one step (summation order).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

#: Parameter dtypes torch's fused AdamW takes (CPU and CUDA).
FUSED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def adamw(parameters: Iterable[torch.Tensor], *, lr: float,
          weight_decay: float = 0.0) -> torch.optim.AdamW:
    """AdamW (Loshchilov & Hutter 2019, arXiv:1711.05101, Algorithm 2; torch's defaults
    beta = (0.9, 0.999), eps = 1e-8) over ``parameters``, fused when every parameter is a
    CPU or CUDA tensor of a dtype in :data:`FUSED_DTYPES`, else the single-tensor loop.

    Args:
        parameters: the trainable tensors (``requires_grad``).
        lr: learning rate (> 0; a scheduler may scale it).
        weight_decay: decoupled weight decay coefficient.

    Raises:
        ValueError: from torch, on an empty parameter list or a negative ``lr``.
    """
    params = list(parameters)
    fused = bool(params) and all(p.device.type in ("cpu", "cuda") and p.dtype in FUSED_DTYPES
                                 for p in params)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused or None)

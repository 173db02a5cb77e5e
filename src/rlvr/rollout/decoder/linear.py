"""The matmuls of the ``torch`` engine: ``x @ W^T (+ b)`` with the weight prepacked once per
weight snapshot for oneDNN (:class:`Linear`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class Linear:
    """``y = x @ W^T (+ b)`` with the weight prepacked for oneDNN when possible.

    A plain bf16 weight is re-laid-out into oneDNN's blocked AMX format on *every* matmul call;
    at decode batch sizes that repacking costs as much as the product itself (measured on 60
    streamed [3072, 576] weights: 27 -> 20 ms at 64 rows, 47 -> 32 ms at 256). Packing once
    per weight snapshot removes it, and the kernel, hence every output bit, is unchanged.
    fp32 weights are prepacked too when ``prepack_fp32`` (oneDNN's JIT kernels are
    vendor-neutral, where MKL's sgemm, transformers' fp32 path, is weak at skinny shapes on AMD
    CPUs); the packed op sums in another order than MKL (outputs differ in their last bits), so
    ``prepack_fp32=False`` keeps ``F.linear``, i.e. transformers' own fp32 matmuls bit for bit.

    Args:
        weight: [out, in] in the compute dtype; bias: [out] or None.
        batch_hint: typical row count, for the packing heuristics.
        prepack_fp32: prepack an fp32 weight as well (bf16 weights are always prepacked).

    Attributes:
        weight: the plain weight, or None once packed (the engine keeps one copy).
        packed: oneDNN's packed weight, or None.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None, batch_hint: int,
                 prepack_fp32: bool = True):
        self.weight, self.bias, self.out_features = weight, bias, weight.shape[0]
        self.packed = None
        pack = weight.dtype == torch.bfloat16 or (weight.dtype == torch.float32 and prepack_fp32)
        if pack and mkldnn_linear_available(weight.dtype):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, batch_hint)
            self.weight = None  # only the packed copy is used (saves a copy of the weights)

    def __call__(self, x: Tensor) -> Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(-1, x.shape[-1])
        y = torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias, "none", [None], "")
        return y.view(*x.shape[:-1], self.out_features)


_MKLDNN_LINEAR: dict[torch.dtype, bool] = {}


def mkldnn_linear_available(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether this torch build has oneDNN's prepacked linear ops for ``dtype`` (checked once
    per dtype)."""
    if dtype not in _MKLDNN_LINEAR:
        try:
            w = torch.zeros(8, 8, dtype=dtype)
            packed = torch.ops.mkldnn._reorder_linear_weight(w, 1)
            torch.ops.mkldnn._linear_pointwise(torch.zeros(1, 8, dtype=dtype), packed,
                                               None, "none", [None], "")
            _MKLDNN_LINEAR[dtype] = torch.backends.mkldnn.is_available()
        except (AttributeError, RuntimeError):
            _MKLDNN_LINEAR[dtype] = False
    return _MKLDNN_LINEAR[dtype]


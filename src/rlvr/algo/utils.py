"""Small tensor helpers shared by the algorithm core: fp32 casting, shape checks, masked means.

Masking uses ``torch.where`` rather than multiplication so that a non-finite value at a masked
position (a padding token's garbage log-prob) cannot turn the result into NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor


def as_fp32(x: Tensor) -> Tensor:
    """``x`` as float32 (no-op for float32 input); the algorithm core computes in fp32 (R13)."""
    return x if x.dtype == torch.float32 else x.float()


def as_bool_mask(mask: Tensor) -> Tensor:
    """``mask`` as a bool tensor; accepts bool, or 0/1 integer / float masks."""
    return mask if mask.dtype == torch.bool else mask != 0


def check_same_shape(**tensors: Tensor) -> None:
    """Raise ``ValueError`` naming the tensors if they do not all have the same shape."""
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        detail = ", ".join(f"{name}{list(shape)}" for name, shape in shapes.items())
        raise ValueError(f"shape mismatch: {detail}")


def check_ndim(name: str, x: Tensor, ndim: int) -> None:
    """Raise ``ValueError`` if ``x`` does not have exactly ``ndim`` dimensions."""
    if x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {list(x.shape)}")


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``x`` over positions where ``mask`` is true.

    Args:
        x: FloatTensor[...], any shape.
        mask: BoolTensor of the same shape as ``x``.
        dim: dimension to reduce; ``None`` reduces everything to a 0-dim tensor.

    Returns:
        FloatTensor (fp32): the masked sum.
    """
    check_same_shape(x=x, mask=mask)
    masked = torch.where(
        as_bool_mask(mask), as_fp32(x), torch.zeros((), dtype=torch.float32, device=x.device)
    )
    return masked.sum() if dim is None else masked.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` over positions where ``mask`` is true; 0 where nothing is selected.

    Args:
        x: FloatTensor[...], any shape.
        mask: BoolTensor of the same shape as ``x``.
        dim: dimension to reduce; ``None`` reduces everything to a 0-dim tensor.

    Returns:
        FloatTensor (fp32). An empty selection gives 0 (not NaN), so a batch whose completions
        were all masked out yields a zero loss instead of poisoning the optimizer.
    """
    mask = as_bool_mask(mask)
    total = masked_sum(x, mask, dim)
    count = mask.sum() if dim is None else mask.sum(dim)
    return total / count.clamp(min=1).to(torch.float32)

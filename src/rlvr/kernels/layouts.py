"""The decode-attention kernels' shape limits and the cache layouts they read (bf16 and
fp32): the blocked key layout (:func:`block_keys`) and the value layout (:func:`kernel_values`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# The decode-attention kernels' limits: MAX_GROUP query heads per kv head; a head dim that is
# a multiple of 16 (the AVX-512 vector width; the narrower paths take multiples of 8 or 4).
MAX_GROUP = 8
HEAD_DIM_MULTIPLE = 16
# Key columns per block of the kernels' blocked key layouts (both dtypes).
KEY_BLOCK = 16


def supports(heads: int, kv_heads: int, head_dim: int) -> bool:
    """Whether :func:`~rlvr.kernels.ops.decode_attention` handles this attention shape
    (either dtype)."""
    return (heads % kv_heads == 0 and heads // kv_heads <= MAX_GROUP
            and head_dim % HEAD_DIM_MULTIPLE == 0)


def block_keys(keys):
    """Keys ``[..., columns, D]`` -> the decode-attention kernel's blocked layout of their dtype
    (16 columns per block; columns past the end are zero):

    - bf16: ``[..., ceil(columns / 16), D / 2, 16, 2]``, transposed inside a block by pairs of
      dims (the pairs vdpbf16ps multiplies); D must be even.
    - fp32: ``[..., ceil(columns / 16), D, 16]``, transposed inside a block (element (j, d) of
      a block at ``d * 16 + j``).

    Raises:
        ValueError: a dtype other than bf16 / fp32.
    """
    columns = keys.shape[-2]
    padded = F.pad(keys, (0, 0, 0, (-columns) % KEY_BLOCK))
    if keys.dtype == torch.float32:
        return padded.unflatten(-2, (-1, KEY_BLOCK)).transpose(-2, -1).contiguous()
    if keys.dtype != torch.bfloat16:
        raise ValueError(f"block_keys takes bf16 or fp32 keys, got {keys.dtype}")
    blocks = padded.unflatten(-2, (-1, KEY_BLOCK)).unflatten(-1, (-1, 2))  # [..., B, 16, D/2, 2]
    return blocks.transpose(-3, -2).contiguous()


def pair_values(values):
    """Values ``[..., columns, D]`` (columns even) -> the bf16 kernel's pair layout
    ``[..., columns / 2, D, 2]`` (element (j, d) at ``[j // 2, d, j % 2]``).

    Raises:
        ValueError: an odd number of columns.
    """
    if values.shape[-2] % 2:
        raise ValueError(f"pair_values needs an even number of columns, got {values.shape[-2]}")
    return values.unflatten(-2, (-1, 2)).transpose(-2, -1).contiguous()


def kernel_values(values):
    """Values ``[..., columns, D]`` -> the decode-attention kernel's value layout of their dtype:
    bf16 :func:`pair_values` (columns even), fp32 plain contiguous rows ``[..., columns, D]``.

    Raises:
        ValueError: an odd number of bf16 columns, or a dtype other than bf16 / fp32.
    """
    if values.dtype == torch.float32:
        return values.contiguous()
    if values.dtype != torch.bfloat16:
        raise ValueError(f"kernel_values takes bf16 or fp32 values, got {values.dtype}")
    return pair_values(values)


def check_attention_layouts(dtype, dim: int, prompt_keys, prompt_values, keys, values) -> None:
    """Raise ValueError unless the caches are in
    :func:`~rlvr.kernels.ops.decode_attention`'s layouts of ``dtype``."""
    prompts, kv_heads = prompt_values.shape[:2]
    if dtype == torch.bfloat16:
        width, tmax = 2 * prompt_values.shape[2], 2 * values.shape[2]
        key_tail, value_tail = (dim // 2, KEY_BLOCK, 2), (dim, 2)
        names = ("keys [.., Hkv, ceil(columns / 16), D / 2, 16, 2], "
                 "values [.., Hkv, columns / 2, D, 2]")
    else:
        width, tmax = prompt_values.shape[2], values.shape[2]
        key_tail, value_tail = (dim, KEY_BLOCK), (dim,)
        names = "keys [.., Hkv, ceil(columns / 16), D, 16], values [.., Hkv, columns, D]"
    blocks = (width + KEY_BLOCK - 1) // KEY_BLOCK, (tmax + KEY_BLOCK - 1) // KEY_BLOCK
    if (prompt_keys.shape != (prompts, kv_heads, blocks[0], *key_tail)
            or keys.shape[1:] != (kv_heads, blocks[1], *key_tail)
            or prompt_values.shape[3:] != value_tail or values.shape[1] != kv_heads
            or values.shape[3:] != value_tail):
        raise ValueError(f"{dtype} caches must be blocked / laid out as {names}; got keys "
                         f"{tuple(prompt_keys.shape)} and {tuple(keys.shape)}, values "
                         f"{tuple(prompt_values.shape)} and {tuple(values.shape)}")


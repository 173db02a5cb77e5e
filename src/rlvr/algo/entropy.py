"""Per-token entropy of the policy's next-token distribution (logged always; optional bonus).

Formula (Shannon entropy of softmax(z), written stably)::

    H(z) = logsumexp(z) - sum_v softmax(z)_v * z_v

Computed in fp32 over chunks of positions, so the fp32 copy of the logits never exists for the
whole ``[N, T, V]`` block at once (a 49k vocabulary makes that block the largest tensor of a
step). Chunking saves memory in forward-only use (logging under ``torch.no_grad()``); with
autograd every chunk's intermediates are kept for backward anyway.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algo.utils import check_ndim

#: Default budget of one fp32 chunk of logits, in bytes (64 MiB).
DEFAULT_CHUNK_BYTES = 64 * 2**20


def rows_per_chunk(vocab_size: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
    """How many positions of a ``vocab_size``-wide fp32 row fit in ``chunk_bytes`` (>= 1)."""
    return max(1, chunk_bytes // (4 * max(1, vocab_size)))


def _entropy_fp32(z: Tensor) -> Tensor:
    z = z.float()
    logz = torch.logsumexp(z, dim=-1)
    p = torch.softmax(z, dim=-1)
    return logz - (p * z).sum(-1)


def token_entropy(
    logits: Tensor, *, temperature: float = 1.0, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> Tensor:
    """Entropy of each position's next-token distribution, in nats.

    Args:
        logits: FloatTensor[N, T, V] (any float dtype; computed in fp32).
        temperature: logits are divided by it first (> 0), to match the sampling distribution.
        chunk_bytes: memory budget of one fp32 chunk of logits.

    Returns:
        FloatTensor[N, T] (fp32), values in [0, log V].

    Raises:
        ValueError: if ``logits`` is not 3-D or ``temperature <= 0``.
    """
    check_ndim("logits", logits, 3)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    n, t, v = logits.shape
    flat = logits.reshape(n * t, v)
    step = rows_per_chunk(v, chunk_bytes)
    parts = [_entropy_fp32(flat[i : i + step].float() / temperature) for i in range(0, n * t, step)]
    out = torch.cat(parts) if parts else flat.new_zeros(0, dtype=torch.float32)
    return out.reshape(n, t)

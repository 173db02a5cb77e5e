"""Length shaping (R19): DAPO's overlong punishment, truncation masking, length penalties.

Lengths are completion lengths in tokens, ``lengths: LongTensor[N]`` (or any numeric dtype);
rewards come back as ``FloatTensor[N]`` (fp32), to be *added* to the outcome reward.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algo.advantages import group_stats
from rlvr.algo.utils import as_bool_mask, as_fp32, check_ndim, check_same_shape
from rlvr.length_cap import length_cap


def overlong_penalty(lengths: Tensor, max_length: int, cache_length: int) -> Tensor:
    """DAPO's soft overlong punishment.

    Formula (Yu et al. 2025, DAPO, arXiv:2503.14476, Sec. 3.4), with L_max = ``max_length``
    and L_cache = ``cache_length``::

        R_length(y) = 0                                  if |y| <= L_max - L_cache
                    = ((L_max - L_cache) - |y|) / L_cache if L_max - L_cache < |y| <= L_max
                    = -1                                 if |y| > L_max

    It falls linearly from 0 to -1 across the soft window and is -1 beyond the cap.

    Args:
        lengths: Tensor[N], completion lengths in tokens.
        max_length: L_max, in tokens (>= 1).
        cache_length: L_cache, in tokens, 0 <= L_cache <= L_max (0: a hard -1 beyond L_max).

    Returns:
        FloatTensor[N] (fp32), values in [-1, 0].

    Raises:
        ValueError: for out-of-range lengths.
    """
    if max_length < 1 or not 0 <= cache_length <= max_length:
        raise ValueError(
            "need max_length >= 1 and 0 <= cache_length <= max_length, "
            f"got {max_length}, {cache_length}"
        )
    check_ndim("lengths", lengths, 1)
    n = as_fp32(lengths)
    start = float(max_length - cache_length)
    soft = (start - n) / max(cache_length, 1)
    out = torch.where(n <= start, torch.zeros_like(n), soft)
    return torch.where(n > max_length, torch.full_like(n, -1.0), out)


def mask_truncated(mask: Tensor, truncated: Tensor) -> Tensor:
    """Drop truncated completions from the loss (DAPO, arXiv:2503.14476, Sec. 3.4, "overlong
    filtering"): a completion cut at the cap is not necessarily wrong, so it gets no gradient.

    Args:
        mask: BoolTensor[N, T], completion tokens.
        truncated: BoolTensor[N], true for completions that hit the generation cap (from the
            finish reason, not from the tensor width).

    Returns:
        BoolTensor[N, T]: ``mask`` with the rows of truncated completions all false.
    """
    check_ndim("mask", mask, 2)
    check_ndim("truncated", truncated, 1)
    if truncated.shape[0] != mask.shape[0]:
        raise ValueError(f"truncated has {truncated.shape[0]} rows but mask has {mask.shape[0]}")
    return as_bool_mask(mask) & ~as_bool_mask(truncated).unsqueeze(-1)


def length_penalty(lengths: Tensor, max_length: int, coef: float) -> Tensor:
    """Linear length penalty ``-coef * |y| / L_max`` (rlvr's R19 "length-inflation penalty").

    Args:
        lengths: Tensor[N], completion lengths in tokens.
        max_length: L_max, in tokens (>= 1).
        coef: penalty at the cap, in reward units (>= 0); keep it well below the outcome reward.

    Returns:
        FloatTensor[N] (fp32), values in [-coef, 0] for lengths within the cap.
    """
    if max_length < 1 or coef < 0:
        raise ValueError(f"need max_length >= 1 and coef >= 0, got {max_length}, {coef}")
    check_ndim("lengths", lengths, 1)
    return -coef * as_fp32(lengths) / float(max_length)


def concise_correct_bonus(
    lengths: Tensor, correct: Tensor, group_ids: Tensor, coef: float = 1.0
) -> Tensor:
    """Group-relative length reward favouring concise correct answers.

    Formula (Kimi Team 2025, "Kimi k1.5", arXiv:2501.12599, the length penalty of its RL
    section), with min_len / max_len over the completions of the same prompt::

        lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)
        bonus_i  = coef * lambda_i            if completion i is correct
                 = coef * min(0, lambda_i)    otherwise

    The shortest correct answer gains ``+0.5 coef``, the longest loses ``0.5 coef``; wrong
    answers are only ever penalised (no reward for being short and wrong). A group whose
    lengths are all equal gets 0.

    Args:
        lengths: Tensor[N], completion lengths in tokens.
        correct: BoolTensor[N], outcome correctness.
        group_ids: LongTensor[N].
        coef: scale, in reward units (>= 0).

    Returns:
        FloatTensor[N] (fp32).
    """
    check_ndim("lengths", lengths, 1)
    check_same_shape(lengths=lengths, correct=correct, group_ids=group_ids)
    if coef < 0:
        raise ValueError(f"coef must be >= 0, got {coef}")
    n = as_fp32(lengths)
    stats = group_stats(n, group_ids)
    k = stats.unique.numel()
    gmax = torch.full((k,), -torch.inf, device=n.device).scatter_reduce(0, stats.index, n, "amax")
    gmin = torch.full((k,), torch.inf, device=n.device).scatter_reduce(0, stats.index, n, "amin")
    span = (gmax - gmin)[stats.index]
    lam = torch.where(
        span > 0, 0.5 - (n - gmin[stats.index]) / span.clamp(min=1e-12), torch.zeros_like(n)
    )
    bonus = torch.where(as_bool_mask(correct), lam, lam.clamp(max=0.0))
    return coef * bonus


def inference_length_limit(
    lengths: Tensor | list[int], quantile: float = 0.9, factor: float = 1.2
) -> int:
    """Generation cap for inference: the P90 of training generation lengths x 1.2 (R19).

    Args:
        lengths: completion lengths in tokens seen during training (non-empty).
        quantile: which quantile (0.9 = P90), in (0, 1].
        factor: safety factor (> 0).

    Returns:
        ``ceil(quantile(lengths) * factor)`` tokens (:func:`rlvr.length_cap.length_cap`),
        at least 1.

    Raises:
        ValueError: for empty lengths or out-of-range parameters.
    """
    n = torch.as_tensor(lengths, dtype=torch.float32).flatten()
    if n.numel() == 0:
        raise ValueError("lengths is empty")
    if not 0 < quantile <= 1 or factor <= 0:
        raise ValueError(f"need 0 < quantile <= 1 and factor > 0, got {quantile}, {factor}")
    # round: 0.9 * 100 is 90.00000000000001, which would shift the interpolation position
    return max(1, length_cap(n.tolist(), round(quantile * 100, 9), factor))

"""Truncated importance sampling (TIS) of a mismatched sampler: the rollout engine's
log-probs differ from the trainer's (an int8 or bf16 rollout, another kernel), so the
completions come from pi_rollout, not from the pi_old that the policy-gradient loss assumes.

Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"
(the fix slime and verl ship as ``tis_imp_ratio_cap``): weight each token's policy-gradient
loss by the truncated, detached importance ratio of the trainer's old policy to the sampler::

    w_{i,t} = min(exp(log pi_old(y_t) - log pi_rollout(y_t)), C)

so the gradient estimates E_{pi_old} instead of E_{pi_rollout}; the cap C (2 in the paper's
experiments) bounds the variance a token the sampler found much less likely than the policy
would add, at the price of a small bias on the capped tokens. The weight carries no gradient.

Inputs follow :mod:`rlvr.algo`'s conventions: ``FloatTensor[N, T]`` log-probs and a
``BoolTensor[N, T]`` completion mask; everything in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.algo.policy_loss import RATIO_LOG_CLAMP
from rlvr.algo.utils import as_bool_mask, as_fp32, check_same_shape, masked_mean

#: The cap of the paper's experiments (Yao et al. 2025), used when an int8 rollout turns TIS on.
DEFAULT_TIS_CAP = 2.0


@dataclass
class ImportanceWeights:
    """Result of :func:`truncated_importance_weights`.

    Attributes:
        weights: FloatTensor[N, T] (fp32, detached), ``w`` on completion tokens, 0 elsewhere.
        metrics: detached 0-dim fp32 tensors, token means over the mask: ``tis_weight_mean``
            (of ``w``), ``tis_clipped_fraction`` (tokens whose ratio exceeded the cap).
    """

    weights: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


def truncated_importance_weights(old_log_probs: Tensor, rollout_log_probs: Tensor,
                                 mask: Tensor, cap: float) -> ImportanceWeights:
    """Per-token TIS weights ``min(exp(old - rollout), cap)`` (Yao et al. 2025, see the module
    doc).

    Args:
        old_log_probs: FloatTensor[N, T], log pi_old of the sampled tokens as the trainer
            computes it (the policy before the update; detached here).
        rollout_log_probs: FloatTensor[N, T], the rollout engine's log-probs of the same
            tokens (``RolloutOutput.logprobs``).
        mask: BoolTensor[N, T], completion tokens.
        cap: C > 0, the truncation (``algo.tis_cap``).

    Returns:
        :class:`ImportanceWeights`. The log-ratio is clamped to +-20 before ``exp`` (as the
        policy losses do), so a garbage padding value cannot overflow.

    Raises:
        ValueError: ``cap <= 0`` or mismatched shapes.
    """
    if not cap > 0:
        raise ValueError(f"tis cap must be > 0, got {cap}")
    check_same_shape(old_log_probs=old_log_probs, rollout_log_probs=rollout_log_probs,
                     mask=mask)
    mask = as_bool_mask(mask)
    with torch.no_grad():
        log_ratio = as_fp32(old_log_probs).detach() - as_fp32(rollout_log_probs).detach()
        ratio = torch.exp(log_ratio.clamp(-RATIO_LOG_CLAMP, RATIO_LOG_CLAMP))
        weights = torch.where(mask, ratio.clamp(max=cap), torch.zeros_like(ratio))
        metrics = {"tis_weight_mean": masked_mean(weights, mask),
                   "tis_clipped_fraction": masked_mean((ratio > cap).float(), mask)}
    return ImportanceWeights(weights, metrics)

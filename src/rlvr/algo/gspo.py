"""GSPO: Group Sequence Policy Optimization (Zheng et al. 2025, arXiv:2507.18071), the
sequence-level importance ratio as a policy loss.

The token ratios of PPO / GRPO are replaced by one ratio per completion, the geometric mean
of its token ratios (GSPO, Sec. 4.1)::

    s_i(theta) = (pi_theta(y_i | x) / pi_old(y_i | x)) ** (1 / |y_i|)
               = exp( 1/|y_i| * sum_t log(pi_theta(y_{i,t}) / pi_old(y_{i,t})) )

clipped as a whole (the GSPO objective, Sec. 4.1)::

    J(theta) = E[ 1/G * sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i) ]

so a completion is kept or clipped as a unit, and one noisy token ratio cannot dominate its
sequence's gradient. The length normalisation keeps ``s_i`` near 1, which is why the paper's
clip range is tiny (eps_low = 3e-4, eps_high = 4e-4).

GSPO-token (GSPO, Sec. 4.3) allows per-token advantages ``A_{i,t}`` with the same clipping::

    s_{i,t}(theta) = sg[s_i(theta)] * pi_theta(y_{i,t}) / sg[pi_theta(y_{i,t})]

Its value is ``s_i`` and, with ``A_{i,t} = A_i``, its gradient is GSPO's (Sec. 4.3).

As a per-token loss (``FloatTensor[N, T]``, aggregated by :mod:`rlvr.algo.loss_agg`), every
token of completion i carries ``-min(s_i A_i, clip(s_i) A_i)``; the ``grpo`` aggregation
(token mean per sequence, then the mean over sequences) gives exactly that objective. Other
aggregations weight sequences by their length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algo.policy_loss import RATIO_LOG_CLAMP, PolicyLossOutput, _checked_inputs
from rlvr.algo.registry import POLICY_LOSSES
from rlvr.algo.utils import masked_mean

#: GSPO's clip range in the paper's experiments (Zheng et al. 2025: left 3e-4, right 4e-4).
GSPO_EPS_LOW, GSPO_EPS_HIGH = 3e-4, 4e-4


def sequence_log_ratio(log_probs: Tensor, old_log_probs: Tensor, mask: Tensor) -> Tensor:
    """``log s_i = 1/|y_i| sum_t (log pi_theta - log pi_old)`` over each row's mask.

    Args:
        log_probs, old_log_probs: FloatTensor[N, T] (masked positions already zeroed).
        mask: BoolTensor[N, T].

    Returns:
        FloatTensor[N] (carries ``log_probs``' gradient); 0 for a row without tokens.
    """
    diff = torch.where(mask, log_probs - old_log_probs, torch.zeros_like(log_probs))
    return diff.sum(-1) / mask.sum(-1).clamp(min=1).to(log_probs.dtype)


def _gspo_options(config) -> dict:
    return {"eps_low": config.algo.gspo_eps_low, "eps_high": config.algo.gspo_eps_high,
            "token_level": config.algo.gspo_token}


@POLICY_LOSSES.register("gspo", options=_gspo_options)
def gspo_loss(log_probs: Tensor, old_log_probs: Tensor, advantages: Tensor, mask: Tensor, *,
              eps_low: float = GSPO_EPS_LOW, eps_high: float = GSPO_EPS_HIGH,
              token_level: bool = False) -> PolicyLossOutput:
    """GSPO's clipped sequence-ratio objective as a per-token loss (see the module doc).

    Args:
        log_probs: FloatTensor[N, T], log pi_theta (gradient flows here).
        old_log_probs: FloatTensor[N, T], log pi_old (detached).
        advantages: FloatTensor[N] or FloatTensor[N, T] (per-token advantages: use
            ``token_level``).
        mask: BoolTensor[N, T], completion tokens.
        eps_low, eps_high: the clip range of ``s_i`` (``algo.gspo_eps_low`` /
            ``algo.gspo_eps_high``; the paper's 3e-4 / 4e-4).
        token_level: GSPO-token (Sec. 4.3): ``s_{i,t} = sg[s_i] pi_theta / sg[pi_theta]``.

    Returns:
        :class:`~rlvr.algo.policy_loss.PolicyLossOutput`; metrics (token means over the mask)
        ``clip_frac_low``, ``clip_frac_high``, ``clip_frac`` (tokens of clipped sequences),
        ``ratio_mean`` and ``ratio_max`` (of ``s_i``), ``approx_kl`` (k3 of the sequence
        ratio, ``(s - 1) - log s``).

    Raises:
        ValueError: on shape mismatches or ``eps_low`` outside (0, 1), ``eps_high <= 0``.
    """
    if not 0 < eps_low < 1 or eps_high <= 0:
        raise ValueError(f"need 0 < eps_low < 1 and eps_high > 0, got {eps_low}, {eps_high}")
    lp, old, adv, mask = _checked_inputs(log_probs, old_log_probs, advantages, mask)
    log_s = sequence_log_ratio(lp, old, mask).clamp(-RATIO_LOG_CLAMP, RATIO_LOG_CLAMP)
    if token_level:
        # value s_i, gradient s_i * d log pi_theta(y_t) (GSPO-token)
        log_s_t = log_s.detach().unsqueeze(-1) + lp - lp.detach()
    else:
        log_s_t = log_s.unsqueeze(-1).expand_as(lp)
    ratio = torch.exp(log_s_t)
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
    token_loss = torch.where(mask, -objective, torch.zeros_like(objective))
    with torch.no_grad():
        r, lr = ratio.detach(), log_s_t.detach()
        low = ((adv < 0) & (r < 1 - eps_low)).float()
        high = ((adv > 0) & (r > 1 + eps_high)).float()
        metrics = {
            "clip_frac_low": masked_mean(low, mask),
            "clip_frac_high": masked_mean(high, mask),
            "approx_kl": masked_mean((r - 1) - lr, mask),
            "ratio_mean": masked_mean(r, mask),
            "ratio_max": r[mask].max() if bool(mask.any()) else r.new_zeros(()),
        }
        metrics["clip_frac"] = metrics["clip_frac_low"] + metrics["clip_frac_high"]
    return PolicyLossOutput(token_loss, metrics)

"""Clipped-surrogate policy losses (PPO / GRPO family), per token.

Notation of the formula sheet: ratio ``r_{i,t} = exp(log pi_theta - log pi_old)`` for token t of
completion i, advantage ``A_i`` (or a per-token ``A_{i,t}``). Every loss here returns the
*per-token* loss ``-objective`` as ``FloatTensor[N, T]`` (0 at masked positions) plus detached
scalar metrics; reduce it with :mod:`rlvr.algo.loss_agg` after adding any KL term, so the
aggregation choice applies to the whole objective (as in DeepSeekMath eq. 3).

Inputs (all losses):

- ``log_probs: FloatTensor[N, T]``: log pi_theta of the sampled tokens (carries the gradient).
- ``old_log_probs: FloatTensor[N, T]``: log pi_old of the same tokens, from sampling time
  (treated as constant). With one update per batch they equal ``log_probs.detach()``, the
  ratio is 1 and the loss *value* is ~0 while its gradient is not: do not read the loss value
  as a health signal.
- ``advantages: FloatTensor[N]`` (broadcast over tokens) or ``FloatTensor[N, T]``.
- ``mask: BoolTensor[N, T]``: true on completion tokens (not prompt, not padding).

Registry: :data:`rlvr.algo.registry.POLICY_LOSSES`, keys ``clip`` (symmetric epsilon),
``clip_higher`` (DAPO's eps_low = 0.2, eps_high = 0.28), ``dual_clip`` (c = 3), which accept
each other's options (e.g. ``clip_higher`` with ``dual_clip=3.0``), and ``cispo`` (MiniMax-M1's
clipped, detached importance weight: the worked example of docs/adding_a_policy_loss.md).
From the run config, ``clip`` and ``dual_clip`` take ``eps = algo.clip_eps``, ``clip_higher``
``eps_low = algo.clip_eps`` and ``eps_high = algo.clip_eps_high``, ``cispo`` ``eps_high``
(each entry's ``options``). docs/adding_a_policy_loss.md walks through adding one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.algo.registry import POLICY_LOSSES
from rlvr.algo.utils import as_bool_mask, as_fp32, check_ndim, check_same_shape, masked_mean

#: The policy log-ratio is clamped to +-20 before exp: far beyond any clip range, but keeps
#: exp() finite for a diverged token (its gradient is then zero, which is what clipping wants).
RATIO_LOG_CLAMP = 20.0


@dataclass
class PolicyLossOutput:
    """Per-token policy loss and its diagnostics.

    Attributes:
        token_loss: FloatTensor[N, T] (fp32), ``-objective`` per token, 0.0 where masked.
        metrics: detached 0-dim fp32 tensors, token means over the mask:
            ``clip_frac_low`` (A < 0 and r < 1 - eps_low: the lower clip binds),
            ``clip_frac_high`` (A > 0 and r > 1 + eps_high: the upper clip binds),
            ``clip_frac`` (their sum), ``dual_clip_frac`` (A < 0 and the c * A bound binds;
            0 without dual-clip), ``approx_kl`` (k3 estimate of KL(pi_old || pi_theta):
            ``(r - 1) - log r``), ``ratio_mean``, ``ratio_max``.
    """

    token_loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


def _zero_where_masked(x: Tensor, mask: Tensor) -> Tensor:
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))


def _broadcast_advantages(advantages: Tensor, like: Tensor) -> Tensor:
    adv = as_fp32(advantages).detach()
    if adv.dim() == 1:
        if adv.shape[0] != like.shape[0]:
            raise ValueError(
                f"advantages has {adv.shape[0]} rows but log_probs has {like.shape[0]}"
            )
        return adv.unsqueeze(-1).expand_as(like)
    check_same_shape(advantages=adv, log_probs=like)
    return adv


def _checked_inputs(log_probs, old_log_probs, advantages, mask):
    """The shared input contract of every policy loss: shapes checked, fp32, ``old`` detached,
    advantages broadcast to ``[N, T]``, every masked position zeroed.

    Returns:
        (lp, old, adv, mask): FloatTensor[N, T] x 3 and BoolTensor[N, T].

    Raises:
        ValueError: on shape mismatches.
    """
    check_ndim("log_probs", log_probs, 2)
    check_same_shape(log_probs=log_probs, old_log_probs=old_log_probs, mask=mask)
    mask = as_bool_mask(mask)
    # Zero the masked positions of every input first: padding may hold garbage (even NaN), and
    # masking only the output would still send 0 * NaN = NaN back through exp() in backward.
    lp = _zero_where_masked(as_fp32(log_probs), mask)
    old = _zero_where_masked(as_fp32(old_log_probs).detach(), mask)
    adv = _zero_where_masked(_broadcast_advantages(advantages, lp), mask)
    return lp, old, adv, mask


def clipped_surrogate_loss(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    dual_clip: float | None = None,
) -> PolicyLossOutput:
    """PPO clipped surrogate with optional clip-higher and dual-clip, as a per-token loss.

    Formulas:

    - Clipped surrogate (Schulman et al. 2017, PPO, arXiv:1707.06347, eq. 7; used by GRPO,
      DeepSeekMath arXiv:2402.03300 eq. 3)::

          obj = min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)

    - Clip-higher (Yu et al. 2025, DAPO, arXiv:2503.14476, Sec. 3.1): ``eps_high > eps_low``
      (0.28 vs 0.2) lets low-probability tokens with A > 0 grow further before clipping.
    - Dual-clip (Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep
      Reinforcement Learning", arXiv:1912.09729, the dual-clip PPO objective): for A < 0 the
      objective is bounded below, ``obj = max(obj, c * A)`` with c > 1 (c = 3), so a huge
      ratio on a bad token cannot produce an unbounded loss.

    Args:
        log_probs: FloatTensor[N, T], log pi_theta (gradient flows here).
        old_log_probs: FloatTensor[N, T], log pi_old (detached).
        advantages: FloatTensor[N] or FloatTensor[N, T] (detached).
        mask: BoolTensor[N, T], completion tokens.
        eps_low: lower clip range (ratio >= 1 - eps_low), in (0, 1).
        eps_high: upper clip range (ratio <= 1 + eps_high); ``None`` means ``eps_low``.
        dual_clip: the constant c (> 1) of dual-clip; ``None`` disables it.

    Returns:
        :class:`PolicyLossOutput`.

    Raises:
        ValueError: on shape mismatches or out-of-range eps / c.
    """
    eps_high = eps_low if eps_high is None else eps_high
    if not 0 < eps_low < 1 or eps_high <= 0:
        raise ValueError(f"need 0 < eps_low < 1 and eps_high > 0, got {eps_low}, {eps_high}")
    if dual_clip is not None and dual_clip <= 1:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    lp, old, adv, mask = _checked_inputs(log_probs, old_log_probs, advantages, mask)

    log_ratio = (lp - old).clamp(-RATIO_LOG_CLAMP, RATIO_LOG_CLAMP)
    ratio = torch.exp(log_ratio)
    objective = torch.minimum(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
    negative = adv < 0
    if dual_clip is not None:
        bound = dual_clip * adv
        dual_active = negative & (objective < bound)
        objective = torch.where(negative, torch.maximum(objective, bound), objective)
    else:
        dual_active = torch.zeros_like(mask)
    token_loss = torch.where(mask, -objective, torch.zeros_like(objective))

    with torch.no_grad():
        low = (negative & (ratio < 1 - eps_low)).float()
        high = ((adv > 0) & (ratio > 1 + eps_high)).float()
        metrics = {
            "clip_frac_low": masked_mean(low, mask),
            "clip_frac_high": masked_mean(high, mask),
            "dual_clip_frac": masked_mean(dual_active.float(), mask),
            "approx_kl": masked_mean((ratio - 1) - log_ratio, mask),
            "ratio_mean": masked_mean(ratio, mask),
            "ratio_max": ratio[mask].max() if mask.any() else ratio.new_zeros(()),
        }
        metrics["clip_frac"] = metrics["clip_frac_low"] + metrics["clip_frac_high"]
    return PolicyLossOutput(token_loss, metrics)


def _eps(config) -> dict:
    return {"eps": config.algo.clip_eps}


def _eps_low_high(config) -> dict:
    return {"eps_low": config.algo.clip_eps, "eps_high": config.algo.clip_eps_high}


@POLICY_LOSSES.register("clip", options=_eps)
def clip_loss(
    log_probs, old_log_probs, advantages, mask, *, eps: float = 0.2, **options
) -> PolicyLossOutput:
    """Symmetric PPO/GRPO clip, ``clip(r, 1 - eps, 1 + eps)`` (PPO eq. 7; DeepSeekMath eq. 3).

    Shapes as :func:`clipped_surrogate_loss`; ``options`` (``eps_high``, ``dual_clip``) pass
    through, ``eps`` sets ``eps_low``.
    """
    return clipped_surrogate_loss(
        log_probs, old_log_probs, advantages, mask, eps_low=eps, **options
    )


@POLICY_LOSSES.register("clip_higher", options=_eps_low_high)
def clip_higher_loss(
    log_probs,
    old_log_probs,
    advantages,
    mask,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    **options,
) -> PolicyLossOutput:
    """Decoupled clip range ``clip(r, 1 - eps_low, 1 + eps_high)`` (DAPO, arXiv:2503.14476,
    Sec. 3.1, eps_low = 0.2, eps_high = 0.28). Shapes as :func:`clipped_surrogate_loss`."""
    return clipped_surrogate_loss(
        log_probs, old_log_probs, advantages, mask, eps_low=eps_low, eps_high=eps_high, **options
    )


@POLICY_LOSSES.register("dual_clip", options=_eps)
def dual_clip_loss(
    log_probs,
    old_log_probs,
    advantages,
    mask,
    *,
    eps: float = 0.2,
    dual_clip: float = 3.0,
    **options,
) -> PolicyLossOutput:
    """Dual-clip PPO, c = 3 by default (Ye et al. 2020, arXiv:1912.09729). Shapes as
    :func:`clipped_surrogate_loss`; ``eps_high`` may be passed for clip-higher + dual-clip."""
    return clipped_surrogate_loss(
        log_probs, old_log_probs, advantages, mask, eps_low=eps, dual_clip=dual_clip, **options
    )


def _cispo_options(config) -> dict:
    return {"eps_high": config.algo.clip_eps_high}


@POLICY_LOSSES.register("cispo", options=_cispo_options)
def cispo_loss(log_probs, old_log_probs, advantages, mask, *,
               eps_high: float = 0.28) -> PolicyLossOutput:
    """CISPO (MiniMax-M1, arXiv:2506.13585, Sec. 3.1): REINFORCE with a clipped, detached
    importance weight, ``-sg(min(r, 1 + eps_high)) * A * log pi``; clipped tokens keep their
    gradient (PPO's clip zeroes it). Shapes as :func:`clipped_surrogate_loss`; metrics
    ``clip_frac`` (r > 1 + eps_high) and ``ratio_mean``.

    Raises:
        ValueError: on shape mismatches.
    """
    lp, old, adv, mask = _checked_inputs(log_probs, old_log_probs, advantages, mask)
    ratio = torch.exp((lp - old).clamp(-RATIO_LOG_CLAMP, RATIO_LOG_CLAMP)).detach()
    weight = ratio.clamp(max=1 + eps_high)
    token_loss = torch.where(mask, -weight * adv * lp, torch.zeros_like(lp))
    with torch.no_grad():
        metrics = {"clip_frac": masked_mean((ratio > 1 + eps_high).float(), mask),
                   "ratio_mean": masked_mean(ratio, mask)}
    return PolicyLossOutput(token_loss, metrics)


def compute_policy_loss(
    name: str, log_probs, old_log_probs, advantages, mask, **options
) -> PolicyLossOutput:
    """Run the policy loss registered as ``name`` (``clip``, ``clip_higher``, ``dual_clip``,
    ``cispo``).

    Raises:
        KeyError: for an unknown name.
    """
    return POLICY_LOSSES.get(name)(log_probs, old_log_probs, advantages, mask, **options)

"""The whole GRPO-family objective for one (micro-)batch: policy loss + beta * KL - entropy
bonus, aggregated. The trainer calls :func:`policy_objective`; each piece is selected by its
registry key.

Formula (DeepSeekMath, arXiv:2402.03300, eq. 3, as a loss to minimise)::

    loss = AGG_{i,t}[ -w_{i,t} min(r A, clip(r) A) + beta * KL_{i,t} - entropy_coef * H_{i,t} ]

where AGG is the configured loss aggregation (:mod:`rlvr.algo.loss_agg`) and ``w`` the
off-policy correction's weight of each token (:mod:`rlvr.algo.corrections`: truncated, masked,
IcePop or decoupled importance weights of the proximal policy over the sampler; 1 with
``none``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.algo.corrections import behaviour_ratio, compute_correction, ratio_metrics
from rlvr.algo.kl import kl_divergence
from rlvr.algo.loss_agg import aggregate_loss
from rlvr.algo.policy_loss import compute_policy_loss
from rlvr.algo.utils import as_bool_mask, as_fp32, check_same_shape, masked_mean


@dataclass
class ObjectiveOutput:
    """Result of :func:`policy_objective`.

    Attributes:
        loss: FloatTensor[] (fp32), the scalar to ``backward()``.
        metrics: detached 0-dim tensors: the policy loss's metrics plus ``pg_loss`` (the
            aggregated policy term), ``kl`` (token mean of the KL estimate; 0 without a
            reference), ``entropy`` (token mean; only if entropy was given),
            ``is_ratio_mean`` and ``is_ratio_max`` (the behaviour ratio ``pi_old /
            pi_rollout``; only with ``rollout_log_probs``), and with a correction its
            ``is_weight_mean``, ``is_weight_max``, ``is_truncated_fraction``,
            ``is_masked_fraction`` (``tis`` also ``tis_weight_mean``, ``tis_clipped_fraction``).
    """

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


def policy_objective(
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    ref_log_probs: Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    policy_loss: str = "clip",
    policy_loss_options: dict | None = None,
    loss_agg: str = "grpo",
    loss_agg_options: dict | None = None,
    entropy: Tensor | None = None,
    entropy_coef: float = 0.0,
    rollout_log_probs: Tensor | None = None,
    tis_cap: float | None = None,
    off_policy_correction: str = "none",
    correction_options: dict | None = None,
) -> ObjectiveOutput:
    """Clipped surrogate + KL penalty to the reference (+ optional entropy bonus), aggregated.

    Args:
        log_probs: FloatTensor[N, T], log pi_theta of the sampled tokens (with gradient).
        old_log_probs: FloatTensor[N, T], log pi_old from sampling time.
        advantages: FloatTensor[N] or FloatTensor[N, T].
        mask: BoolTensor[N, T], completion tokens.
        ref_log_probs: FloatTensor[N, T], log pi_ref; required when ``kl_coef > 0``.
        kl_coef: beta (R15 default 0.01 in configs; 0 here so nothing is implied).
        kl_estimator: key of :data:`~rlvr.algo.registry.KL_ESTIMATORS`.
        policy_loss: key of :data:`~rlvr.algo.registry.POLICY_LOSSES`.
        policy_loss_options: keyword options for it (e.g. ``{"eps": 0.2}``).
        loss_agg: key of :data:`~rlvr.algo.registry.LOSS_AGGREGATIONS`.
        loss_agg_options: keyword options for it (e.g. ``{"max_completion_length": 256}``).
        entropy: FloatTensor[N, T] per-token entropy with gradient (from
            :func:`rlvr.algo.entropy.token_entropy`); needed when ``entropy_coef > 0``.
        entropy_coef: weight of the entropy bonus (subtracted from the loss), >= 0.
        rollout_log_probs: FloatTensor[N, T], the rollout engine's log-probs of the tokens
            (pi_behav); needed by every correction but ``none``.
        tis_cap: shorthand for ``off_policy_correction="tis"`` with this cap: truncated
            importance sampling (Yao et al. 2025), each token's policy term weighted by
            ``min(exp(old_log_probs - rollout_log_probs), tis_cap)``; None (default): as
            ``off_policy_correction`` says.
        off_policy_correction: key of
            :data:`~rlvr.algo.corrections.OFF_POLICY_CORRECTIONS` (``none``, ``tis``, ``mis``,
            ``icepop``, ``decoupled``): the detached weight ``w(pi_old / pi_rollout)`` of each
            token's policy term, with ``old_log_probs`` as the proximal policy.
        correction_options: keyword options for it (e.g. ``{"cap": 2.0}``).

    Returns:
        :class:`ObjectiveOutput`.

    Raises:
        ValueError: if ``kl_coef > 0`` without ``ref_log_probs``, ``entropy_coef > 0``
            without ``entropy``, a correction (or ``tis_cap``) without ``rollout_log_probs``,
            ``tis_cap`` with another correction than ``tis``, a bad correction option (a cap
            ``<= 0``), or a negative coefficient.
        KeyError: for unknown registry keys.
    """
    if kl_coef < 0 or entropy_coef < 0:
        raise ValueError(f"kl_coef and entropy_coef must be >= 0, got {kl_coef}, {entropy_coef}")
    mask = as_bool_mask(mask)
    pg = compute_policy_loss(
        policy_loss, log_probs, old_log_probs, advantages, mask, **(policy_loss_options or {})
    )
    token_loss = pg.token_loss
    metrics = dict(pg.metrics)
    correction, options = off_policy_correction, dict(correction_options or {})
    if tis_cap is not None:
        if correction not in ("none", "tis"):
            raise ValueError(f"tis_cap is the cap of the tis correction; it cannot be combined "
                             f"with off_policy_correction {correction!r}")
        correction, options["cap"] = "tis", tis_cap
    if correction != "none":
        if rollout_log_probs is None:
            what = "tis_cap" if tis_cap is not None else f"off_policy_correction {correction!r}"
            raise ValueError(f"{what} needs rollout_log_probs (the sampler's log-probs)")
        weights = compute_correction(correction, old_log_probs, rollout_log_probs, mask,
                                     **options)
        token_loss = token_loss * weights.weights
        metrics.update(weights.metrics)
    elif rollout_log_probs is not None:
        metrics.update(ratio_metrics(behaviour_ratio(old_log_probs, rollout_log_probs, mask),
                                     mask))
    agg_options = loss_agg_options or {}
    with torch.no_grad():
        metrics["pg_loss"] = aggregate_loss(loss_agg, token_loss.detach(), mask, **agg_options)

    if ref_log_probs is not None:
        check_same_shape(ref_log_probs=ref_log_probs, mask=mask)
        # Padding may hold garbage; zero it in the inputs so no NaN reaches backward.
        zero = torch.zeros((), dtype=torch.float32, device=mask.device)
        kl = kl_divergence(
            kl_estimator,
            torch.where(mask, as_fp32(log_probs), zero),
            torch.where(mask, as_fp32(ref_log_probs), zero),
        )
        metrics["kl"] = masked_mean(kl.detach(), mask)
        if kl_coef > 0:
            token_loss = token_loss + kl_coef * kl
    elif kl_coef > 0:
        raise ValueError("kl_coef > 0 needs ref_log_probs")
    else:
        metrics["kl"] = torch.zeros((), dtype=torch.float32, device=token_loss.device)

    if entropy is not None:
        check_same_shape(entropy=entropy, mask=mask)
        metrics["entropy"] = masked_mean(entropy.detach(), mask)
        if entropy_coef > 0:
            zero = torch.zeros((), dtype=torch.float32, device=mask.device)
            token_loss = token_loss - entropy_coef * torch.where(mask, as_fp32(entropy), zero)
    elif entropy_coef > 0:
        raise ValueError("entropy_coef > 0 needs entropy")

    loss = aggregate_loss(loss_agg, token_loss, mask, **agg_options)
    return ObjectiveOutput(loss, metrics)

"""Off-policy corrections: per-token weights of the policy term for completions that the
current policy did not sample (an older policy version, or the same weights through another
engine or precision).

Three policies take part (AReaL's notation, Fu et al. 2025, arXiv:2505.24298, Sec. 5):

- pi_behav, the *behaviour* policy: what sampled the tokens, as the rollout engine reports
  it (``RolloutOutput.logprobs``, possibly from an older weight version, int8 or bf16);
- pi_prox, the *proximal* policy: the trainer's policy before this update (the ``old``
  log-probs of the policy loss, recomputed by the trainer with the current weights; with one
  epoch they are the update's own forward, detached);
- pi_theta, the policy being optimised (carries the gradient).

The policy losses (:mod:`rlvr.algo.policy_loss`) clip the ratio ``r = pi_theta / pi_prox``,
which keeps the trust region around the current policy however stale the sample. What the
ratio cannot see is that the sample came from pi_behav; every correction here weights the
token's policy term by a function of the behaviour ratio::

    rho_{i,t} = pi_prox(y_t) / pi_behav(y_t) = exp(log pi_prox - log pi_behav)

    loss_{i,t} = -w(rho_{i,t}) * min(r A, clip(r, 1 - eps, 1 + eps) A)

and the weight carries no gradient. The registered corrections differ only in ``w``:

============  ==========================================  =====================================
name          w(rho)                                      source
============  ==========================================  =====================================
``none``      1                                           on-policy GRPO
``tis``       min(rho, C)                                 Yao et al. 2025 (truncated IS)
``mis``       rho if rho <= C else 0                      masked IS (verl's token rejection)
``icepop``    rho if alpha <= rho <= beta else 0          IcePop (Ling team 2025)
``decoupled`` rho (if rho <= C else 0, when C is set)     AReaL's decoupled PPO objective
============  ==========================================  =====================================

Registry: :data:`OFF_POLICY_CORRECTIONS`; fn ``(prox_log_probs, behav_log_probs, mask,
**options) -> CorrectionWeights``, options ``(config) -> dict`` (the caps from ``algo.*``).
Inputs follow :mod:`rlvr.algo`'s conventions: ``FloatTensor[N, T]`` log-probs and a
``BoolTensor[N, T]`` completion mask; everything in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.algo.importance import DEFAULT_TIS_CAP, truncated_importance_weights
from rlvr.algo.policy_loss import RATIO_LOG_CLAMP
from rlvr.algo.registry import OFF_POLICY_CORRECTIONS
from rlvr.algo.utils import as_bool_mask, as_fp32, check_same_shape, masked_mean

#: Masked IS's cap: verl's default rollout importance-sampling threshold.
DEFAULT_MIS_CAP = 2.0
#: IcePop's band [alpha, beta] (Ling team 2025, "Small Leak Can Sink a Great Ship").
DEFAULT_ICEPOP_BAND = (0.5, 5.0)
#: The decoupled objective's mask on the behaviour weight (AReaL's ``behav_imp_weight_cap``).
DEFAULT_DECOUPLED_CAP = 5.0


@dataclass
class CorrectionWeights:
    """Result of an off-policy correction.

    Attributes:
        weights: FloatTensor[N, T] (fp32, detached), ``w(rho)`` on completion tokens, 0
            elsewhere (and 0 on masked tokens).
        metrics: detached 0-dim fp32 tensors over the completion tokens: ``is_weight_mean``
            and ``is_weight_max`` (of ``w``), ``is_truncated_fraction`` (tokens whose weight
            was capped), ``is_masked_fraction`` (tokens dropped, weight 0); a correction may
            add its own (``tis`` keeps ``tis_weight_mean``, ``tis_clipped_fraction``).
    """

    weights: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


def behaviour_ratio(prox_log_probs: Tensor, behav_log_probs: Tensor, mask: Tensor) -> Tensor:
    """``rho = exp(log pi_prox - log pi_behav)`` per token, detached, fp32; 1 off the mask.

    The log-ratio is clamped to +-20 before ``exp`` (as the policy losses do), so a padding
    token's garbage cannot overflow.

    Raises:
        ValueError: mismatched shapes.
    """
    check_same_shape(prox_log_probs=prox_log_probs, behav_log_probs=behav_log_probs, mask=mask)
    mask = as_bool_mask(mask)
    with torch.no_grad():
        log_ratio = as_fp32(prox_log_probs).detach() - as_fp32(behav_log_probs).detach()
        log_ratio = torch.where(mask, log_ratio, torch.zeros_like(log_ratio))
        return torch.exp(log_ratio.clamp(-RATIO_LOG_CLAMP, RATIO_LOG_CLAMP))


def ratio_metrics(ratio: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """``is_ratio_mean`` and ``is_ratio_max`` of the behaviour ratio over the mask (0 when
    the mask is empty): what any correction would see, logged whichever is configured."""
    mask = as_bool_mask(mask)
    peak = ratio[mask].max() if bool(mask.any()) else ratio.new_zeros(())
    return {"is_ratio_mean": masked_mean(ratio, mask), "is_ratio_max": peak}


def _weights(ratio: Tensor, mask: Tensor, weights: Tensor, truncated: Tensor,
             masked: Tensor) -> CorrectionWeights:
    zero = torch.zeros((), dtype=torch.float32)
    weights = torch.where(mask, weights, zero)
    peak = weights[mask].max() if bool(mask.any()) else zero
    metrics = {"is_weight_mean": masked_mean(weights, mask), "is_weight_max": peak,
               "is_truncated_fraction": masked_mean(truncated.float(), mask),
               "is_masked_fraction": masked_mean(masked.float(), mask)}
    return CorrectionWeights(weights, metrics)


def _check_cap(name: str, cap: float) -> None:
    if not cap > 1:
        raise ValueError(f"{name} must be > 1 (a cap at or below 1 drops on-policy tokens), "
                         f"got {cap}")


@OFF_POLICY_CORRECTIONS.register("none")
def no_correction(prox_log_probs: Tensor, behav_log_probs: Tensor,
                  mask: Tensor) -> CorrectionWeights:
    """``w = 1``: the policy term as on-policy GRPO has it (the sample's origin ignored).

    Shapes as :func:`behaviour_ratio`. Raises ``ValueError`` on mismatched shapes."""
    ratio = behaviour_ratio(prox_log_probs, behav_log_probs, mask)
    mask = as_bool_mask(mask)
    none = torch.zeros_like(mask)
    return _weights(ratio, mask, torch.ones_like(ratio), none, none)


def _tis_options(config) -> dict:
    return {"cap": config.algo.tis_cap or DEFAULT_TIS_CAP}


@OFF_POLICY_CORRECTIONS.register("tis", options=_tis_options)
def truncated_is(prox_log_probs: Tensor, behav_log_probs: Tensor, mask: Tensor, *,
                 cap: float = DEFAULT_TIS_CAP) -> CorrectionWeights:
    """Token-level truncated importance sampling (Yao et al. 2025, "Your Efficient RL Framework
    Secretly Brings You Off-Policy RL Training"; verl / slime ``tis_imp_ratio_cap``)::

        w = min(rho, C)

    Every token keeps some gradient; a token the sampler found much less likely than the
    trainer counts at most C times (bounded variance, a small bias on the capped tokens).
    :func:`rlvr.algo.importance.truncated_importance_weights` computes it (its metrics
    ``tis_weight_mean``, ``tis_clipped_fraction`` are kept).

    Args:
        cap: C > 0 (``algo.tis_cap``; 2.0 when unset, the paper's).

    Raises:
        ValueError: ``cap <= 0`` or mismatched shapes.
    """
    tis = truncated_importance_weights(prox_log_probs, behav_log_probs, mask, cap)
    ratio = behaviour_ratio(prox_log_probs, behav_log_probs, mask)
    mask = as_bool_mask(mask)
    out = _weights(ratio, mask, tis.weights, ratio > cap, torch.zeros_like(mask))
    out.metrics.update(tis.metrics)
    return out


def _mis_options(config) -> dict:
    return {"cap": config.algo.mis_cap}


@OFF_POLICY_CORRECTIONS.register("mis", options=_mis_options)
def masked_is(prox_log_probs: Tensor, behav_log_probs: Tensor, mask: Tensor, *,
              cap: float = DEFAULT_MIS_CAP) -> CorrectionWeights:
    """Token-level masked importance sampling: tokens whose ratio passes the cap are dropped
    instead of truncated (verl's rollout correction with token rejection; the masking variant
    of Yao et al. 2025)::

        w = rho if rho <= C else 0

    Unbiased on the tokens it keeps; a token the two policies disagree on that much is
    treated as noise rather than down-weighted evidence.

    Args:
        cap: C > 1 (``algo.mis_cap``, 2.0: verl's default threshold).

    Raises:
        ValueError: ``cap <= 1`` or mismatched shapes.
    """
    _check_cap("mis cap", cap)
    ratio = behaviour_ratio(prox_log_probs, behav_log_probs, mask)
    mask = as_bool_mask(mask)
    drop = ratio > cap
    return _weights(ratio, mask, torch.where(drop, torch.zeros_like(ratio), ratio),
                    torch.zeros_like(mask), drop & mask)


def _icepop_options(config) -> dict:
    return {"low": config.algo.icepop_low, "high": config.algo.icepop_high}


@OFF_POLICY_CORRECTIONS.register("icepop", options=_icepop_options)
def icepop(prox_log_probs: Tensor, behav_log_probs: Tensor, mask: Tensor, *,
           low: float = DEFAULT_ICEPOP_BAND[0],
           high: float = DEFAULT_ICEPOP_BAND[1]) -> CorrectionWeights:
    """IcePop (Ling team 2025, "Small Leak Can Sink a Great Ship: Boost RL Training on MoE with
    IcePop!", the Ring-1T report): tokens whose trainer / sampler probability ratio leaves the
    band [alpha, beta] get no gradient, the others are calibrated by the ratio::

        w = M(rho; alpha, beta) = rho if alpha <= rho <= beta else 0

    Two-sided, unlike ``mis``: a token the trainer finds far *less* likely than the sampler
    did (rho < alpha) is dropped too.

    Args:
        low: alpha in (0, 1) (``algo.icepop_low``, 0.5 in the blog).
        high: beta > 1 (``algo.icepop_high``, 5.0 in the blog).

    Raises:
        ValueError: a band that does not hold 1 inside it, or mismatched shapes.
    """
    if not 0 < low < 1 < high:
        raise ValueError(f"icepop band needs 0 < low < 1 < high, got [{low}, {high}]")
    ratio = behaviour_ratio(prox_log_probs, behav_log_probs, mask)
    mask = as_bool_mask(mask)
    drop = (ratio < low) | (ratio > high)
    return _weights(ratio, mask, torch.where(drop, torch.zeros_like(ratio), ratio),
                    torch.zeros_like(mask), drop & mask)


def _decoupled_options(config) -> dict:
    return {"cap": config.algo.decoupled_cap}


@OFF_POLICY_CORRECTIONS.register("decoupled", options=_decoupled_options)
def decoupled(prox_log_probs: Tensor, behav_log_probs: Tensor, mask: Tensor, *,
              cap: float | None = DEFAULT_DECOUPLED_CAP) -> CorrectionWeights:
    """The behaviour weight of AReaL's decoupled PPO objective (Fu et al. 2025,
    arXiv:2505.24298, Sec. 5.2, "Decoupled PPO objective")::

        J(theta) = E[ sum_t (pi_prox / pi_behav) * min(u_t A_t, clip(u_t, 1 - eps, 1 + eps) A_t) ]
        u_t = pi_theta(y_t) / pi_prox(y_t)

    The importance weight ``pi_prox / pi_behav`` moves the expectation from the behaviour
    policy (a stale version) to the proximal one, while the clip bounds the update around
    the proximal policy, not around the stale sampler (plain PPO on stale samples would clip
    around pi_behav and stall or overshoot). With the trainer's ``old`` log-probs as pi_prox,
    the policy losses already clip ``u``; this supplies the weight. As AReaL's
    implementation (``behav_imp_weight_cap``), tokens whose weight exceeds the cap are
    dropped (``w = 0``), not truncated::

        w = rho if cap is None or rho <= cap else 0

    Args:
        cap: the mask's threshold (> 1), or None for the plain weight (``algo.decoupled_cap``,
            5.0 as in AReaL's asynchronous example configs; its dataclass leaves it unset).

    Raises:
        ValueError: ``cap <= 1`` or mismatched shapes.
    """
    if cap is not None:
        _check_cap("decoupled cap", cap)
    ratio = behaviour_ratio(prox_log_probs, behav_log_probs, mask)
    mask = as_bool_mask(mask)
    drop = ratio > cap if cap is not None else torch.zeros_like(mask)
    return _weights(ratio, mask, torch.where(drop, torch.zeros_like(ratio), ratio),
                    torch.zeros_like(mask), drop & mask)


def compute_correction(name: str, prox_log_probs: Tensor, behav_log_probs: Tensor,
                       mask: Tensor, **options) -> CorrectionWeights:
    """Run the correction registered as ``name`` (``none``, ``tis``, ``mis``, ``icepop``,
    ``decoupled``); its weights, and ``is_ratio_mean`` / ``is_ratio_max`` added to its
    metrics.

    Raises:
        KeyError: for an unknown name (the message lists the registered ones).
        ValueError: from the correction (bad option, mismatched shapes).
    """
    out = OFF_POLICY_CORRECTIONS.get(name)(prox_log_probs, behav_log_probs, mask, **options)
    out.metrics.update(ratio_metrics(behaviour_ratio(prox_log_probs, behav_log_probs, mask),
                                     mask))
    return out


#: ``algo`` fields that only one correction reads, and its name
_CORRECTION_FIELDS = {"mis_cap": ("mis", DEFAULT_MIS_CAP),
                      "icepop_low": ("icepop", DEFAULT_ICEPOP_BAND[0]),
                      "icepop_high": ("icepop", DEFAULT_ICEPOP_BAND[1]),
                      "decoupled_cap": ("decoupled", DEFAULT_DECOUPLED_CAP)}


def check_correction_fields(algo) -> None:
    """Refuse an ``algo`` config section whose correction and policy-loss fields contradict
    each other (called by the run config's validation; reads attributes only).

    - an ``off_policy_correction`` that is neither ``auto`` nor registered;
    - a correction's own option changed from its default while another correction is
      selected (``mis_cap`` with ``icepop``): the setting would do nothing (``auto`` may
      resolve to ``decoupled``, so ``decoupled_cap`` is accepted with it);
    - ``gspo_eps_low`` / ``gspo_eps_high`` / ``gspo_token`` changed with another policy loss,
      or ``clip_eps`` / ``clip_eps_high`` changed with ``policy_loss: gspo`` (GSPO's sequence
      ratio has its own, much narrower, clip range).

    ``tis_cap`` is exempt: an int8 rollout sets it, and an explicit correction overrides it.

    Raises:
        ValueError: naming the field, its value and what to do.
    """
    chosen = getattr(algo, "off_policy_correction", "auto")
    if chosen != "auto" and chosen not in OFF_POLICY_CORRECTIONS:
        raise ValueError(f"off_policy_correction: "
                         f"{OFF_POLICY_CORRECTIONS.unknown_message(chosen)}, or auto")
    for name, (owner, default) in _CORRECTION_FIELDS.items():
        value = getattr(algo, name, default)
        if value == default or chosen == owner or (chosen == "auto" and owner == "decoupled"):
            continue
        raise ValueError(f"{name}: {value} applies to off_policy_correction: {owner} only, "
                         f"but off_policy_correction is {chosen!r}; set off_policy_correction: "
                         f"{owner} or remove {name}")
    gspo = getattr(algo, "policy_loss", None) == "gspo"
    for name, default in (("gspo_eps_low", 3e-4), ("gspo_eps_high", 4e-4),
                          ("gspo_token", False)):
        value = getattr(algo, name, default)
        if not gspo and value != default:
            raise ValueError(f"{name}: {value} applies to policy_loss: gspo only, but "
                             f"policy_loss is {getattr(algo, 'policy_loss', None)!r}; set "
                             f"policy_loss: gspo or remove {name}")
    for name, default in (("clip_eps", 0.2), ("clip_eps_high", 0.28)):
        value = getattr(algo, name, default)
        if gspo and value != default:
            raise ValueError(f"{name}: {value} does not apply to policy_loss: gspo, whose "
                             f"sequence ratio is clipped by gspo_eps_low / gspo_eps_high "
                             f"(the paper's 3e-4 / 4e-4); set those instead")

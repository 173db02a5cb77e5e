"""KL-divergence estimators between the policy and the frozen reference, and KL coefficients.

Per-token estimators (Schulman 2020, "Approximating KL Divergence", blog post,
http://joschu.net/blog/kl-approx.html). With tokens sampled from pi_theta and

    x = log pi_ref(o_t) - log pi_theta(o_t)

the estimators of KL(pi_theta || pi_ref) are ``k1 = -x``, ``k2 = x^2 / 2`` and
``k3 = exp(x) - x - 1``. All take ``log_probs, ref_log_probs: FloatTensor[N, T]`` (the per-token
log-probs of the sampled tokens under the policy and the reference) and return
``FloatTensor[N, T]`` in fp32; padding is the aggregator's business (pass the mask there).
Gradients flow through ``log_probs`` (the KL-in-loss form of GRPO, DeepSeekMath eq. 4);
``ref_log_probs`` is treated as a constant.

Registry: :data:`rlvr.algo.registry.KL_ESTIMATORS`, keys ``k1``, ``k2``, ``k3``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rlvr.algo.registry import KL_ESTIMATORS
from rlvr.algo.utils import as_fp32, check_ndim, check_same_shape, masked_sum

#: The log-ratio is clamped to [-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP] before ``exp`` (as verl and
#: OpenRLHF do for k3): exp(10) ~ 2.2e4 is finite in fp32, exp(100) is not.
LOG_RATIO_CLAMP = 10.0


def _log_ratio(log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    # x = log pi_ref - log pi_theta, in fp32, the reference side detached.
    check_same_shape(log_probs=log_probs, ref_log_probs=ref_log_probs)
    return as_fp32(ref_log_probs).detach() - as_fp32(log_probs)


@KL_ESTIMATORS.register("k1")
def kl_k1(log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    """k1 = -x = log pi_theta - log pi_ref (Schulman 2020): unbiased, high variance, can be < 0.

    Args:
        log_probs: FloatTensor[N, T], policy log-probs of the sampled tokens.
        ref_log_probs: FloatTensor[N, T], reference log-probs of the same tokens.

    Returns:
        FloatTensor[N, T] (fp32).
    """
    return -_log_ratio(log_probs, ref_log_probs)


@KL_ESTIMATORS.register("k2")
def kl_k2(log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    """k2 = x^2 / 2 (Schulman 2020): biased, low variance, always >= 0.

    Args:
        log_probs: FloatTensor[N, T].
        ref_log_probs: FloatTensor[N, T].

    Returns:
        FloatTensor[N, T] (fp32).
    """
    return 0.5 * _log_ratio(log_probs, ref_log_probs) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    """k3 = exp(x) - x - 1 (Schulman 2020; GRPO's choice, DeepSeekMath arXiv:2402.03300 eq. 4).

    Unbiased, low variance, always >= 0. ``x`` is clamped to [-10, 10] before ``exp`` so a
    token the reference finds wildly more likely cannot overflow (gradient is zero beyond the
    clamp).

    Args:
        log_probs: FloatTensor[N, T].
        ref_log_probs: FloatTensor[N, T].

    Returns:
        FloatTensor[N, T] (fp32).
    """
    x = _log_ratio(log_probs, ref_log_probs).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.exp(x) - x - 1.0


def kl_divergence(name: str, log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    """Run the KL estimator registered as ``name`` (``k1``, ``k2``, ``k3``).

    Raises:
        KeyError: for an unknown name.
    """
    return KL_ESTIMATORS.get(name)(log_probs, ref_log_probs)


def kl_penalized_rewards(rewards: Tensor, kl: Tensor, mask: Tensor, coef: float) -> Tensor:
    """Fold the KL penalty into the reward instead of the loss (PPO-style, REINFORCE++).

    Formula (Ziegler et al. 2019, arXiv:1909.08593: the reward r - beta * log(pi / pi_ref) of
    its RL fine-tuning section, with the log-ratio estimated per token and summed)::

        R'_i = R_i - coef * sum_t KL_{i,t}

    The KL is detached: it shapes the reward and is not differentiated.

    Args:
        rewards: FloatTensor[N], outcome rewards.
        kl: FloatTensor[N, T], per-token KL estimates (e.g. from :func:`kl_k1`).
        mask: BoolTensor[N, T], true on completion tokens.
        coef: KL coefficient beta (>= 0).

    Returns:
        FloatTensor[N] (fp32).

    Raises:
        ValueError: on shape mismatch or ``coef < 0``.
    """
    check_ndim("rewards", rewards, 1)
    check_ndim("kl", kl, 2)
    if kl.shape[0] != rewards.shape[0]:
        raise ValueError(f"kl has {kl.shape[0]} rows but rewards has {rewards.shape[0]}")
    if coef < 0:
        raise ValueError(f"coef must be >= 0, got {coef}")
    return as_fp32(rewards) - coef * masked_sum(kl.detach(), mask, dim=1)


class FixedKLController:
    """A constant KL coefficient beta (R15: sweep 0.001, 0.003, 0.01, 0.03; start at 0.01).

    Attributes:
        value: the current coefficient.
    """

    def __init__(self, coef: float = 0.01) -> None:
        if coef < 0:
            raise ValueError(f"KL coefficient must be >= 0, got {coef}")
        self.value = float(coef)

    def update(self, current_kl: float, n_steps: int = 1) -> float:
        """No-op; returns the (unchanged) coefficient."""
        return self.value


class AdaptiveKLController:
    """Adaptive KL coefficient that steers the measured KL toward a target.

    Formula (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences",
    arXiv:1909.08593, the adaptive beta schedule of its RL fine-tuning section)::

        e_t = clip((KL_t - KL_target) / KL_target, -0.2, 0.2)
        beta_{t+1} = beta_t * (1 + K_beta * e_t)

    The paper uses K_beta = 0.1. Its released code writes the gain as ``n_steps / horizon``
    (samples seen in the update / a horizon, e.g. 10000); :meth:`update` accepts ``n_steps``
    and uses ``gain = n_steps / horizon`` when ``horizon`` is given, else ``gain``.

    Args:
        init_coef: initial beta (>= 0).
        target: target KL per completion (or per token; use the same unit in :meth:`update`).
        gain: K_beta, used when ``horizon`` is None.
        horizon: optional horizon, in samples.
        error_clip: bound on the proportional error (0.2 in the paper).
    """

    def __init__(
        self,
        init_coef: float,
        target: float,
        gain: float = 0.1,
        horizon: int | None = None,
        error_clip: float = 0.2,
    ) -> None:
        if init_coef < 0 or target <= 0:
            raise ValueError(f"need init_coef >= 0 and target > 0, got {init_coef}, {target}")
        self.value = float(init_coef)
        self.target = float(target)
        self.gain = float(gain)
        self.horizon = horizon
        self.error_clip = float(error_clip)

    def update(self, current_kl: float, n_steps: int = 1) -> float:
        """Update beta from the KL measured in the last step; returns the new beta.

        Args:
            current_kl: the measured KL (same unit as ``target``). A non-finite value leaves
                beta unchanged (a NaN step must not poison the controller, R38).
            n_steps: samples in the step (only used with ``horizon``).
        """
        if not math.isfinite(current_kl):
            return self.value
        error = (current_kl - self.target) / self.target
        error = max(-self.error_clip, min(self.error_clip, error))
        gain = n_steps / self.horizon if self.horizon else self.gain
        self.value *= 1.0 + gain * error
        return self.value

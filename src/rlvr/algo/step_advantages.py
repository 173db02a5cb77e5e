"""A GRPO step's advantage policy, as one pure function over the step's flat rows: which rows
count (valid verdicts), the estimator over them, the zero-variance groups (no gradient), the
optional reward noise and the weight on negative advantages.

Conventions as in :mod:`rlvr.algo.advantages`: N completions in a flat dimension, ``group_ids``
the prompt (group) of each, 0 .. B - 1.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from rlvr.algo.advantages import (
    add_reward_noise,
    compute_advantages,
    scale_negative_advantages,
    zero_variance_groups,
)


class StepAdvantages(NamedTuple):
    """What :func:`step_advantages` returns.

    Attributes:
        advantages: FloatTensor[N] (fp32); 0 for excluded rows and zero-variance groups.
        rows: LongTensor[n], the rows to train on: the valid rows of groups with non-zero
            reward variance, ascending.
        zero_variance: BoolTensor[B], the groups whose valid rows all got the same reward.
    """

    advantages: Tensor
    rows: Tensor
    zero_variance: Tensor


def step_advantages(rewards: Tensor, group_ids: Tensor, valid: Tensor, *, estimator: str,
                    options: dict | None = None, negative_scale: float = 1.0,
                    noise_std: float = 0.0, generator: torch.Generator | None = None
                    ) -> StepAdvantages:
    """Advantages, the rows to train on, and which groups had zero reward variance.

    Rows whose verifier failed (``valid`` false: status ``error``, e.g. a ``sandbox_error``
    of a code task; infrastructure, not the policy's fault) are left out of every statistic
    rather than scored 0: the estimator sees only the valid rows, so their group's mean and
    std, and with ``std_scale: batch`` or ``reinforce_pp_baseline`` the batch's std, are
    those of the valid rows; an excluded row gets advantage 0 and is not a train row. A group
    of only excluded rows trains nothing (and is not counted as zero-variance: it has no
    valid reward).

    Zero variance is judged on ``rewards`` before any noise (R14: a group whose rewards are
    all equal carries no signal; noise would only fake one). With ``noise_std`` > 0 Gaussian
    noise (:func:`rlvr.algo.advantages.add_reward_noise`) is drawn for all N rows from
    ``generator``, so its stream does not depend on which rows are valid. Negative
    advantages are weighted by ``negative_scale``
    (:func:`rlvr.algo.advantages.scale_negative_advantages`; 1 leaves them unchanged).

    Args:
        rewards: FloatTensor[N], the (shaped) reward per completion.
        group_ids: LongTensor[N], the prompt index of each completion (0 .. B - 1).
        valid: BoolTensor[N], false for rows to leave out.
        estimator: a key of :data:`rlvr.algo.registry.ADVANTAGE_ESTIMATORS`.
        options: the estimator's keyword options (e.g. ``std_scale``).
        negative_scale: weight of the negative advantages.
        noise_std: std of the reward noise (0: none).
        generator: the noise's random generator.

    Returns:
        :class:`StepAdvantages`.

    Raises:
        KeyError: ``estimator`` is not registered (from
            :func:`rlvr.algo.advantages.compute_advantages`).
    """
    r = rewards.clone()
    if noise_std > 0:  # drawn for all N rows, so the generator's stream is fixed
        r = add_reward_noise(r, noise_std, generator)
    adv = torch.zeros(len(r), dtype=torch.float32)
    zero_rows = torch.zeros(len(r), dtype=torch.bool)  # valid rows of zero-variance groups
    if bool(valid.any()):
        ids = group_ids[valid]
        zero_rows[valid] = zero_variance_groups(rewards[valid], ids).mask  # before noise
        adv[valid] = compute_advantages(estimator, r[valid], ids, **(options or {}))
        adv = scale_negative_advantages(adv, negative_scale)  # 1: unchanged
    trained = valid & ~zero_rows
    adv = torch.where(trained, adv, torch.zeros_like(adv))
    zero_groups = torch.zeros(int(group_ids.max()) + 1, dtype=torch.bool)
    zero_groups[group_ids[zero_rows]] = True
    return StepAdvantages(adv, torch.nonzero(trained).flatten(), zero_groups)

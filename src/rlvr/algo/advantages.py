"""Advantage estimators: critic-free baselines computed from outcome rewards of sampled groups.

Convention used throughout ``rlvr.algo``: a batch holds N = B * G completions in a flat
dimension; ``rewards: FloatTensor[N]`` holds one scalar reward per completion and
``group_ids: LongTensor[N]`` says which prompt (group) each completion was sampled for. Group ids
are arbitrary integers (they need not be contiguous or sorted) and groups may have different
sizes (e.g. after dynamic-sampling filters). :func:`make_group_ids` builds them for the usual
``[B, G]`` layout. Every estimator returns ``FloatTensor[N]`` in fp32, one advantage per
completion, to be broadcast over that completion's tokens.

Zero-variance groups (all rewards equal, R14) get an advantage of exactly 0.0: they are detected
by ``max == min`` within the group and masked, never divided by a near-zero std.

Registry: :data:`rlvr.algo.registry.ADVANTAGE_ESTIMATORS`, keys ``grpo``, ``dr_grpo``, ``rloo``,
``reinforce_pp_baseline``; ``grpo`` takes ``std_scale`` from the run config's
``algo.std_scale``, the others no options. :func:`scale_negative_advantages` weights any
estimator's negative advantages (``algo.negative_advantage_scale``).
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from rlvr.algo.registry import ADVANTAGE_ESTIMATORS
from rlvr.algo.utils import as_fp32, check_ndim, check_same_shape

StdScale = Literal["group", "batch", "none"]

#: Default epsilon added to the std (the formula sheet's range is 1e-4 .. 1e-6).
DEFAULT_EPS = 1e-6


class GroupStats(NamedTuple):
    """Per-group statistics of a flat reward vector.

    Attributes:
        index: LongTensor[N], the dense group index (0 .. num_groups - 1) of each completion,
            in the order of ``unique``.
        unique: LongTensor[num_groups], the sorted distinct group ids.
        count: LongTensor[num_groups], completions per group.
        mean: FloatTensor[num_groups], group mean reward.
        std: FloatTensor[num_groups], group *sample* std (divisor n - 1, as ``torch.std``,
            TRL and verl use); 0 for groups of size 1.
        zero_variance: BoolTensor[num_groups], true where all rewards of the group are equal
            (including groups of size 1).
    """

    index: Tensor
    unique: Tensor
    count: Tensor
    mean: Tensor
    std: Tensor
    zero_variance: Tensor


class ZeroVarianceGroups(NamedTuple):
    """Result of :func:`zero_variance_groups`.

    Attributes:
        mask: BoolTensor[N], true for completions whose group has zero reward variance.
        count: number of zero-variance groups.
        num_groups: number of groups in the batch (so ``count / num_groups`` is R35's fraction).
    """

    mask: Tensor
    count: int
    num_groups: int


def make_group_ids(
    num_prompts: int, group_size: int, device: torch.device | str | None = None
) -> Tensor:
    """Group ids for the flat layout of ``num_prompts`` prompts x ``group_size`` samples.

    Completions are assumed ordered prompt-major: ``[p0s0, p0s1, ..., p1s0, ...]``.

    Returns:
        LongTensor[num_prompts * group_size]: ``[0]*G + [1]*G + ...``.
    """
    return torch.arange(num_prompts, device=device).repeat_interleave(group_size)


def group_stats(rewards: Tensor, group_ids: Tensor) -> GroupStats:
    """Group means, sample stds and zero-variance flags of ``rewards``.

    Args:
        rewards: FloatTensor[N] (any float dtype; computed in fp32).
        group_ids: LongTensor[N].

    Raises:
        ValueError: if the tensors are not 1-D of equal length, or N == 0.
    """
    check_ndim("rewards", rewards, 1)
    check_same_shape(rewards=rewards, group_ids=group_ids)
    if rewards.numel() == 0:
        raise ValueError("rewards is empty")
    r = as_fp32(rewards)
    unique, index = torch.unique(group_ids, return_inverse=True)
    k = unique.numel()
    count = torch.bincount(index, minlength=k)
    countf = count.to(torch.float32)
    mean = torch.zeros(k, dtype=torch.float32, device=r.device).index_add_(0, index, r) / countf
    sq = (r - mean[index]) ** 2
    ssd = torch.zeros(k, dtype=torch.float32, device=r.device).index_add_(0, index, sq)
    std = torch.sqrt(ssd / (countf - 1).clamp(min=1))
    # Exact equality test (max == min) rather than std < tol: a float std of identical values
    # can come out as ~1e-8 instead of 0, and dividing by it would blow up.
    gmax = torch.full((k,), -torch.inf, device=r.device).scatter_reduce(0, index, r, "amax")
    gmin = torch.full((k,), torch.inf, device=r.device).scatter_reduce(0, index, r, "amin")
    zero = gmax == gmin
    std = torch.where(zero, torch.zeros_like(std), std)
    return GroupStats(index, unique, count, mean, std, zero)


def zero_variance_groups(rewards: Tensor, group_ids: Tensor) -> ZeroVarianceGroups:
    """Find the groups whose rewards are all equal (R14, R35); they carry no gradient.

    Call it on the rewards *before* any reward noise is added, so the count reflects the
    verifier's scores. Used for DAPO's dynamic sampling too (Yu et al. 2025, arXiv:2503.14476,
    Sec. 3.2: keep only groups with 0 < accuracy < 1, i.e. ``~mask``).

    Args:
        rewards: FloatTensor[N].
        group_ids: LongTensor[N].

    Returns:
        :class:`ZeroVarianceGroups` with ``mask: BoolTensor[N]``, ``count`` and ``num_groups``.
    """
    stats = group_stats(rewards, group_ids)
    return ZeroVarianceGroups(
        mask=stats.zero_variance[stats.index],
        count=int(stats.zero_variance.sum()),
        num_groups=int(stats.unique.numel()),
    )


def add_reward_noise(rewards: Tensor, sigma: float, generator: torch.Generator) -> Tensor:
    """Rewards plus i.i.d. Gaussian noise N(0, sigma^2) (R14's optional sigma = 0.01).

    The generator is required so the noise is reproducible (R8). Caveat: noise breaks the ties
    of a zero-variance group, so with ``std_scale="group"`` such a group's advantages become
    pure noise of magnitude ~1 (the std is ~sigma too); combine with ``std_scale="none"`` /
    ``dr_grpo`` if that is not what you want, and count zero-variance groups before adding noise.

    Args:
        rewards: FloatTensor[N].
        sigma: noise standard deviation, in reward units; 0 returns the rewards unchanged (fp32).
        generator: a ``torch.Generator`` (its device is where the noise is drawn).

    Raises:
        ValueError: if ``sigma < 0``.
    """
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    r = as_fp32(rewards)
    if sigma == 0:
        return r.clone()
    noise = torch.randn(r.shape, generator=generator, device=generator.device, dtype=torch.float32)
    return r + sigma * noise.to(r.device)


def _sample_std(x: Tensor) -> Tensor:
    # Sample std over all elements; 0 (not NaN) for a single element.
    return x.std(correction=1) if x.numel() > 1 else torch.zeros((), dtype=x.dtype, device=x.device)


def _std_scale(config) -> dict:
    return {"std_scale": config.algo.std_scale}


@ADVANTAGE_ESTIMATORS.register("grpo", options=_std_scale)
def grpo_advantages(
    rewards: Tensor, group_ids: Tensor, *, std_scale: StdScale = "group", eps: float = DEFAULT_EPS
) -> Tensor:
    """Group-relative advantage of GRPO.

    Formula (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300, Sec. 4.1.2, the outcome
    supervision advantage used in eq. 3)::

        A_i = (R_i - mean(R_group)) / (std(R_group) + eps)

    with the *sample* std (divisor G - 1), like ``torch.std``, TRL and verl.

    Args:
        rewards: FloatTensor[N], one reward per completion.
        group_ids: LongTensor[N], the prompt (group) of each completion.
        std_scale: the divisor: ``"group"`` (the group's std, GRPO), ``"batch"`` (the sample
            std of all N rewards, as TRL's ``scale_rewards="batch"``), or ``"none"`` (no
            division and no eps: Dr. GRPO's advantage).
        eps: added to the std, in reward units.

    Returns:
        FloatTensor[N]; exactly 0.0 for completions of zero-variance groups.

    Raises:
        ValueError: for an unknown ``std_scale`` or malformed inputs.
    """
    if std_scale not in ("group", "batch", "none"):
        raise ValueError(f"std_scale must be 'group', 'batch' or 'none', got {std_scale!r}")
    stats = group_stats(rewards, group_ids)
    r = as_fp32(rewards)
    zero = stats.zero_variance[stats.index]
    centred = torch.where(zero, torch.zeros_like(r), r - stats.mean[stats.index])
    if std_scale == "none":
        return centred
    scale = stats.std[stats.index] if std_scale == "group" else _sample_std(r)
    return torch.where(zero, torch.zeros_like(r), centred / (scale + eps))


@ADVANTAGE_ESTIMATORS.register("dr_grpo")
def dr_grpo_advantages(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """Dr. GRPO advantage: the group mean subtracted, no std division.

    Formula (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective",
    arXiv:2503.20783, the Dr. GRPO objective): ``A_i = R_i - mean(R_group)``. Dividing by
    the std up-weights groups that are almost all right or all wrong (a question-difficulty
    bias).

    Args:
        rewards: FloatTensor[N].
        group_ids: LongTensor[N].

    Returns:
        FloatTensor[N]; exactly 0.0 for zero-variance groups.
    """
    return grpo_advantages(rewards, group_ids, std_scale="none")


@ADVANTAGE_ESTIMATORS.register("rloo")
def rloo_advantages(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """REINFORCE leave-one-out (RLOO) advantage.

    Formula (Kool et al. 2019, "Buy 4 REINFORCE Samples, Get a Baseline for Free!";
    Ahmadian et al. 2024, "Back to Basics", arXiv:2402.14740)::

        A_i = R_i - 1/(G-1) * sum_{j != i} R_j  =  G/(G-1) * (R_i - mean(R_group))

    Args:
        rewards: FloatTensor[N].
        group_ids: LongTensor[N]; each group needs >= 2 completions for a baseline.

    Returns:
        FloatTensor[N]; 0.0 for zero-variance groups and for groups of size 1.
    """
    stats = group_stats(rewards, group_ids)
    r = as_fp32(rewards)
    g = stats.count[stats.index].to(torch.float32)
    zero = stats.zero_variance[stats.index]
    adv = g / (g - 1).clamp(min=1) * (r - stats.mean[stats.index])
    return torch.where(zero, torch.zeros_like(r), adv)


@ADVANTAGE_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline_advantages(
    rewards: Tensor, group_ids: Tensor, *, eps: float = DEFAULT_EPS
) -> Tensor:
    """REINFORCE++-baseline: group mean subtracted, then normalised over the whole batch.

    Formula (Hu 2025, "REINFORCE++", arXiv:2501.03262, the "REINFORCE++ w/ baseline" variant)::

        a_i = R_i - mean(R_group);   A_i = (a_i - mean_batch(a)) / (std_batch(a) + eps)

    Group-centred values sum to zero within every group, so ``mean_batch(a)`` is zero by
    construction and is not subtracted again; that keeps zero-variance groups at exactly 0.
    Normalisation is over completions (outcome rewards are constant across a completion's
    tokens). "Batch" is the tensor passed in: in data-parallel training gather the rewards
    of all ranks first for a truly global normalisation.

    Args:
        rewards: FloatTensor[N] (any KL penalty already folded in, see
            :func:`rlvr.algo.kl.kl_penalized_rewards`).
        group_ids: LongTensor[N].
        eps: added to the batch std.

    Returns:
        FloatTensor[N]; exactly 0.0 for zero-variance groups.
    """
    centred = grpo_advantages(rewards, group_ids, std_scale="none")
    return centred / (_sample_std(centred) + eps)


def scale_negative_advantages(advantages: Tensor, scale: float) -> Tensor:
    """Weight the negative advantages by ``scale``, the positive ones left as they are.

    The policy gradient of a group splits into positive-sample reinforcement (PSR: raise the
    completions above the group's baseline) and negative-sample reinforcement (NSR: lower
    those below it); Zhu et al. 2025, "The Surprising Effectiveness of Negative Reinforcement
    in LLM Reasoning", arXiv:2506.01347, Sec. 3, train each alone and weight the two (their
    W-REINFORCE, Sec. 5, weights PSR by 0.1 to keep pass@k at large k). NSR moves the
    probability it removes toward what the model already prefers, so where the model's mode is
    a wrong answer, NSR deepens that mode, and PSR is what raises greedy pass@1. Here the
    weight is on the NSR side::

        A'_i = A_i               if A_i >= 0
        A'_i = scale * A_i       if A_i < 0

    ``scale`` 1 is the estimator unchanged; 0 trains on the above-baseline completions only
    (like rejection-sampling fine-tuning); > 1 up-weights NSR (W-REINFORCE's direction).

    Args:
        advantages: FloatTensor[N], any estimator's output.
        scale: the NSR weight, >= 0.

    Returns:
        FloatTensor[N] (fp32); zeros stay exactly 0.0.

    Raises:
        ValueError: a negative or non-finite ``scale``.
    """
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(f"negative-advantage scale must be a finite number >= 0, got {scale!r}")
    a = as_fp32(advantages)
    return torch.where(a < 0, a * scale, a)


def compute_advantages(name: str, rewards: Tensor, group_ids: Tensor, **options) -> Tensor:
    """Run the advantage estimator registered as ``name`` (see the module docstring for keys).

    Raises:
        KeyError: for an unknown ``name`` (the message lists the registered ones).
    """
    return ADVANTAGE_ESTIMATORS.get(name)(rewards, group_ids, **options)

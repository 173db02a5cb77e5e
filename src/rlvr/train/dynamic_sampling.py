"""DAPO's dynamic sampling (Yu et al. 2025, arXiv:2503.14476, Sec. 3.2) over
:class:`~rlvr.train.rollouts.ScoredRollouts`: while fewer than ``grpo.prompts_per_step``
groups have reward variance, collect another round of groups from the rollout source (at most
``grpo.dynamic_sampling_rounds`` extra rounds); the update then trains the first
``prompts_per_step`` groups with variance, in draw order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.algo.step_advantages import StepAdvantages
from rlvr.train.rollouts import RolloutSource, ScoredRollouts


@dataclass
class Judged:
    """A batch of scored rollouts as the step judged it.

    Attributes:
        rewards: FloatTensor[N] (fp32), the verifiers' rewards (before shaping).
        advantages: the advantages, train rows and zero-variance groups of the shaped
            rewards (:func:`rlvr.algo.step_advantages.step_advantages`).
        metrics: the judging's metrics (reward shaping's; dynamic sampling adds
            ``sampling_rounds`` and ``dropped_groups`` after more than one round).
    """

    rewards: Tensor
    advantages: StepAdvantages
    metrics: dict[str, float] = field(default_factory=dict)


def trained_groups(adv: StepAdvantages, prompt_index: Tensor) -> int:
    """The number of groups with at least one train row."""
    return len(torch.unique(prompt_index[adv.rows]))


def first_groups(adv: StepAdvantages, prompt_index: Tensor, k: int
                 ) -> tuple[StepAdvantages, int]:
    """Keep the train rows of the first ``k`` groups that have any (groups in draw order);
    the others' advantages become 0. Returns the kept advantages and the number of groups
    dropped."""
    rows = adv.rows
    groups = torch.unique(prompt_index[rows])  # sorted: draw order
    keep = torch.isin(prompt_index[rows], groups[:k])
    advantages = adv.advantages.clone()
    advantages[rows[~keep]] = 0.0
    return adv._replace(advantages=advantages, rows=rows[keep]), max(len(groups) - k, 0)


def collect_groups(source: RolloutSource, state, step: int, groups: int, extra_rounds: int,
                   judge: Callable[[ScoredRollouts], Judged]
                   ) -> tuple[ScoredRollouts, Judged]:
    """``groups`` groups from ``source`` for step ``step``, judged; then, while fewer than
    ``groups`` of all the groups so far have a train row, up to ``extra_rounds`` more rounds
    of ``groups`` (each rejudged over every round so far, rounds concatenated in order).
    After more than one round only the first ``groups`` groups with train rows train
    (:func:`first_groups`). Returns every round's rollouts as one and their judgement."""
    rounds = []
    for round_ in range(extra_rounds + 1):
        rounds.append(source.collect(state, step, groups, round_))
        scored = ScoredRollouts.concat(rounds)
        judged = judge(scored)
        if trained_groups(judged.advantages, scored.output.prompt_index) >= groups:
            break
    if len(rounds) > 1:
        kept, dropped = first_groups(judged.advantages, scored.output.prompt_index, groups)
        judged = Judged(judged.rewards, kept, {**judged.metrics,
                                               "sampling_rounds": float(len(rounds)),
                                               "dropped_groups": float(dropped)})
    return scored, judged

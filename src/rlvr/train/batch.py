"""The records of one GRPO step, one per index space.

A step has three sizes: B tasks (prompts), N = B * G completions (G per task) and n <= N
trained rows (the valid completions of groups with non-zero reward variance, less truncated
ones with ``algo.mask_truncated``). :class:`StepRollouts` has one row per completion (and the
per-task fields of its B tasks); :class:`TrainBatch` has one row per trained row, what the
policy update reads. Tensors follow :mod:`rlvr.algo`'s conventions; T is the completion width
and P the prompt block's width. The field groups and shape comments follow OpenRLHF's
``Experience``.

They live here, not in :mod:`rlvr.records`, because they hold :mod:`rlvr.rollout`,
:mod:`rlvr.rewards` and :mod:`rlvr.models` types, layers above the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from rlvr.envs.runner import EpisodeBatch
from rlvr.models.forward import SequenceBatch
from rlvr.records import Task
from rlvr.rewards.types import RewardResult
from rlvr.rollout import RolloutOutput


@dataclass
class TrainBatch:
    """The rows of a step that carry gradient, one row per trained row (n of them).

    Attributes:
        train_rows: LongTensor[n], the trained rows' indices into the step's N completions
            (non-zero-variance groups, no verifier infrastructure error).
        sequences: prompt + completion ids of the n rows (``input_ids`` LongTensor[n, P + T],
            ``completion_mask`` BoolTensor[n, T]).
        advantages: FloatTensor[n] (fp32), the rows' advantages.
        sampler_log_probs: FloatTensor[n, T] (fp32), the rollout engine's log-probs of the
            rows' tokens (for ``rollout_logprob_gap``).
        old_log_probs: FloatTensor[n, T], log pi_old of the rows under the policy before the
            update; set by :meth:`rlvr.train.grpo.GRPOStep.update` when ``grpo.mu > 1``, else
            ``None`` (on-policy: ratio 1).
        ref_log_probs: FloatTensor[n, T], log pi_ref of the rows; set by
            :meth:`~rlvr.train.grpo.GRPOStep.update` when the loss has a KL term, else
            ``None``.
    """

    # index into the step's completions
    train_rows: Tensor  # [n] long
    # the rows as the policy reads them
    sequences: SequenceBatch  # input_ids [n, P + T], completion_mask [n, T]
    # what the objective weighs them with
    advantages: Tensor  # [n] fp32
    sampler_log_probs: Tensor  # [n, T] fp32
    # filled in by the update, from the policy before its first epoch and the reference
    old_log_probs: Tensor | None = None  # [n, T]
    ref_log_probs: Tensor | None = None  # [n, T]


@dataclass
class StepRollouts:
    """Everything about one step's completions (the record that flows through a step: the
    sampler, the health monitor and the logs read it), one row per completion.

    Attributes:
        tasks: the B tasks of the step.
        zero_variance: BoolTensor[B], the groups whose valid completions all got the same
            (shaped) reward: no gradient (R35; the sampler's dynamic sampling and the health
            monitor's per-tier fraction read it).
        rollout: the engine output, N = B * G rows (``prompt_index`` maps rows to tasks).
        texts: N decoded completions.
        results: N reward results (reward, components, status).
        rewards: FloatTensor[N] (fp32), the verifiers' rewards (before shaping).
        advantages: FloatTensor[N] (fp32); 0 for zero-variance groups and excluded rows.
        train: the trained rows (:class:`TrainBatch`), or ``None`` when no row trains.
        metrics: the step's metrics (R10, R35, R36), set at the step's end.
        episodes: the step's episodes (:class:`rlvr.envs.runner.EpisodeBatch`: the
            rows are episodes, ``rollout`` its output, ``texts`` their decoded trajectories)
            when the run has an ``env`` section, else ``None``.
        task_indices: the sampler indices of the B tasks (what the sampler records).
    """

    # per task
    tasks: list[Task]  # [B]
    zero_variance: Tensor  # [B] bool
    # per completion
    rollout: RolloutOutput  # completion_ids [N, T], prompt_index [N]
    texts: list[str]  # [N]
    results: list[RewardResult]  # [N]
    rewards: Tensor  # [N] fp32
    advantages: Tensor  # [N] fp32
    # per trained row
    train: TrainBatch | None  # n rows
    metrics: dict[str, float] = field(default_factory=dict)
    episodes: EpisodeBatch | None = None
    task_indices: list[int] = field(default_factory=list)

    @property
    def scored_texts(self) -> list[str]:
        """The N texts the reward pipeline judged: ``texts`` for single-turn completions, each
        episode's final answer turn for episodes (what the health monitor's reward audit
        re-scores)."""
        return self.texts if self.episodes is None else self.episodes.scored

    @property
    def num_trained(self) -> int:
        """n, the number of trained rows (0 when none)."""
        return 0 if self.train is None else len(self.train.train_rows)

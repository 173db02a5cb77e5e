"""Where a GRPO step's scored rollouts come from: the :class:`RolloutSource` protocol, what a
source hands the step (:class:`ScoredRollouts`), and the two synchronous sources, single-turn
completions (:class:`SingleTurnSource`) and multi-turn episodes (:class:`EpisodeSource`, a
run config with an ``env:`` section).

A source draws its tasks from the run's sampler itself (``state.progress.sampler``), samples
them with the policy in ``state.models`` and scores them. The synchronous sources do it when
asked; an asynchronous one may do it ahead of time with older weights, which is why every
row carries the policy version that sampled it (``versions``: the number of GRPO updates
applied to those weights, ``state.progress.step`` at sampling time).

Multi-turn rows: one row per episode; its ``loss_mask`` holds the sampled ids only, and the
step trains, measures KL / entropy / lengths and shapes lengths on it (:func:`sampled_lengths`),
so environment tokens carry no gradient and count in no statistic. For a single-turn rollout
``loss_mask`` is ``completion_mask``: the same values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from rlvr.envs.registry import make_env
from rlvr.envs.runner import EpisodeBatch, EpisodeRunner
from rlvr.envs.types import FinishReason
from rlvr.progress import announce
from rlvr.records import Task
from rlvr.rewards.pipeline import ScoreRequest
from rlvr.rewards.types import RewardResult
from rlvr.rollout.types import RolloutOutput, SamplingParams, concat_rollouts
from rlvr.tasks.prompting import chat_messages
from rlvr.train.policy import sync_engine

if TYPE_CHECKING:
    from rlvr.train.state import TrainingState

#: Finish reasons of a cut completion or episode (``algo.mask_truncated``,
#: ``truncation_rate``): a turn the engine cut at its cap, or the episode's token budget
#: spent. Single-turn completions only ever have ``length``.
TRUNCATED = frozenset({FinishReason.length.value, FinishReason.max_tokens.value})


@dataclass
class ScoredRollouts:
    """One or more rounds of groups, rolled out and scored: what a rollout source hands the
    step. B groups (tasks), N rows (G per task; ``output.prompt_index`` maps rows to tasks).

    Attributes:
        task_indices: the sampler indices of the B tasks, in draw order.
        tasks: the B tasks.
        prompts: the N rows' prompt ids (row order).
        output: the rollout, N rows.
        texts: N decoded completions (episodes: their trajectories).
        results: N verdicts.
        episodes: the multi-turn episodes (:class:`rlvr.envs.runner.EpisodeBatch`), else
            ``None``.
        versions: LongTensor[N], the policy version that sampled each row (GRPO updates
            applied to its weights).
        seconds_rollout: wall seconds sampling (all rounds).
        seconds_reward: wall seconds scoring (all rounds; 0 for episodes, scored as they end).
    """

    task_indices: list[int]
    tasks: list[Task]
    prompts: list[list[int]]
    output: RolloutOutput
    texts: list[str]
    results: list[RewardResult]
    episodes: EpisodeBatch | None
    versions: Tensor
    seconds_rollout: float
    seconds_reward: float

    @staticmethod
    def concat(parts: list[ScoredRollouts]) -> ScoredRollouts:
        """Several rounds as one: tasks and rows in order, each part's ``prompt_index``
        shifted by the tasks before it (:func:`rlvr.rollout.types.concat_rollouts`), seconds
        summed. One part is returned as it is.

        Raises:
            ValueError: no parts.
        """
        if not parts:
            raise ValueError("ScoredRollouts.concat: no parts")
        if len(parts) == 1:
            return parts[0]
        counts = [len(p.tasks) for p in parts]
        episodes = (None if parts[0].episodes is None
                    else EpisodeBatch.concat([p.episodes for p in parts], counts))
        return ScoredRollouts(
            [i for p in parts for i in p.task_indices], [t for p in parts for t in p.tasks],
            [x for p in parts for x in p.prompts],
            concat_rollouts([p.output for p in parts], counts),
            [t for p in parts for t in p.texts], [r for p in parts for r in p.results],
            episodes, torch.cat([p.versions for p in parts]),
            sum(p.seconds_rollout for p in parts), sum(p.seconds_reward for p in parts))


class RolloutSource(Protocol):
    """What the GRPO step collects its rollouts from (:attr:`TrainingState.source
    <rlvr.train.state.TrainingState>`, chosen by :func:`rlvr.train.setup.step_runner`)."""

    def collect(self, state: TrainingState, step: int, groups: int,
                round_: int = 0) -> ScoredRollouts:
        """``groups`` groups of ``grpo.group_size`` rollouts, scored, for GRPO step ``step``
        (``round_``: a dynamic-sampling round after the first). Draws its tasks from
        ``state.progress.sampler`` itself (sync: now; async: ahead of time)."""

    def state_dict(self) -> dict:
        """In-flight state for a checkpoint (``{}`` when synchronous)."""

    def load_state_dict(self, d: dict) -> None:
        """Restore :meth:`state_dict`."""

    def close(self) -> None:
        """Stop whatever the source runs in the background."""


def sampling_params(config, stop_ids, step: int, round_: int = 0) -> SamplingParams:
    """A step's sampling: ``grpo`` temperature, top-p, ``max_new_tokens`` (per turn in an
    episode), G = ``group_size`` per task, seed ``seed * 1_000_003 + step`` (plus
    ``round_ * 2**40`` for a dynamic-sampling round after the first)."""
    g = config.grpo
    return SamplingParams(temperature=g.temperature, top_p=g.top_p,
                          max_new_tokens=g.max_new_tokens, n=g.group_size,
                          stop_token_ids=stop_ids,
                          seed=config.seed * 1_000_003 + step + round_ * 2**40)


def sampled_lengths(out: RolloutOutput) -> Tensor:
    """LongTensor[N], the sampled tokens per row (``loss_mask.sum(1)``): what length shaping
    and the length statistics count. A single-turn rollout (``loss_mask`` is
    ``completion_mask``) returns ``out.lengths`` itself."""
    if out.loss_mask is out.completion_mask:
        return out.lengths
    return out.loss_mask.sum(1)


def truncated(out: RolloutOutput) -> list[bool]:
    """Per row: the completion or episode was cut (:data:`TRUNCATED`)."""
    return [f in TRUNCATED for f in out.finish_reason]


def row_prompts(prompts: list[list[int]], out: RolloutOutput) -> list[list[int]]:
    """The prompt ids of each of the N rows of a single-turn rollout:
    ``prompts[prompt_index[r]]`` (an episode rollout has them per row already)."""
    return [prompts[i] for i in out.prompt_index.tolist()]


def score(rewards, tokenizer, tasks: list[Task], out: RolloutOutput
          ) -> tuple[list[str], list[RewardResult]]:
    """The N completions decoded and scored against their tasks' references (one
    :meth:`rlvr.rewards.pipeline.RewardPipeline.score_batch` call)."""
    texts = [tokenizer.decode(out.completion(r), skip_special_tokens=True)
             for r in range(out.num_rows)]
    requests = [ScoreRequest(t, tasks[i].reference, tasks[i].task_type)
                for t, i in zip(texts, out.prompt_index.tolist())]
    return texts, rewards.score_batch(requests)


def length_cap(source, max_new_tokens: int) -> int:
    """The length (sampled tokens) length shaping measures against: the source's
    ``length_cap(max_new_tokens)`` when it has one (episodes), else ``max_new_tokens``."""
    cap = getattr(source, "length_cap", None)
    return max_new_tokens if cap is None else cap(max_new_tokens)


def _draw(state: TrainingState, groups: int) -> tuple[list[int], list[Task], list[list[int]]]:
    idx = state.progress.sampler.next(groups)
    return (idx, [state.data.train_tasks[i] for i in idx],
            [state.data.train_prompts[i] for i in idx])


def _versions(state: TrainingState, rows: int) -> Tensor:
    return torch.full((rows,), state.progress.step, dtype=torch.long)


class SingleTurnSource:
    """Single-turn completions, sampled and scored when asked.

    Args:
        config: the run config (``grpo`` sampling, ``seed``).
        rewards: the reward pipeline that scores them.
    """

    def __init__(self, config, rewards):
        self.config, self.rewards = config, rewards

    def collect(self, state: TrainingState, step: int, groups: int,
                round_: int = 0) -> ScoredRollouts:
        """:meth:`RolloutSource.collect`: draw ``groups`` tasks, sample G completions of each
        with the current policy (``state.models.rollout_engine``), score them."""
        idx, tasks, prompts = _draw(state, groups)
        m = state.models
        announce("rollout")
        t0 = time.perf_counter()
        sync_engine(m.rollout_engine, m.policy)
        out = m.rollout_engine.generate(
            prompts, sampling_params(self.config, state.stop_ids, step, round_))
        t1 = time.perf_counter()
        announce("reward")
        texts, results = score(self.rewards, m.tokenizer, tasks, out)
        return ScoredRollouts(idx, tasks, row_prompts(prompts, out), out, texts, results, None,
                              _versions(state, out.num_rows), t1 - t0,
                              time.perf_counter() - t1)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, d: dict) -> None:
        pass

    def close(self) -> None:
        pass


class EpisodeSource(SingleTurnSource):
    """Multi-turn episodes (a run config with an ``env:`` section), played and scored when
    asked: each episode's verdict is the reward, scored by the environment as it ended.

    Args:
        config: the run config.
        runner: plays the episodes (:func:`episode_runner`).
    """

    def __init__(self, config, runner: EpisodeRunner):
        super().__init__(config, None)
        self.runner = runner

    def collect(self, state: TrainingState, step: int, groups: int,
                round_: int = 0) -> ScoredRollouts:
        """:meth:`RolloutSource.collect`: draw ``groups`` tasks, play G episodes of each."""
        idx, tasks, _ = _draw(state, groups)
        m = state.models
        announce("rollout")
        t0 = time.perf_counter()
        sync_engine(m.rollout_engine, m.policy)
        played = self.runner.play(m.rollout_engine, tasks,
                                  sampling_params(self.config, state.stop_ids, step, round_))
        t1 = time.perf_counter()
        return ScoredRollouts(idx, tasks, played.rollout.prompts, played.output, played.texts,
                              played.results, played, _versions(state, played.output.num_rows),
                              t1 - t0, time.perf_counter() - t1)

    def length_cap(self, max_new_tokens: int) -> int:
        """:meth:`rlvr.envs.runner.EpisodeRunner.length_cap`."""
        return self.runner.length_cap(max_new_tokens)


def episode_runner(state: TrainingState, config, rewards) -> EpisodeRunner | None:
    """The run's :class:`rlvr.envs.runner.EpisodeRunner` when it has an ``env`` section (its
    environment scoring with ``rewards``; each task prompted with its chat messages: the
    run's instruction for it and ``data.one_shot``), else ``None`` (single-turn)."""
    if config.env is None:
        return None

    def messages_for(task):
        return chat_messages(task, state.data.instruction(task), config.data.one_shot)

    return EpisodeRunner(make_env(config.env, rewards), state.models.tokenizer, messages_for)


def rollout_source(state: TrainingState, config, rewards) -> RolloutSource:
    """The synchronous source of a run: episodes with an ``env`` section, else single-turn
    completions (the asynchronous one, ``grpo.max_staleness`` >= 1, is
    :class:`rlvr.train.async_source.AsyncSource`)."""
    runner = episode_runner(state, config, rewards)
    return SingleTurnSource(config, rewards) if runner is None else EpisodeSource(config,
                                                                                  runner)

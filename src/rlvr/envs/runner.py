"""Playing episodes of tasks with a model: an environment, the policy's tokenizer and each
task's chat messages (:class:`EpisodeRunner`), and what one call returns
(:class:`EpisodeBatch`): the rollout, the decoded trajectories and the verdicts. Training
(GRPO steps, validation) and ``rlvr eval`` all play episodes through it.

The verdicts are the ones the environment got from the reward pipeline as each episode ended
(:meth:`rlvr.envs.Environment.step_many`): nothing is scored twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlvr.envs.base import Environment
from rlvr.envs.episodes import EpisodeRollout, rollout_episodes
from rlvr.envs.summary import episode_metrics, episode_record
from rlvr.envs.types import Episode, Message
from rlvr.records import Task
from rlvr.rewards.types import RewardResult
from rlvr.rollout.types import RolloutOutput, SamplingParams, concat_rollouts


@dataclass
class EpisodeBatch:
    """The episodes of one call, N = B tasks x G episodes (the G of task i are rows
    i*G .. i*G+G-1).

    Attributes:
        rollout: :class:`rlvr.envs.episodes.EpisodeRollout` (``output``: one row per episode,
            ``loss_mask`` = sampled ids; ``prompts``: each row's prompt ids; ``episodes``).
        texts: N decoded trajectories: every id after the prompt, sampled and inserted,
            decoded with ``skip_special_tokens=True``.
        results: N reward results, each episode's verdict.
        scored: N texts the verdicts judged (the environment's
            :meth:`~rlvr.envs.Environment.scored_text`: the final answer turn).
    """

    rollout: EpisodeRollout
    texts: list[str]
    results: list[RewardResult]
    scored: list[str]

    @property
    def output(self) -> RolloutOutput:
        """The rollout's :class:`rlvr.rollout.RolloutOutput`."""
        return self.rollout.output

    @property
    def episodes(self) -> list[Episode]:
        """The N finished episodes."""
        return self.rollout.episodes

    def sampled_tokens(self, row: int) -> int:
        """Tokens the policy sampled in episode ``row`` (its ``loss_mask`` count)."""
        return int(self.output.loss_mask[row].sum())

    def metrics(self) -> dict[str, float]:
        """:func:`rlvr.envs.summary.episode_metrics` of the episodes."""
        return episode_metrics(self.episodes)

    @classmethod
    def concat(cls, parts: list[EpisodeBatch], task_counts: list[int]) -> EpisodeBatch:
        """Several calls' episodes as one (rows and tasks in order;
        :func:`rlvr.rollout.types.concat_rollouts`)."""
        rollout = EpisodeRollout(concat_rollouts([p.output for p in parts], task_counts),
                                 [x for p in parts for x in p.rollout.prompts],
                                 [e for p in parts for e in p.episodes])
        return cls(rollout, [t for p in parts for t in p.texts],
                   [r for p in parts for r in p.results], [t for p in parts for t in p.scored])

    def record(self, row: int) -> dict:
        """The sample-row fields of episode ``row`` (:func:`rlvr.envs.summary.episode_record`:
        the trajectory with trained / not-trained segments and their token counts, turns,
        tool calls and errors, finish reason)."""
        out = self.output
        k = int(out.lengths[row])
        return episode_record(self.episodes[row], out.loss_mask[row, :k].tolist())


class EpisodeRunner:
    """Plays episodes of tasks through a rollout engine.

    Args:
        env: the environment (it scores with the reward pipeline it was built with).
        tokenizer: the policy's tokenizer (decodes turns, renders prompts and observations).
        messages_for: task -> its chat messages (e.g.
            :func:`rlvr.tasks.prompting.chat_messages` with a run's instruction and one-shot
            setting); the environment's :meth:`~rlvr.envs.Environment.initial_messages` makes
            the episode's first prompt of them.
    """

    def __init__(self, env: Environment, tokenizer,
                 messages_for: Callable[[Task], list[Message]]):
        self.env, self.tokenizer, self.messages_for = env, tokenizer, messages_for

    def play(self, engine, tasks: Sequence[Task], params: SamplingParams) -> EpisodeBatch:
        """``params.n`` episodes of each task through ``engine`` (``max_new_tokens`` per turn;
        round r seeded ``params.seed + r``), with their trajectories and verdicts."""
        result = rollout_episodes(engine, self.env, self.tokenizer, list(tasks), None, params,
                                  [self.messages_for(t) for t in tasks])
        out = result.output
        texts = [self.tokenizer.decode(out.completion(r), skip_special_tokens=True)
                 for r in range(out.num_rows)]
        return EpisodeBatch(result, texts, [e.reward for e in result.episodes],
                            [self.env.scored_text(e) for e in result.episodes])

    def length_cap(self, max_new_tokens: int) -> int:
        """The most sampled tokens an episode can hold, what length shaping measures
        against: ``env.max_episode_tokens`` when set, else ``max_turns x max_new_tokens``
        (``single_turn``: ``max_new_tokens``, as for a single-turn completion)."""
        budget = self.env.config.max_episode_tokens
        return budget if budget is not None else self.env.max_turns * max_new_tokens

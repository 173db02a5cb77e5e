"""The pieces of a GRPO step that differ for multi-turn episodes (a run config with an
``env:`` section); the episodes themselves are played by
:class:`rlvr.envs.runner.EpisodeRunner`.

- Rewards: each episode's verdict (the environment scored it as it ended); advantages are
  group-relative over the G episodes of a task, one reward per episode.
- Prompts: each row's episode prompt, the chat template over the environment's initial
  messages (the ``tool`` environment's system message first).
- Lengths and truncation: the rollout's ``loss_mask`` holds the sampled ids only, and the
  step trains, measures KL / entropy / lengths and shapes lengths on it
  (:func:`sampled_lengths`), so environment tokens carry no gradient and count in no
  statistic. For a single-turn rollout ``loss_mask`` is ``completion_mask``: the same values.
"""

from __future__ import annotations

from torch import Tensor

from rlvr.envs.registry import make_env
from rlvr.envs.runner import EpisodeRunner
from rlvr.envs.types import FinishReason
from rlvr.rollout import RolloutOutput
from rlvr.tasks.prompting import chat_messages

#: Finish reasons of a cut completion or episode (``algo.mask_truncated``,
#: ``truncation_rate``): a turn the engine cut at its cap, or the episode's token budget
#: spent. Single-turn completions only ever have ``length``.
TRUNCATED = frozenset({FinishReason.length.value, FinishReason.max_tokens.value})


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


def episode_runner(state, config, rewards) -> EpisodeRunner | None:
    """The run's :class:`rlvr.envs.runner.EpisodeRunner` when it has an ``env`` section (its
    environment scoring with ``rewards``; each task prompted with its chat messages: the
    run's instruction for it and ``data.one_shot``), else ``None`` (single-turn)."""
    if config.env is None:
        return None

    def messages_for(task):
        return chat_messages(task, state.data.instruction(task), config.data.one_shot)

    return EpisodeRunner(make_env(config.env, rewards), state.tokenizer, messages_for)

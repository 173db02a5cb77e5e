"""Records of a multi-turn episode: why it ended, one sampled turn, one step's result, and the
episode itself (all per-episode state lives here, never in the environment)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rlvr.records import Task
from rlvr.rewards.types import RewardResult
from rlvr.tools.types import ToolOutcome

#: One chat message in OpenAI format: ``{"role": "user" | "assistant" | "system" | "tool",
#: "content": str}``.
Message = dict[str, Any]


class FinishReason(StrEnum):
    """Why an episode ended (a ``str``: ``FinishReason.stop == "stop" == str(FinishReason.stop)``,
    as the rollout engines' per-completion finish reasons are).

    - ``stop``: the policy ended it: the environment answered its turn with "done" (the one
      turn of ``single_turn``; a turn without a tool call in ``tool``).
    - ``length``: a turn reached the engine's per-turn token cap (``max_new_tokens``) before
      its end-of-turn token, with the episode's token budget not yet spent.
    - ``max_tokens``: the episode's tokens after the initial prompt (sampled and inserted)
      reached ``max_episode_tokens``: a turn cut at the budget, or an observation that would
      leave no room for another turn (not inserted: ``Episode.dropped_observation``; the
      engine ends it with :meth:`Environment.finish_many`).
    - ``max_turns``: the ``max_turns``-th assistant turn asked for more (a tool call); the call
      is not run.
    - ``tool_timeout``: a tool call ran past its time bound and the environment is set to end
      the episode then (``env.end_on_tool_timeout``; by default a timeout is an observation).

    Every ending is scored: the reward pipeline judges the episode's final text whatever the
    reason (a cut turn usually scores ``unparsed``, as a truncated completion does today).
    """

    stop = "stop"
    length = "length"
    max_tokens = "max_tokens"
    max_turns = "max_turns"
    tool_timeout = "tool_timeout"


@dataclass(frozen=True)
class Turn:
    """One sampled assistant turn, as the engine reports it to the environment.

    Attributes:
        text: the sampled ids decoded with ``skip_special_tokens=True`` (how the single-turn
            path decodes a completion before scoring it).
        tokens: how many ids were sampled in this turn (the end-of-turn token included).
        finish_reason: ``"stop"`` (the turn ended with a stop token) or ``"length"`` (the engine
            cut it: the per-turn cap or the episode's remaining budget).
    """

    text: str
    tokens: int = 0
    finish_reason: str = "stop"


@dataclass(frozen=True)
class StepResult:
    """The environment's answer to one turn.

    Attributes:
        observation: the message to insert before the next assistant turn (role ``tool`` or
            ``user``, as the environment decides); ``None`` when the episode is done.
        finish_reason: why the episode ended; ``None`` while it goes on.
        reward: the reward pipeline's verdict for the whole episode once done, else ``None``.
    """

    observation: Message | None = None
    finish_reason: FinishReason | None = None
    reward: RewardResult | None = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


@dataclass
class Episode:
    """The state of one episode (the G episodes of a task are G of these, side by side).

    Attributes:
        task: the task it plays.
        messages: the conversation so far (OpenAI chat format): the initial messages, then
            each assistant turn and each observation in order.
        initial: how many of ``messages`` are the initial ones (the prompt).
        max_turns: the environment's turn limit when the episode started.
        max_tokens: the episode's token budget after the prompt (``None``: no budget).
        turns: assistant turns so far.
        tokens: tokens after the prompt so far: sampled (:attr:`Turn.tokens`) plus inserted
            (:meth:`add_inserted`, which the engine calls with each observation's id count).
        tool_calls: the outcome of every tool call, in order.
        finish_reason: why it ended (``None`` while running).
        reward: the reward pipeline's verdict once done.
        state: scratch space for the environment's own per-episode data.
        dropped_observation: the last observation was not inserted: it would have filled
            the episode's token budget, leaving no room for another turn, so the episode
            ended there (``max_tokens``) and its ids stay within the budget.
    """

    task: Task
    messages: list[Message]
    initial: int
    max_turns: int
    max_tokens: int | None = None
    turns: int = 0
    tokens: int = 0
    tool_calls: list[ToolOutcome] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    reward: RewardResult | None = None
    state: dict[str, Any] = field(default_factory=dict)
    dropped_observation: bool = False

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def tokens_left(self) -> int | None:
        """Tokens the next turn may sample within the episode's budget (>= 0), or ``None``
        without a budget; the engine caps the turn at ``min(max_new_tokens, tokens_left)`` and
        ends the episode (``max_tokens``) when it is 0."""
        return None if self.max_tokens is None else max(0, self.max_tokens - self.tokens)

    def add_inserted(self, n: int) -> None:
        """Count ``n`` tokens the engine inserted (an observation's ids and the next turn's
        header) against the budget.

        Raises:
            ValueError: ``n`` is negative.
        """
        if n < 0:
            raise ValueError(f"inserted token count must be >= 0, got {n}")
        self.tokens += n

    @property
    def assistant_texts(self) -> list[str]:
        """The content of every assistant turn, in order."""
        return [m["content"] for m in self.messages[self.initial:] if m["role"] == "assistant"]

    def to_dict(self) -> dict:
        """Plain-data view for logs and samples: the task id, messages, counts, tool calls,
        finish reason and reward."""
        return {"id": self.task.id, "messages": [dict(m) for m in self.messages],
                "initial": self.initial, "turns": self.turns, "tokens": self.tokens,
                "tool_calls": [c.to_dict() for c in self.tool_calls],
                "finish_reason": None if self.finish_reason is None else self.finish_reason.value,
                "reward": None if self.reward is None else self.reward.to_dict()}

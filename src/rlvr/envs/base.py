"""The environment protocol: what an engine calls to play episodes, and the hooks a new
environment overrides.

An engine plays the G episodes of a task side by side::

    episodes = [env.start(task, messages) for _ in range(G)]   # messages: the task's chat
    # prompt ids: the chat template over episode.messages, with the generation prompt
    while live := [e for e in episodes if not e.done]:
        turns = [...]  # sample one turn per live episode: Turn(text, tokens, finish_reason),
                       # each capped at min(max_new_tokens, episode.tokens_left)
        for episode, result in zip(live, env.step_many(live, turns)):
            if not result.done:   # insert the observation's ids, then sample the next turn
                ids = observation_ids(tokenizer, episode.messages[:-1],
                                      episode.messages[-1:], stop_token_id)
                episode.add_inserted(len(ids))
        # an episode whose tokens_left is now 0 ends with env.finish_many([...], max_tokens)

A finished episode carries its ``finish_reason`` and ``reward``: the reward pipeline's verdict
(:class:`rlvr.rewards.RewardPipeline`, unchanged) on :meth:`Environment.scored_text` (the last
assistant turn) against the task's reference, for the task's type. Scoring is batched: all
episodes that end in one :meth:`~Environment.step_many` call are scored in one
``score_batch`` call.

A new environment overrides (each a small function of the episode, which holds all state):

- :meth:`~Environment.parse_action`: what the turn asks for, or ``None`` to end the episode;
- :meth:`~Environment.respond`: the observation message for each action (or a
  :class:`FinishReason` to end the episode);
- optionally :meth:`~Environment.initial_messages` (e.g. a system prompt),
  :meth:`~Environment.scored_text` and :meth:`~Environment.score_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rlvr.envs.config import EnvConfig
from rlvr.envs.types import Episode, FinishReason, Message, StepResult, Turn
from rlvr.records import Task
from rlvr.rewards.pipeline import ScoreRequest


class Environment:
    """Base class of environments: the episode loop's rules; subclasses add the hooks.

    Args:
        config: the environment's settings (limits, tools); default ``EnvConfig(name=name)``.
        rewards: the reward pipeline that scores finished episodes (a
            :class:`rlvr.rewards.RewardPipeline`, or anything with its ``score_batch``); the
            caller owns it (and closes it).

    Holds no per-episode state: one environment serves any number of episodes at once
    (not from several threads at a time).
    """

    name: ClassVar[str]

    def __init__(self, config: EnvConfig | None, rewards: Any):
        self.config = config if config is not None else EnvConfig(name=self.name)
        self.rewards = rewards

    # -- the engine's calls -------------------------------------------------------------------
    @property
    def max_turns(self) -> int:
        """The turn limit of new episodes (``config.max_turns``)."""
        return self.config.max_turns

    def start(self, task: Task, messages: Sequence[Message] | None = None) -> Episode:
        """A new episode of ``task``.

        Args:
            task: the task record.
            messages: the task's chat messages as the caller prompts it
                (:func:`rlvr.tasks.prompting.chat_messages`: the question with its
                instruction, after an optional worked example); default one user message
                holding ``task.prompt``. Copied, never changed.

        Returns:
            The episode; its ``messages`` are :meth:`initial_messages` (what the first prompt
            renders).
        """
        base = [{"role": "user", "content": task.prompt}] if messages is None else messages
        initial = self.initial_messages(task, [dict(m) for m in base])
        return Episode(task, initial, len(initial), self.max_turns,
                       self.config.max_episode_tokens)

    def step(self, episode: Episode, turn: Turn) -> StepResult:
        """:meth:`step_many` for one episode."""
        return self.step_many([episode], [turn])[0]

    def step_many(self, episodes: Sequence[Episode], turns: Sequence[Turn]) -> list[StepResult]:
        """Answer one sampled turn of each episode; results in input order.

        Each turn is appended to its episode (``turns`` and ``tokens`` counted), then, in order:
        a cut turn (``finish_reason != "stop"``) ends it (``max_tokens`` when the budget is
        spent, else ``length``); :meth:`parse_action` returning ``None`` ends it (``stop``); a
        spent budget ends it (``max_tokens``); the ``max_turns``-th turn ends it
        (``max_turns``); otherwise :meth:`respond` (one call for all the actions) gives the
        observation, appended to the episode, or a reason to end. Episodes that end are
        scored together.

        Raises:
            ValueError: the lists differ in length, an episode is already done, or a turn's
                ``finish_reason`` is neither ``"stop"`` nor ``"length"``.
        """
        if len(episodes) != len(turns):
            raise ValueError(f"step_many: {len(episodes)} episodes but {len(turns)} turns")
        for episode, turn in zip(episodes, turns):
            self._check_live(episode)
            if turn.finish_reason not in ("stop", "length"):
                raise ValueError(f"Turn.finish_reason must be 'stop' or 'length', got "
                                 f"{turn.finish_reason!r}")
        results: list[StepResult | None] = [None] * len(episodes)
        ending: list[tuple[int, FinishReason]] = []
        acting: list[tuple[int, Any]] = []
        for i, (episode, turn) in enumerate(zip(episodes, turns)):
            episode.messages.append({"role": "assistant", "content": turn.text})
            episode.turns += 1
            episode.tokens += turn.tokens
            spent = episode.tokens_left == 0
            if turn.finish_reason != "stop":
                ending.append((i, FinishReason.max_tokens if spent else FinishReason.length))
                continue
            action = self.parse_action(episode, turn.text)
            if action is None:
                ending.append((i, FinishReason.stop))
            elif spent:
                ending.append((i, FinishReason.max_tokens))
            elif episode.turns >= episode.max_turns:
                ending.append((i, FinishReason.max_turns))
            else:
                acting.append((i, action))
        if acting:
            replies = self.respond([episodes[i] for i, _ in acting], [a for _, a in acting])
            if len(replies) != len(acting):
                raise ValueError(f"{type(self).__name__}.respond returned {len(replies)} "
                                 f"replies for {len(acting)} actions")
            for (i, _), reply in zip(acting, replies):
                if isinstance(reply, FinishReason):
                    ending.append((i, reply))
                else:
                    episodes[i].messages.append(reply)
                    results[i] = StepResult(observation=reply)
        for i, result in zip([i for i, _ in ending],
                             self._finish([(episodes[i], reason) for i, reason in ending])):
            results[i] = result
        return results  # type: ignore[return-value]

    def finish_many(self, episodes: Sequence[Episode], reason: FinishReason) -> list[StepResult]:
        """End live episodes for a limit the engine hit (``max_tokens``: an observation left
        no room for another turn), and score them; results in input order.

        Raises:
            ValueError: an episode is already done.
        """
        for episode in episodes:
            self._check_live(episode)
        return self._finish([(episode, FinishReason(reason)) for episode in episodes])

    # -- hooks ----------------------------------------------------------------------------------
    def initial_messages(self, task: Task, messages: list[Message]) -> list[Message]:
        """The episode's first messages, from the caller's (a fresh copy, free to change).
        Default: unchanged."""
        return messages

    def parse_action(self, episode: Episode, text: str) -> Any | None:
        """What the turn ``text`` asks the environment to do, or ``None``: the turn ends the
        episode (and is scored). Default: ``None`` (one turn)."""
        return None

    def respond(self, episodes: list[Episode], actions: list[Any]) -> list[Message | FinishReason]:
        """For each episode and the action its turn asked for, the observation message to
        insert (``{"role": "tool" | "user", "content": ...}``) or a :class:`FinishReason` to end
        the episode with. Called once per :meth:`step_many` with every acting episode, so
        slow work (tool calls) can run concurrently. Must not raise for anything the model
        wrote."""
        raise NotImplementedError(f"{type(self).__name__} parses actions but has no respond()")

    def scored_text(self, episode: Episode) -> str:
        """The text the reward pipeline judges: the last assistant turn."""
        return episode.assistant_texts[-1]

    def score_reference(self, episode: Episode) -> Any:
        """The reference the reward pipeline judges against. Default: the task's; an
        environment whose verifier needs the whole episode adds it (the ``verifiers``
        adapter: the conversation and state)."""
        return episode.task.reference

    # -- internals ------------------------------------------------------------------------------
    @staticmethod
    def _check_live(episode: Episode) -> None:
        if episode.done:
            raise ValueError(f"episode of task {episode.task.id!r} is already done "
                             f"({episode.finish_reason})")

    def _finish(self, ending: list[tuple[Episode, FinishReason]]) -> list[StepResult]:
        if not ending:
            return []
        requests = [ScoreRequest(self.scored_text(e), self.score_reference(e),
                                 e.task.task_type)
                    for e, _ in ending]
        rewards = self.rewards.score_batch(requests)
        results = []
        for (episode, reason), reward in zip(ending, rewards):
            episode.finish_reason, episode.reward = reason, reward
            results.append(StepResult(finish_reason=reason, reward=reward))
        return results

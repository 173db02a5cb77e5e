"""Multi-turn episode rollouts through any rollout engine: the ``torch`` engine plays them in
one decode loop whose KV cache continues across turns (``play_episodes``,
:mod:`rlvr.rollout.episode_decode`); every other engine (``hf``, ``vllm``: the engine protocol,
prompt token ids in, sampled ids and log-probs out) in turn-synchronous rounds through
``generate`` (:func:`play_rounds`: every live episode samples one turn per round from its exact
ids so far, which the engine re-prefills, then the environment answers all of them in one
:meth:`Environment.step_many`). :class:`EpisodeBook` is what both share: the ids so far and the
environment's answer to each finished turn.

Each episode is one token sequence ``prompt + sampled 1 + inserted 1 + sampled 2 + ...``: the
sampled ids are the engine's own (never re-tokenised), the inserted ids are the chat template's
for the observation (:func:`rlvr.envs.tokens.observation_ids`).

The result is a :class:`rlvr.rollout.RolloutOutput` whose "completion" is everything after the
prompt: ``completion_mask`` covers sampled and inserted ids, ``loss_mask`` only the sampled
ones, ``logprobs`` are the engine's for sampled ids and 0 on inserted ones, and
``finish_reason`` is the episode's :class:`FinishReason`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from rlvr.envs.base import Environment
from rlvr.envs.tokens import observation_ids
from rlvr.envs.types import Episode, FinishReason, Message, Turn
from rlvr.records import Task
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams


@dataclass
class EpisodeRollout:
    """The G episodes of each task, as one record.

    Attributes:
        output: N = len(tasks) * G rows (the G episodes of task i are rows i*G .. i*G+G-1);
            see the module doc for its masks.
        prompts: the N prompt id lists (each episode's initial prompt).
        episodes: the N finished :class:`Episode` records (messages, tool calls, reward).
    """

    output: RolloutOutput
    prompts: list[list[int]]
    episodes: list[Episode]

    @property
    def rewards(self) -> torch.Tensor:
        """FloatTensor[N] (fp32), each episode's reward (the pipeline's verdict on the whole
        episode): the one reward per row that group-relative advantages take, grouped by
        ``output.prompt_index`` over the G episodes of a task (an episode is a completion)."""
        return torch.tensor([e.reward.reward for e in self.episodes], dtype=torch.float32)


def _stop_id(sampled: list[int], finish: str, stop_ids: Sequence[int]) -> int | None:
    return sampled[-1] if finish == "stop" and sampled and sampled[-1] in stop_ids else None


def prompt_ids(tokenizer, messages: Sequence[Message]) -> list[int]:
    """The token ids of an episode's first prompt: the chat template over its initial
    ``messages`` with the generation prompt, tokenised without added special tokens (as
    :func:`rlvr.tasks.prompting.prompt_ids` encodes a single-turn prompt: the same ids for the
    same messages)."""
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True,
                                         tokenize=False)
    return list(tokenizer(text, add_special_tokens=False).input_ids)


def rollout_episodes(engine, env: Environment, tokenizer, tasks: Sequence[Task],
                     prompts: Sequence[Sequence[int]] | None, params: SamplingParams,
                     messages: Sequence[Sequence[Message]] | None = None) -> EpisodeRollout:
    """Run ``params.n`` episodes of each task to their end.

    An engine with a ``play_episodes(prompts, params, book)`` method (the ``torch`` engine)
    plays them in one decode loop whose KV cache continues across turns: each task's prompt
    is prefilled once for its G episodes, a row whose turn ends gets the observation's ids
    fed into its cache while the other rows keep sampling (:class:`EpisodeBook` is its link to
    the environment). Any other engine (``hf``, ``vllm``) plays turn-synchronous rounds
    through ``generate`` (:func:`play_rounds`). Both give episodes of the same structure.

    Args:
        engine: a rollout engine (``generate(prompt_ids, params)``).
        env: the environment (its config holds max turns, the episode token budget and the
            per-tool-call time bound).
        tokenizer: the policy's tokenizer (decodes turns, renders observations).
        tasks: the tasks; ``prompts[i]`` is task i's prompt ids (the chat template over
            ``messages[i]`` with the generation prompt).
        prompts: one prompt id list per task, or ``None``: each task's prompt is
            :func:`prompt_ids` over its episode's initial messages (what
            :meth:`Environment.initial_messages` made of ``messages[i]``: e.g. the ``tool``
            environment's system message first); ``EpisodeRollout.prompts`` returns them.
        params: sampling parameters; ``n`` = G episodes per task, ``max_new_tokens`` the
            per-turn cap (further capped by the episode's remaining budget). With a ``seed``
            the episodes are reproducible (rounds: round r samples with ``seed + r``).
        messages: the tasks' initial chat messages (default: one user message each).

    Returns:
        An :class:`EpisodeRollout`.

    Raises:
        ValueError: ``tasks``, ``prompts`` and ``messages`` differ in length.
    """
    if (prompts is not None and len(tasks) != len(prompts)) or (
            messages is not None and len(messages) != len(tasks)):
        raise ValueError(f"rollout_episodes: {len(tasks)} tasks, "
                         f"{None if prompts is None else len(prompts)} prompts, "
                         f"{None if messages is None else len(messages)} message lists")
    g = params.n
    episodes = [env.start(t, None if messages is None else messages[i])
                for i, t in enumerate(tasks) for _ in range(g)]
    if prompts is None:  # one rendering per task: its G episodes start alike
        prompts = [prompt_ids(tokenizer, episodes[i * g].messages) for i in range(len(tasks))]
    prompts = [list(map(int, p)) for p in prompts]
    rows = [prompts[i] for i in range(len(tasks)) for _ in range(g)]
    book = EpisodeBook(env, tokenizer, episodes, params)
    play = getattr(engine, "play_episodes", None)
    timing = play(prompts, params, book) if play is not None else play_rounds(engine, book, rows)
    return EpisodeRollout(_pack(book.ids, book.sampled_mask, book.logps, episodes, g, timing,
                                int(getattr(engine, "pad_token_id", 0) or 0)), rows, episodes)


class EpisodeBook:
    """The episodes of one rollout while an engine samples them: every row's ids so far
    (sampled and inserted), its loss mask and log-probs, and the environment that answers
    each finished turn. Row r is episode r (task ``r // G``).

    An engine asks :meth:`turn_cap` when a row starts a turn, and hands each finished turn to
    :meth:`end_turns`, which records it, steps the environment and returns the ids to insert
    before the row's next turn, or ``None`` when its episode is over.
    """

    def __init__(self, env: Environment, tokenizer, episodes: list[Episode],
                 params: SamplingParams):
        self.env, self.tokenizer, self.episodes, self.params = env, tokenizer, episodes, params
        self.ids: list[list[int]] = [[] for _ in episodes]
        self.sampled_mask: list[list[bool]] = [[] for _ in episodes]
        self.logps: list[list[float]] = [[] for _ in episodes]

    def turn_cap(self, row: int) -> int:
        """Tokens row ``row``'s next turn may sample: ``max_new_tokens``, capped by the
        episode's remaining budget."""
        left = self.episodes[row].tokens_left
        cap = self.params.max_new_tokens
        return cap if left is None else min(cap, left)

    def capacity_hint(self) -> int:
        """A first estimate of the most ids (sampled and inserted) an episode holds: the
        episode budget, else ``max_turns`` full turns and 32 inserted ids per observation
        (an engine grows its cache past it when an episode needs more)."""
        budget = self.env.config.max_episode_tokens
        if budget is not None:
            return budget  # an observation that would reach it is not inserted
        return self.env.max_turns * (self.params.max_new_tokens + 32)

    def end_turns(self, rows: Sequence[int], sampled: Sequence[Sequence[int]],
                  logps: Sequence[Sequence[float]], finishes: Sequence[str]
                  ) -> list[list[int] | None]:
        """Record one finished turn of each row (its sampled ids, their log-probs, ``"stop"``
        or ``"length"``), answer them all in one :meth:`Environment.step_many`, insert the
        observations' ids.

        Returns:
            Per row, in order: the inserted ids the row's cache must take before its next
            turn, or ``None`` when the episode ended (by the environment, or
            ``max_tokens``: the observation would leave no budget for another turn, and is not
            inserted).
        """
        turns = []
        for row, ids, lps, finish in zip(rows, sampled, logps, finishes):
            self.ids[row] += ids
            self.sampled_mask[row] += [True] * len(ids)
            self.logps[row] += list(lps)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            turns.append(Turn(text, len(ids), finish))
        results = self.env.step_many([self.episodes[r] for r in rows], turns)
        out: list[list[int] | None] = []
        spent = []
        for row, turn, result in zip(rows, turns, results):
            episode = self.episodes[row]
            if result.done:
                out.append(None)
                continue
            stop = _stop_id(self.ids[row][-turn.tokens:], turn.finish_reason,
                            self.params.stop_token_ids)
            obs = observation_ids(self.tokenizer, episode.messages[:-1], result.observation,
                                  stop)
            left = episode.tokens_left
            if left is not None and len(obs) >= left:
                # No turn could follow it, so no trained token would see it: end here rather
                # than overshoot the budget (a 1 KB tool output is ~1000 ids).
                episode.dropped_observation = True
                spent.append(episode)
                out.append(None)
                continue
            self.ids[row] += obs
            self.sampled_mask[row] += [False] * len(obs)
            self.logps[row] += [0.0] * len(obs)
            episode.add_inserted(len(obs))
            out.append(obs)
        if spent:
            self.env.finish_many(spent, FinishReason.max_tokens)
        return out


def play_rounds(engine, book: EpisodeBook, prompts: Sequence[list[int]]) -> RolloutTiming:
    """Turn-synchronous rounds through ``engine.generate``: every live episode samples one turn
    per round from its exact ids so far (``prompts[r]`` + ``book.ids[r]``: the engine
    re-prefills them), one :meth:`EpisodeBook.end_turns` per round. Round r is seeded
    ``params.seed + r``. Returns the decode timing summed over the rounds."""
    params, timing, round_ = book.params, RolloutTiming(), 0
    while True:
        live = [i for i, e in enumerate(book.episodes) if not e.done]
        if not live:
            return timing
        by_cap: dict[int, list[int]] = {}
        for i in live:
            by_cap.setdefault(book.turn_cap(i), []).append(i)
        turns: dict[int, tuple[list[int], list[float], str]] = {}
        for cap, group in by_cap.items():
            seed = None if params.seed is None else params.seed + round_
            out = engine.generate([prompts[i] + book.ids[i] for i in group],
                                  replace(params, n=1, max_new_tokens=cap, seed=seed))
            timing.tokens_generated += out.timing.tokens_generated
            timing.decode_seconds += out.timing.total_seconds
            for r, i in enumerate(group):
                sampled = out.completion(r)
                turns[i] = (sampled, out.logprobs[r, : len(sampled)].tolist(),
                            out.finish_reason[r])
        book.end_turns(live, *zip(*(turns[i] for i in live)))
        round_ += 1


def _pack(ids, sampled_mask, logps, episodes, g, timing, pad) -> RolloutOutput:
    n, width = len(ids), max((len(x) for x in ids), default=0)
    completion = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.bool)
    loss = torch.zeros((n, width), dtype=torch.bool)
    lp = torch.zeros((n, width), dtype=torch.float32)
    for r in range(n):
        k = len(ids[r])
        completion[r, :k] = torch.tensor(ids[r], dtype=torch.long)
        mask[r, :k] = True
        loss[r, :k] = torch.tensor(sampled_mask[r], dtype=torch.bool)
        lp[r, :k] = torch.tensor(logps[r], dtype=torch.float32)
    return RolloutOutput(completion, mask, lp, torch.arange(n) // g,
                         [str(e.finish_reason) for e in episodes], mask.sum(1), timing, pad,
                         loss_mask=loss)

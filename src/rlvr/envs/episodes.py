"""Multi-turn episode rollouts through any rollout engine's ``generate`` (the engine protocol:
prompt token ids in, sampled ids and log-probs out), so ``torch``, ``hf`` and ``vllm`` all run
episodes the same way.

Each episode is one token sequence ``prompt + sampled 1 + inserted 1 + sampled 2 + ...``: the
sampled ids are the engine's own (never re-tokenised), the inserted ids are the chat template's
for the observation (:func:`rlvr.envs.tokens.observation_ids`). Rounds are turn-synchronous:
every live episode samples one turn per round from its exact ids so far (the engine re-prefills
them), then the environment answers all of them in one :meth:`Environment.step_many`.

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
            per-turn cap (further capped by the episode's remaining budget). With a ``seed``,
            round r samples with ``seed + r``.
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
    rows = [list(map(int, prompts[i])) for i in range(len(tasks)) for _ in range(g)]
    ids: list[list[int]] = [[] for _ in episodes]
    sampled_mask: list[list[bool]] = [[] for _ in episodes]
    logps: list[list[float]] = [[] for _ in episodes]
    timing = RolloutTiming()
    round_ = 0
    while True:
        live = [i for i, e in enumerate(episodes) if not e.done]
        if not live:
            break
        by_cap: dict[int, list[int]] = {}
        for i in live:
            left = episodes[i].tokens_left
            by_cap.setdefault(params.max_new_tokens if left is None
                              else min(params.max_new_tokens, left), []).append(i)
        turns: dict[int, Turn] = {}
        for cap, group in by_cap.items():
            seed = None if params.seed is None else params.seed + round_
            out = engine.generate([rows[i] + ids[i] for i in group],
                                  replace(params, n=1, max_new_tokens=cap, seed=seed))
            timing.tokens_generated += out.timing.tokens_generated
            timing.decode_seconds += out.timing.total_seconds
            for r, i in enumerate(group):
                sampled = out.completion(r)
                ids[i] += sampled
                sampled_mask[i] += [True] * len(sampled)
                logps[i] += out.logprobs[r, : len(sampled)].tolist()
                text = tokenizer.decode(sampled, skip_special_tokens=True)
                turns[i] = Turn(text, len(sampled), out.finish_reason[r])
        results = env.step_many([episodes[i] for i in live], [turns[i] for i in live])
        spent = []
        for i, result in zip(live, results):
            if result.done:
                continue
            episode = episodes[i]
            stop = _stop_id(ids[i][-turns[i].tokens:], turns[i].finish_reason,
                            params.stop_token_ids)
            obs = observation_ids(tokenizer, episode.messages[:-1], result.observation, stop)
            ids[i] += obs
            sampled_mask[i] += [False] * len(obs)
            logps[i] += [0.0] * len(obs)
            episode.add_inserted(len(obs))
            if episode.tokens_left == 0:
                spent.append(episode)
        if spent:
            env.finish_many(spent, FinishReason.max_tokens)
        round_ += 1
    return EpisodeRollout(_pack(ids, sampled_mask, logps, episodes, g, timing,
                                int(getattr(engine, "pad_token_id", 0) or 0)), rows, episodes)


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

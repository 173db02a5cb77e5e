"""Sampling episodes for evaluation: :class:`EpisodeSampler` plays ``n`` episodes
per task of an environment through a rollout engine, so pass@k / maj@k count episodes.

Each episode becomes one :class:`EpisodeGenerated`: its ``text`` is the turn the verdict
judged (the environment's :meth:`~rlvr.envs.Environment.scored_text`, the final answer), and
it carries the verdict itself, which :func:`rlvr.eval.records.score_problems` uses instead of
scoring the text again, plus the trajectory fields that ``completions.jsonl`` records.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlvr.envs.runner import EpisodeBatch, EpisodeRunner
from rlvr.records import Generated, Task
from rlvr.rewards.types import RewardResult
from rlvr.rollout import SamplingParams


@dataclass(frozen=True)
class EpisodeGenerated(Generated):
    """One episode as a sampler returns it: :class:`rlvr.records.Generated` (``text``: the
    final answer; ``tokens``: sampled tokens of all turns; ``finish_reason``: the episode's)
    plus

    Attributes:
        verdict: the reward pipeline's result for the episode (the environment scored it as
            it ended).
        episode: the episode's record for completions.jsonl: ``trajectory`` (segments with
            ``trained``), ``turns``, ``tool_calls``, ``tool_errors``, ``finish_reason``.
    """

    verdict: RewardResult | None = None
    episode: dict = field(default_factory=dict)


def generated_from_episodes(batch: EpisodeBatch, runner: EpisodeRunner,
                            seconds: float) -> list[EpisodeGenerated]:
    """One :class:`EpisodeGenerated` per episode of ``batch``, in row order; ``seconds`` (the
    call's wall time) is split evenly over them; ``mean_logprob`` is the mean of the sampled
    tokens' log-probs (nats / token; inserted observation tokens were not sampled)."""
    out = batch.output
    per_row = seconds / out.num_rows if out.num_rows else 0.0
    generated = []
    for row, episode in enumerate(batch.episodes):
        sampled = out.loss_mask[row]
        mean_lp = float(out.logprobs[row][sampled].float().mean()) if bool(sampled.any()) else 0.0
        generated.append(EpisodeGenerated(
            text=runner.env.scored_text(episode), tokens=batch.sampled_tokens(row),
            seconds=per_row, finish_reason=episode.finish_reason.value, mean_logprob=mean_lp,
            verdict=episode.reward, episode=batch.record(row)))
    return generated


@dataclass
class EpisodeSampler:
    """Samples episodes from a local model through a rollout engine (a
    :class:`rlvr.eval.sampling.Sampler`).

    Attributes:
        engine: a rollout engine.
        runner: the environment, tokenizer and chat messages
            (:class:`rlvr.envs.runner.EpisodeRunner`; its environment scores with the
            evaluation's reward pipeline).
        temperature, top_p: sampling settings.
        max_new_tokens: the per-turn cap.
        stop_token_ids: ids that end a turn.
    """

    engine: object
    runner: EpisodeRunner
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = ()

    @property
    def tokenizer(self):
        """The model's tokenizer (as :class:`rlvr.eval.engine_sampler.EngineSampler`'s)."""
        return self.runner.tokenizer

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` episodes per task (rounds seeded ``seed``, ``seed + 1``, ...)."""
        params = SamplingParams(temperature=self.temperature, top_p=self.top_p,
                                max_new_tokens=self.max_new_tokens,
                                stop_token_ids=self.stop_token_ids, n=n, seed=seed)
        start = time.perf_counter()
        batch = self.runner.play(self.engine, tasks, params)
        flat = generated_from_episodes(batch, self.runner, time.perf_counter() - start)
        return [flat[i:i + n] for i in range(0, len(flat), n)]

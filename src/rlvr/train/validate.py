"""Periodic validation during training: greedy pass@1 and mean reward on held-out tasks (R28,
R32). The same function evaluates the base, SFT and trained models, so their numbers are
directly comparable; a run with an ``env`` section validates greedy episodes
(:func:`validate_episodes`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlvr.envs.summary import episode_metrics
from rlvr.eval.paired import verdict_string
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.summary import FAILED_STATUSES, accuracy_text, is_measured
from rlvr.rollout import SamplingParams


@dataclass(frozen=True)
class ValidationResult:
    """Greedy validation of one model.

    Attributes:
        pass_at_1: share of tasks whose greedy completion verifies correct, in [0, 1].
        mean_reward: mean aggregated reward.
        format_rate: share with the format component satisfied.
        truncation_rate: share that hit ``max_new_tokens``.
        mean_length: mean completion length (tokens).
        n: number of tasks.
        seconds: wall time (s).
        by_category: per task category (``Task.category``; a reasoning-gym task's dataset, an
            arithmetic task's level), ``{"n": tasks, "pass_at_1": share correct}``, sorted by
            category; empty when the tasks have fewer than two categories
            (:func:`category_pass_at_1`).
        verdicts: per-task verdict in task order, ``"1"`` correct and ``"0"`` not
            (:func:`rlvr.eval.paired.verdict_string`): two validations of one run compare
            problem by problem (:func:`rlvr.eval.paired.paired_gain`).
        verifier_errors: tasks whose verifier failed (status ``error`` or ``timeout``); they
            count as not correct in ``pass_at_1``.
        measured: ``False`` when at least half of the tasks are verifier errors
            (:func:`rlvr.rewards.summary.is_measured`): ``pass_at_1`` then says little about
            the model and is printed as not measured.
    """

    pass_at_1: float
    mean_reward: float
    format_rate: float
    truncation_rate: float
    mean_length: float
    n: int
    seconds: float
    by_category: dict[str, dict] = field(default_factory=dict)
    verdicts: str = ""
    verifier_errors: int = 0
    measured: bool = True

    def pass_at_1_text(self) -> str:
        """pass@1 as printed, saying how many tasks are verifier errors
        (:func:`rlvr.rewards.summary.accuracy_text`)."""
        return accuracy_text("pass@1", self.pass_at_1, self.verifier_errors, self.n)


def category_pass_at_1(tasks: Sequence[Task], correct: Sequence[bool]) -> dict[str, dict]:
    """Greedy pass@1 per task category: ``{category: {"n": tasks of it, "pass_at_1": share of
    them correct}}``, sorted by category (tasks without one under ``"(none)"``). Empty when
    there are fewer than two categories: the overall pass@1 already says it all.

    Raises:
        ValueError: ``tasks`` and ``correct`` differ in length.
    """
    if len(tasks) != len(correct):
        raise ValueError(f"category_pass_at_1: {len(tasks)} tasks but {len(correct)} verdicts")
    groups: dict[str, list[bool]] = {}
    for task, ok in zip(tasks, correct):
        label = "(none)" if task.category is None else str(task.category)
        groups.setdefault(label, []).append(bool(ok))
    if len(groups) < 2:
        return {}
    return {label: {"n": len(oks), "pass_at_1": sum(oks) / len(oks)}
            for label, oks in sorted(groups.items())}


def _verdict_fields(tasks: Sequence[Task], results) -> dict:
    """The :class:`ValidationResult` fields that come from the verdicts (one reward result
    per task, in task order): pass@1, mean reward, format rate, per-category pass@1, the
    verdict string and the verifier errors (counted wrong, and counted)."""
    n = len(tasks)
    correct = [r.status.value == "correct" for r in results]
    errors = sum(r.status.value in FAILED_STATUSES for r in results)
    return {"pass_at_1": sum(correct) / n, "mean_reward": sum(r.reward for r in results) / n,
            "format_rate": sum(r.components.get("format", 0.0) > 0 for r in results) / n,
            "by_category": category_pass_at_1(tasks, correct),
            "verdicts": verdict_string(correct), "verifier_errors": errors,
            "measured": is_measured(errors, n)}


def validate(engine, tokenizer, tasks: list[Task], prompts: list[list[int]],
             rewards: RewardPipeline, *, max_new_tokens: int, stop_token_ids: tuple[int, ...],
             batch_size: int = 64, progress: Callable[[int], None] | None = None
             ) -> tuple[ValidationResult, list[dict]]:
    """Greedy-decode every task once and score it. Returns the result and one sample record
    per task (``id``, ``completion``, ``reward``, ``status``, ``extracted``).
    ``progress(n)`` is called with the number of tasks decoded after each batch (a
    :class:`rlvr.progress.Phase`'s ``update``)."""
    start = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens,
                            stop_token_ids=stop_token_ids, n=1, seed=0)
    texts, lengths, truncated = [], [], []
    for i in range(0, len(prompts), batch_size):
        out = engine.generate(prompts[i:i + batch_size], params)
        for row in range(out.num_rows):
            texts.append(tokenizer.decode(out.completion(row), skip_special_tokens=True))
            lengths.append(int(out.lengths[row]))
            truncated.append(out.finish_reason[row] == "length")
        if progress is not None:
            progress(len(texts))
    results = rewards.score_batch([ScoreRequest(t, task.reference, task.task_type)
                                   for t, task in zip(texts, tasks)])
    n = len(tasks)
    samples = [{"id": task.id, "completion": text, "reward": r.reward, "status": r.status.value,
                "extracted": r.extracted} for task, text, r in zip(tasks, texts, results)]
    return ValidationResult(
        **_verdict_fields(tasks, results),
        truncation_rate=sum(truncated) / n,
        mean_length=sum(lengths) / n,
        n=n,
        seconds=time.perf_counter() - start,
    ), samples


def validate_episodes(engine, runner, tasks: list[Task], *, max_new_tokens: int,
                      stop_token_ids: tuple[int, ...], batch_size: int = 64,
                      progress: Callable[[int], None] | None = None
                      ) -> tuple[ValidationResult, list[dict], dict[str, float]]:
    """:func:`validate` for a run with an ``env`` section: one greedy episode per task
    (``max_new_tokens`` per turn), played by ``runner``
    (:class:`rlvr.envs.runner.EpisodeRunner`, its environment scoring with the validation
    reward pipeline); pass@1 and the reward are the episodes' verdicts, ``truncation_rate``
    counts episodes cut by a turn cap or the token budget, ``mean_length`` their sampled
    tokens.

    Returns:
        The result, one sample record per task (as :func:`validate`'s, ``completion`` the
        decoded trajectory, plus :meth:`rlvr.envs.runner.EpisodeBatch.record`'s trajectory,
        turns, tool calls and finish reason), and the episode metrics
        (:func:`rlvr.envs.summary.episode_metrics`) for the validation row.
    """
    start = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens,
                            stop_token_ids=stop_token_ids, n=1, seed=0)
    samples, lengths, episodes = [], [], []
    for i in range(0, len(tasks), batch_size):
        batch = runner.play(engine, tasks[i:i + batch_size], params)
        for row, (task, r) in enumerate(zip(tasks[i:i + batch_size], batch.results)):
            samples.append({"id": task.id, "completion": batch.texts[row], "reward": r.reward,
                            "status": r.status.value, "extracted": r.extracted,
                            **batch.record(row)})
            lengths.append(batch.sampled_tokens(row))
        episodes += batch.episodes
        if progress is not None:
            progress(len(samples))
    results = [e.reward for e in episodes]
    n = len(tasks)
    return ValidationResult(
        **_verdict_fields(tasks, results),
        truncation_rate=sum(s["finish_reason"] in ("length", "max_tokens")
                            for s in samples) / n,
        mean_length=sum(lengths) / n,
        n=n,
        seconds=time.perf_counter() - start,
    ), samples, episode_metrics(episodes)

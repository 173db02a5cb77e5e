"""Difficulty stratification (R24): sample n completions per problem from the model to be
trained, measure each problem's pass rate, and label it ``easy`` / ``medium`` / ``hard``.

GRPO learns only from groups whose rewards differ; a problem the model always (or never)
solves gives a zero-variance group and no gradient. Medium problems are where RL moves the
model, so training draws mostly from them (``data.tier_weights``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from rlvr.records import Generated, Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest

TIERS = ("easy", "medium", "hard")
#: defaults: with n = 8, easy = 6-8 correct, hard = 0-2 correct, medium = 3-5
EASY_AT_LEAST = 0.75
HARD_AT_MOST = 0.25


def tier(pass_rate: float, easy: float = EASY_AT_LEAST, hard: float = HARD_AT_MOST) -> str:
    """``easy`` if ``pass_rate >= easy``, ``hard`` if ``pass_rate <= hard``, else ``medium``.

    Raises:
        ValueError: thresholds out of order (``hard >= easy``).
    """
    if not 0 <= hard < easy <= 1:
        raise ValueError(f"tier thresholds need 0 <= hard < easy <= 1, got hard={hard}, "
                         f"easy={easy}")
    if pass_rate >= easy:
        return "easy"
    return "hard" if pass_rate <= hard else "medium"


def stratify(tasks: Sequence[Task], samples: Sequence[Sequence[Generated]],
             rewards: RewardPipeline, *, easy: float = EASY_AT_LEAST,
             hard: float = HARD_AT_MOST) -> list[Task]:
    """The tasks with ``pass_rate`` (share of their samples the verifier accepts) and
    ``difficulty`` set to their tier; a previous non-tier difficulty label (e.g. a generator
    level ``2d+-2d``) is kept in ``metadata["level"]``.

    Args:
        tasks: the problems.
        samples: the completions of each task (same order), e.g. from
            :func:`rlvr.eval.sampling.sample_batched`.
        rewards: scores the completions (its verifier decides "solved").

    Raises:
        ValueError: ``samples`` and ``tasks`` differ in length, or a task has no samples.
    """
    if len(samples) != len(tasks):
        raise ValueError(f"{len(samples)} sample lists for {len(tasks)} tasks")
    requests = [ScoreRequest(g.text, t.reference, t.task_type)
                for t, gens in zip(tasks, samples) for g in gens]
    results = iter(rewards.score_batch(requests))
    out = []
    for task, gens in zip(tasks, samples):
        if not gens:
            raise ValueError(f"task {task.id}: no samples")
        solved = sum(next(results).status.value == "correct" for _ in gens)
        rate = solved / len(gens)
        metadata = dict(task.metadata)
        if task.difficulty and task.difficulty not in TIERS:
            metadata["level"] = task.difficulty
        out.append(dataclasses.replace(task, pass_rate=rate, difficulty=tier(rate, easy, hard),
                                       metadata=metadata))
    return out


def histogram(tasks: Sequence[Task], n: int) -> dict:
    """``{"by_correct": {k: problems with k of n samples correct}, "by_tier": {tier: count},
    "mean_pass_rate": float}`` for stratified tasks."""
    by_correct = Counter(round(t.pass_rate * n) for t in tasks if t.pass_rate is not None)
    return {"by_correct": {k: by_correct.get(k, 0) for k in range(n + 1)},
            "by_tier": {name: sum(t.difficulty == name for t in tasks) for name in TIERS},
            "mean_pass_rate": ((sum(t.pass_rate or 0.0 for t in tasks) / len(tasks))
                               if tasks else 0.0)}

"""What a step's mean reward is expected to be, and how far it may fall by the luck of the draw
(the reward-collapse check's base and noise test).

A step's mean reward is the mean over its groups (one prompt's G completions each), and the
groups differ far more from one another than the completions inside one do: which prompts a
step drew decides most of its mean. With 2 prompts a step at a ~0.2 reward, a step where
both groups score 0 is a few-percent event (a prompt the policy solves 3 times in 10 scores 0
in all 8 completions 6% of the time), not a collapse. The standard error of the mean of n
groups is the spread of group means divided by sqrt(n) (the central limit theorem over
groups, each group one draw); the spread comes from the earlier steps of the window. A real
collapse persists, so the steps right before this one that had also fallen below the
threshold join the test: their groups add to n and their means to the fall.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict


def category_expected_reward(rows, step: int) -> float | None:
    """Mean over step ``step``'s completions among ``rows`` of their category's mean reward in
    the earlier steps of ``rows`` (a category not seen there counts the earlier overall mean);
    None when ``rows`` hold a single category or lack the earlier or the current completions."""
    before = [r for r in rows if r.step < step]
    now = [r for r in rows if r.step == step]
    if not before or not now or len({r.category for r in rows}) < 2:
        return None
    by_category: dict[str, list[float]] = defaultdict(list)
    for r in before:
        by_category[r.category].append(r.reward)
    overall = mean([r.reward for r in before])
    return mean([mean(by_category[r.category]) if r.category in by_category else overall
                  for r in now])


def mean(values) -> float:
    """Arithmetic mean of ``values`` (any iterable of numbers or bools); 0.0 when empty."""
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def group_means(rows, steps) -> list[float]:
    """Mean reward of each (step, prompt) group among ``rows`` (completion records with
    ``step``, ``prompt``, ``reward``) whose step is in ``steps``."""
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r.step in steps:
            groups[(r.step, r.prompt)].append(r.reward)
    return [mean(v) for v in groups.values()]


def low_run(history: list[dict], threshold: float) -> list[dict]:
    """The metric rows of the trailing run of steps whose ``reward_mean`` is below
    ``threshold`` (the current step, last in ``history``, first), oldest first."""
    run: list[dict] = []
    for row in reversed(history):
        value = row.get("reward_mean")
        if value is None or value >= threshold:
            break
        run.append(row)
    return run[::-1]


def fall_in_standard_errors(rows, history: list[dict], base: float,
                            threshold: float) -> float | None:
    """The fall from ``base`` of the trailing low steps' mean reward, in standard errors of the
    mean of their groups (module doc). None when it cannot be measured: fewer than 2 earlier
    groups in ``rows``, or no group of the low steps among them (records of the window only).

    Args:
        rows: the window's completion records (``step``, ``prompt``, ``reward``).
        history: metric rows, oldest first; the current step's last.
        base: the reward the check expected; threshold: the level the step fell below.
    """
    run = low_run(history, threshold)
    steps_low = {row["step"] for row in run}
    earlier = {r.step for r in rows} - steps_low
    before, low = group_means(rows, earlier), group_means(rows, steps_low)
    if len(before) < 2 or not low:
        return None
    spread = statistics.stdev(before)
    fall = base - mean([row["reward_mean"] for row in run])
    if spread == 0:
        return math.inf if fall > 0 else 0.0
    return fall / (spread / math.sqrt(len(low)))


def proportion_fall_in_standard_errors(before: float, now: float, n_before: int,
                                       n_now: int) -> float:
    """The fall from share ``before`` of ``n_before`` tasks to ``now`` of ``n_now``, in
    standard errors of the difference, both shares adjusted by one success and one failure
    (Agresti & Caffo 2000, "Simple and effective confidence intervals for proportions and
    differences of proportions", The American Statistician 54(4), eq. 2): 2 held-out tasks
    going from 100% to 0% are 1.6 standard errors, 200 going from 60% to 20% are 8.9."""
    p0 = (before * n_before + 1) / (n_before + 2)
    p1 = (now * n_now + 1) / (n_now + 2)
    se = math.sqrt(p0 * (1 - p0) / (n_before + 2) + p1 * (1 - p1) / (n_now + 2))
    return (p0 - p1) / se

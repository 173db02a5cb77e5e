"""Reward monitoring per category and source (R10).

A verifier that is biased against one category (the documents' example: references written as
"约为3.14" all judged wrong) shows up here as a category with a high parse-failure or
zero-reward rate.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Iterable

from rich.table import Table

from rlvr.io import encodable
from rlvr.rewards.types import RewardResult, Status


@dataclass(frozen=True)
class GroupStats:
    """Reward statistics of one group of completions.

    Attributes:
        count: completions in the group.
        reward_mean: mean aggregated reward.
        reward_var: population variance of the aggregated reward.
        correct: share with status ``correct``.
        parse_failure: share with status ``unparsed`` (no stable final answer).
        multiple_answers: share with status ``multiple_answers``.
        timeouts: number with status ``timeout``.
        errors: number with status ``error``.
    """

    count: int
    reward_mean: float
    reward_var: float
    correct: float
    parse_failure: float
    multiple_answers: float
    timeouts: int
    errors: int


def group_stats(results: list[RewardResult]) -> GroupStats:
    """Statistics of ``results`` (non-empty)."""
    n = len(results)
    rewards = [r.reward for r in results]
    mean = sum(rewards) / n
    share = lambda status: sum(r.status is status for r in results) / n  # noqa: E731
    return GroupStats(
        count=n,
        reward_mean=mean,
        reward_var=sum((x - mean) ** 2 for x in rewards) / n,
        correct=share(Status.correct),
        parse_failure=share(Status.unparsed),
        multiple_answers=share(Status.multiple_answers),
        timeouts=sum(r.status is Status.timeout for r in results),
        errors=sum(r.status is Status.error for r in results),
    )


def summarize(
    results: list[RewardResult],
    categories: Iterable[str | None],
    sources: Iterable[str | None],
) -> dict:
    """Summary as plain data: ``{"overall": stats, "by_category": {name: stats},
    "by_source": {name: stats}}``; records without a category / source are grouped under
    ``"-"``."""
    by_category: dict[str, list[RewardResult]] = defaultdict(list)
    by_source: dict[str, list[RewardResult]] = defaultdict(list)
    for result, category, source in zip(results, categories, sources):
        by_category[category or "-"].append(result)
        by_source[source or "-"].append(result)
    return {
        "overall": asdict(group_stats(results)) if results else None,
        "by_category": {k: asdict(group_stats(v)) for k, v in sorted(by_category.items())},
        "by_source": {k: asdict(group_stats(v)) for k, v in sorted(by_source.items())},
    }


def summary_table(summary: dict, title: str = "reward summary"):
    """A ``rich.table.Table`` of :func:`summarize`'s output (rows per category and source)."""
    table = Table(title=title)
    for column in ("group", "n", "reward mean", "reward var", "correct", "parse fail",
                   "multi-answer", "timeouts", "errors"):
        table.add_column(column, justify="left" if column == "group" else "right")

    def row(label: str, s: dict) -> None:
        label = encodable(label)  # a category with a lone surrogate: its escape, not a crash
        table.add_row(label, str(s["count"]), f"{s['reward_mean']:.3f}", f"{s['reward_var']:.3f}",
                      f"{s['correct']:.1%}", f"{s['parse_failure']:.1%}",
                      f"{s['multiple_answers']:.1%}", str(s["timeouts"]), str(s["errors"]))

    for kind in ("by_category", "by_source"):
        if len(summary[kind]) > 1 or "-" not in summary[kind]:
            for name, stats in summary[kind].items():
                row(f"{kind[3:]}={name}", stats)
    if summary["overall"]:
        row("all", summary["overall"])
    return table


#: Statuses that are no judgement of the completion (the verifier raised, returned no valid
#: verdict, or ran out of time).
FAILED_STATUSES = ("error", "timeout")

#: At or above this share of verifier errors and timeouts an accuracy is reported as not
#: measured: most of its rows say nothing about the model.
UNMEASURED_ERROR_SHARE = 0.5


def is_measured(errors: int, n: int) -> bool:
    """Whether an accuracy over ``n`` rows with ``errors`` verifier errors / timeouts
    measures the model: ``n > 0`` and ``errors / n < UNMEASURED_ERROR_SHARE``."""
    return n > 0 and errors / n < UNMEASURED_ERROR_SHARE


def accuracy_text(label: str, value: float, errors: int, n: int) -> str:
    """How to print an accuracy (``label`` e.g. ``"pass@1"``, ``value`` in [0, 1]) over ``n``
    rows of which ``errors`` are verifier errors or timeouts (counted wrong):

    - none: ``"pass@1 42.0%"``;
    - some: ``"pass@1 40.0% (2 of 50 rows verifier errors or timeouts, counted wrong)"``;
    - at least :data:`UNMEASURED_ERROR_SHARE` of them: ``"pass@1 NOT MEASURED: 50 of 50 rows
      are verifier errors or timeouts (0.0% counting them wrong)"``.
    """
    if not is_measured(errors, n):
        return (f"{label} NOT MEASURED: {errors} of {n} rows are verifier errors or timeouts "
                f"({value:.1%} counting them wrong)")
    if errors:
        return (f"{label} {value:.1%} ({errors} of {n} rows verifier errors or timeouts, "
                f"counted wrong)")
    return f"{label} {value:.1%}"

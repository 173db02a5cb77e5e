"""Reward monitoring per category and source (R10).

A verifier that is biased against one category (the documents' example: references written as
"约为3.14" all judged wrong) shows up here as a category with a high parse-failure or
zero-reward rate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from fractions import Fraction

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


class _Group:
    """Running statistics of one group, with no list of rewards kept: counts per status, the
    rewards' sum in input order (the mean: the same float as ``sum(rewards) / n``), and exact
    sums of the rewards and of their squares (``Fraction``: the population variance comes
    out correctly rounded)."""

    def __init__(self) -> None:
        self.count = 0
        self.total = Fraction(0)
        self.squares = Fraction(0)
        self.float_total = 0.0
        self.finite = True  # False once a reward is inf / nan: the variance is then nan
        self.status: Counter = Counter()

    def add(self, result: RewardResult) -> None:
        self.count += 1
        self.status[result.status] += 1
        self.float_total += result.reward
        if self.finite and math.isfinite(result.reward):
            value = Fraction(result.reward)
            self.total += value
            self.squares += value * value
        else:
            self.finite = False

    def stats(self) -> GroupStats:
        n = self.count
        mean_f = self.float_total / n
        if self.finite:
            mean = self.total / n
            var = float(self.squares / n - mean * mean)
        else:
            var = math.nan
        share = lambda status: self.status[status] / n  # noqa: E731
        return GroupStats(count=n, reward_mean=mean_f, reward_var=var,
                          correct=share(Status.correct), parse_failure=share(Status.unparsed),
                          multiple_answers=share(Status.multiple_answers),
                          timeouts=self.status[Status.timeout], errors=self.status[Status.error])


def group_stats(results: Iterable[RewardResult]) -> GroupStats:
    """Statistics of ``results`` (non-empty; any iterable, read once)."""
    group = _Group()
    for result in results:
        group.add(result)
    return group.stats()


class SummaryAccumulator:
    """:func:`summarize` one result at a time: memory grows with the number of categories
    and sources, not of results (``rlvr verify`` streams its input through it).

    Example::

        acc = SummaryAccumulator()
        for result, record in scored:
            acc.add(result, record.category, record.source)
        acc.summary()  # as summarize(...)
    """

    def __init__(self) -> None:
        self._overall = _Group()
        self._by: dict[str, dict[str, _Group]] = {"by_category": {}, "by_source": {}}

    def add(self, result: RewardResult, category: str | None, source: str | None) -> None:
        """Count one result under its category and source (None: ``"-"``)."""
        self._overall.add(result)
        for kind, name in (("by_category", category), ("by_source", source)):
            self._by[kind].setdefault(name or "-", _Group()).add(result)

    def summary(self) -> dict:
        """The summary so far, as :func:`summarize` returns it."""
        return {
            "overall": asdict(self._overall.stats()) if self._overall.count else None,
            **{kind: {k: asdict(g.stats()) for k, g in sorted(groups.items())}
               for kind, groups in self._by.items()},
        }


def summarize(
    results: Iterable[RewardResult],
    categories: Iterable[str | None],
    sources: Iterable[str | None],
) -> dict:
    """Summary as plain data: ``{"overall": stats, "by_category": {name: stats},
    "by_source": {name: stats}}``; records without a category / source are grouped under
    ``"-"``. ``reward_mean`` is ``sum(rewards) / n``; ``reward_var`` (population variance) is
    computed from exact sums, correctly rounded."""
    acc = SummaryAccumulator()
    for result, category, source in zip(results, categories, sources):
        acc.add(result, category, source)
    return acc.summary()


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

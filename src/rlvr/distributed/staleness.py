"""The staleness bound of asynchronous rollouts, as two pure pieces (no processes, no clock).

Policy version: ``v`` = the number of policy updates applied to the weights that sampled a
group. A trainer at version ``i`` (it has applied ``i`` updates; its next step is ``i + 1``)
trains on a group of version ``v`` with staleness ``s = i - v``. With a bound ``k`` it takes
only groups with ``s <= k``; ``k = 0`` is strictly on-policy.

- :class:`StalenessBuffer`: the groups that came back, in arrival order, each with its
  version. :meth:`StalenessBuffer.take` hands out only groups within the bound and drops (and
  counts) the older ones, so the trainer cannot train on a group staler than ``k`` whatever
  the workers' timing.
- :func:`may_submit`: the admission rule that keeps the workers from producing groups that
  will be dropped: at most ``(k + 1) * groups_per_step`` groups in the pipeline (in flight or
  waiting in the buffer), less those the trainer already took at its current version. A
  group admitted at version ``i`` is sampled at a version ``>= i`` and, consumed first in,
  first out, is trained at a version ``<= i + k``. This is
  AReaL's staleness-aware rollout controller (Fu et al. 2025, arXiv:2505.24298, sec. 5.1:
  a new rollout is admitted while ``N_r + 1 <= (i + eta + 1) * B``), counted over the groups
  still in the pipeline rather than over all groups ever generated, so that dropped groups
  are replaced instead of stalling the pipeline.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from typing import Any


def _check_int(name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def may_submit(live_groups: int, new_groups: int, groups_per_step: int, max_staleness: int,
               taken_at_version: int = 0) -> bool:
    """Whether ``new_groups`` more groups may enter the pipeline now.

    Args:
        live_groups: groups in flight (submitted, not returned) plus groups waiting in the
            buffer.
        new_groups: the size of the job to admit (>= 1).
        groups_per_step: groups one training step takes (B >= 1).
        max_staleness: the bound k >= 0.
        taken_at_version: groups the trainer already took at its current version (0 at the
            start of a step's collection, B once the step has its groups).

    Returns:
        ``live_groups + new_groups <= (k + 1) * B - taken_at_version``: the pipeline holds
        at most the groups the trainer will take at its current version and the next ``k``
        ones. With ``k = 0`` a step's groups are admitted only when that step starts
        collecting, i.e. with the current weights (strictly on-policy).

    Raises:
        ValueError: a negative count, ``new_groups`` or ``groups_per_step`` < 1.
    """
    _check_int("live_groups", live_groups)
    _check_int("new_groups", new_groups, 1)
    _check_int("groups_per_step", groups_per_step, 1)
    _check_int("max_staleness", max_staleness)
    _check_int("taken_at_version", taken_at_version)
    capacity = (max_staleness + 1) * groups_per_step - taken_at_version
    return live_groups + new_groups <= capacity


class StalenessBuffer:
    """Versioned groups waiting to be trained on, first in, first out.

    Every group taken and every group dropped is counted by its staleness (``current - v``,
    in versions): :meth:`step_metrics` reports and resets the counts of the last step, the
    ``taken`` / ``dropped`` counters keep the totals.

    Attributes:
        taken: Counter staleness -> groups handed out (whole run).
        dropped: Counter staleness -> groups dropped as too stale (whole run).
    """

    def __init__(self) -> None:
        self._items: deque[tuple[Any, int]] = deque()
        self.taken: Counter = Counter()
        self.dropped: Counter = Counter()
        self._step_taken: Counter = Counter()
        self._step_dropped: Counter = Counter()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        """``(group, version)`` pairs waiting, oldest arrival first."""
        return iter(list(self._items))

    def put(self, group: Any, version: int) -> None:
        """Add a group sampled by policy version ``version``.

        Raises:
            ValueError: ``version`` is not an int >= 0.
        """
        self._items.append((group, _check_int("version", version)))

    def take(self, n: int, current_version: int, max_staleness: int) -> list[tuple[Any, int]]:
        """Up to ``n`` groups within the bound, oldest arrival first.

        First every waiting group with ``version < current_version - max_staleness`` is
        dropped (it can only get staler) and counted; then up to ``n`` of the rest are
        removed and returned. Fewer than ``n`` come back when fewer are waiting: the caller
        waits for more and takes again.

        Args:
            n: groups wanted (>= 0).
            current_version: the trainer's version (updates applied so far).
            max_staleness: the bound k >= 0.

        Returns:
            ``[(group, version), ...]`` with ``current_version - k <= version``.

        Raises:
            ValueError: a bad argument, or a waiting group whose version is newer than
                ``current_version`` (sampled by weights the trainer has not made: the caller
                mixed up versions).
        """
        _check_int("n", n)
        _check_int("current_version", current_version)
        _check_int("max_staleness", max_staleness)
        newer = [v for _, v in self._items if v > current_version]
        if newer:
            raise ValueError(f"a group of policy version {newer[0]} is newer than the "
                             f"trainer's version {current_version}")
        keep: deque[tuple[Any, int]] = deque()
        for group, version in self._items:
            staleness = current_version - version
            if staleness > max_staleness:
                self.dropped[staleness] += 1
                self._step_dropped[staleness] += 1
            else:
                keep.append((group, version))
        out = [keep.popleft() for _ in range(min(n, len(keep)))]
        self._items = keep
        for _, version in out:
            self.taken[current_version - version] += 1
            self._step_taken[current_version - version] += 1
        return out

    def clear(self) -> int:
        """Remove every waiting group (not counted as dropped for staleness); returns how
        many there were."""
        n = len(self._items)
        self._items = deque()
        return n

    def step_metrics(self, max_staleness: int) -> dict[str, float]:
        """The counts since the last call, as metrics, then reset them.

        Returns:
            ``staleness_mean`` / ``staleness_max`` (versions, over the groups taken; 0.0 when
            none), ``staleness_hist_<s>`` for every s in 0..``max_staleness`` (groups taken
            with staleness s; every key present, so the columns are the same every step) and
            ``dropped_stale`` (groups dropped as staler than the bound).
        """
        taken, dropped = self._step_taken, self._step_dropped
        total = sum(taken.values())
        metrics = {
            "staleness_mean": (sum(s * c for s, c in taken.items()) / total) if total else 0.0,
            "staleness_max": float(max(taken)) if total else 0.0,
            "dropped_stale": float(sum(dropped.values())),
        }
        for s in range(max_staleness + 1):
            metrics[f"staleness_hist_{s}"] = float(taken.get(s, 0))
        self._step_taken, self._step_dropped = Counter(), Counter()
        return metrics

    def state_dict(self) -> dict:
        """The waiting groups (as given; torch-saveable if they are) and the counters."""
        return {"items": [(g, v) for g, v in self._items],
                "taken": dict(self.taken), "dropped": dict(self.dropped)}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s groups and totals (the per-step counts start empty)."""
        self._items = deque((g, int(v)) for g, v in state["items"])
        self.taken = Counter({int(k): v for k, v in state["taken"].items()})
        self.dropped = Counter({int(k): v for k, v in state["dropped"].items()})
        self._step_taken, self._step_dropped = Counter(), Counter()

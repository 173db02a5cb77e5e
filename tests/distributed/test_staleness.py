"""The staleness bound (rlvr.distributed.staleness): the buffer's take / drop rule by hand, then
a property over many seeded simulations of a pipeline with randomly delayed workers (random
job durations, random weight-delivery delays, several workers so groups come back out of
order): no group handed to the trainer is staler than k, every dropped group was staler than
k, nothing is lost, and with ``k = 0`` every trained group was sampled by the current weights.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, deque

import pytest

from rlvr.distributed.staleness import StalenessBuffer, may_submit


def test_take_drops_groups_staler_than_k_and_keeps_arrival_order():
    buf = StalenessBuffer()
    for name, version in [("a", 3), ("b", 5), ("c", 4), ("d", 6), ("e", 2)]:
        buf.put(name, version)
    # trainer at version 6, k = 2: versions >= 4 pass; "a" (s=3) and "e" (s=4) are dropped
    out = buf.take(2, current_version=6, max_staleness=2)
    assert out == [("b", 5), ("c", 4)]
    assert list(buf) == [("d", 6)]
    assert buf.dropped == Counter({3: 1, 4: 1})
    assert buf.taken == Counter({1: 1, 2: 1})
    metrics = buf.step_metrics(max_staleness=2)
    assert metrics == {"staleness_mean": 1.5, "staleness_max": 2.0, "dropped_stale": 2.0,
                       "staleness_hist_0": 0.0, "staleness_hist_1": 1.0,
                       "staleness_hist_2": 1.0}
    # the per-step counts were reset, the totals were not
    assert buf.step_metrics(max_staleness=2)["dropped_stale"] == 0.0
    assert sum(buf.dropped.values()) == 2
    # fewer waiting than asked: what there is
    assert buf.take(5, current_version=6, max_staleness=0) == [("d", 6)]
    assert len(buf) == 0


def test_take_refuses_a_group_from_a_future_version():
    buf = StalenessBuffer()
    buf.put("x", 4)
    with pytest.raises(ValueError, match="version 4 is newer than the trainer's version 3"):
        buf.take(1, current_version=3, max_staleness=1)
    with pytest.raises(ValueError, match="version must be an int >= 0"):
        buf.put("y", -1)


def test_state_dict_round_trip_keeps_groups_and_totals():
    buf = StalenessBuffer()
    buf.put("a", 0)
    buf.put("b", 1)
    buf.take(1, current_version=2, max_staleness=1)  # drops a (s=2), takes b (s=1)
    buf.put("c", 2)
    restored = StalenessBuffer()
    restored.load_state_dict(buf.state_dict())
    assert list(restored) == [("c", 2)]
    assert restored.dropped == Counter({2: 1}) and restored.taken == Counter({1: 1})


def test_may_submit_holds_the_groups_of_k_plus_one_versions():
    # B = 4, k = 1: 8 groups in the pipeline at the start of a step, 4 once it took its own
    assert may_submit(4, 4, 4, 1)
    assert not may_submit(5, 4, 4, 1)
    assert may_submit(0, 4, 4, 1, taken_at_version=4)
    assert not may_submit(1, 4, 4, 1, taken_at_version=4)
    # k = 0: nothing may enter once the step took its groups (the next step's weights differ)
    assert may_submit(0, 4, 4, 0)
    assert not may_submit(0, 1, 4, 0, taken_at_version=4)
    with pytest.raises(ValueError, match="groups_per_step"):
        may_submit(0, 1, 0, 1)


def simulate(k: int, seed: int, *, steps: int = 40, groups_per_step: int = 4,
             job_groups: int = 2, workers: int = 3, weight_delay: float = 1.5) -> dict:
    """A discrete-event run of the pipeline: the trainer collects ``groups_per_step`` groups
    per step through a :class:`StalenessBuffer`, admitting jobs with :func:`may_submit`;
    ``workers`` workers run jobs of ``job_groups`` groups in admission order, each job taking
    a random time (occasionally a long stall) and sampling with the newest weights that
    worker has received; new weights reach each worker a random delay after the update.
    Returns what the test checks."""
    rng = random.Random(seed)
    buf = StalenessBuffer()
    sampled: dict[tuple[int, int], int] = {}  # group -> the version that sampled it
    trained: list[int] = []  # staleness of every trained group, from the test's own records
    events: list = []  # (time, order, kind, payload)
    order = iter(range(10**9))
    pending: deque[int] = deque()  # admitted jobs not started
    busy = [None] * workers  # job running on each worker
    weights = [0] * workers  # each worker's newest weights
    now, version, next_job, returned = 0.0, 0, 0, 0

    def live() -> int:
        running = sum(1 for b in busy if b is not None)
        return (len(pending) + running) * job_groups + len(buf)

    def admit(taken: int) -> None:
        nonlocal next_job
        while may_submit(live(), job_groups, groups_per_step, k, taken):
            pending.append(next_job)
            next_job += 1

    def start_idle() -> None:
        for w in range(workers):
            if busy[w] is None and pending:
                job = pending.popleft()
                busy[w] = job
                for j in range(job_groups):
                    sampled[(job, j)] = weights[w]
                stall = rng.random() < 0.1
                duration = rng.uniform(0.2, 1.5) * (8.0 if stall else 1.0)
                heapq.heappush(events, (now + duration, next(order), "done", (w, job)))

    def advance() -> None:
        """Process the next event."""
        nonlocal now, returned
        now, _, kind, payload = heapq.heappop(events)
        if kind == "done":
            w, job = payload
            busy[w] = None
            returned += job_groups
            for j in range(job_groups):
                buf.put((job, j), sampled[(job, j)])
        else:  # new weights reach a worker (only ever newer ones)
            w, v = payload
            weights[w] = max(weights[w], v)
        start_idle()

    for _step in range(steps):
        got: list = []
        admit(0)
        start_idle()
        while True:
            for group, v in buf.take(groups_per_step - len(got), version, k):
                assert v == sampled[group]
                trained.append(version - v)
                got.append(group)
            if len(got) == groups_per_step:
                break
            admit(len(got))  # dropped groups left the pipeline: replace them
            start_idle()
            assert events, "the pipeline stalled: nothing in flight and not enough groups"
            advance()
        admit(len(got))  # keep the workers busy during the update
        start_idle()
        end = now + rng.uniform(0.3, 2.0)  # the update
        while events and events[0][0] <= end:
            advance()
        now, version = end, version + 1
        for w in range(workers):
            if weight_delay:
                heapq.heappush(events, (now + rng.uniform(0, weight_delay), next(order),
                                        "weights", (w, version)))
            else:
                weights[w] = version
    return {"trained": trained, "dropped": buf.dropped, "taken": buf.taken,
            "produced": returned, "waiting": len(buf)}


@pytest.mark.parametrize("k", [1, 2, 4])
def test_no_trained_group_is_staler_than_k_under_random_delays(k):
    staleness_seen: Counter = Counter()
    dropped_total = 0
    for seed in range(150):
        run = simulate(k, seed)
        assert len(run["trained"]) == 40 * 4
        assert max(run["trained"]) <= k
        assert all(s > k for s in run["dropped"]), run["dropped"]
        # nothing lost: every returned group was trained, dropped or is still waiting
        assert run["produced"] == (len(run["trained"]) + sum(run["dropped"].values())
                                   + run["waiting"])
        assert run["taken"] == Counter(run["trained"])
        staleness_seen.update(run["trained"])
        dropped_total += sum(run["dropped"].values())
    # the property is not vacuous: the delays made groups as stale as allowed, and some
    # staler ones were dropped
    assert staleness_seen[k] > 0
    assert dropped_total > 0


def test_max_staleness_zero_is_strictly_on_policy():
    for seed in range(150):
        run = simulate(0, seed)
        assert set(run["trained"]) == {0}
        assert all(s >= 1 for s in run["dropped"])


def test_admission_alone_prevents_drops_when_groups_return_in_order():
    """One worker and instant weight delivery: groups come back in admission order, each
    sampled at a version >= its admission version, so the admission rule alone keeps every
    group within the bound (nothing dropped)."""
    for k in (1, 2, 4):
        for seed in range(30):
            run = simulate(k, seed, workers=1, weight_delay=0.0)
            assert sum(run["dropped"].values()) == 0
            assert max(run["trained"]) <= k

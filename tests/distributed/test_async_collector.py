"""The trainer's side of asynchronous rollouts (rlvr.distributed.async_collector) over a
scripted in-process pool: a job runs only when the test says the workers had time for it
(``pool.run_one()``, between collections = while the trainer updates), with the newest
weights pushed before it, so every version below is worked out by hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rlvr.distributed.async_collector import AsyncCollector  # noqa: E402
from rlvr.distributed.rollout_jobs import PoolTimes, RolloutJob, RolloutResult  # noqa: E402
from rlvr.rollout.types import RolloutOutput, SamplingParams  # noqa: E402

N = 2  # completions per prompt


class ScriptedPool:
    """Runs the oldest submitted job when told to (``run_one``), or when ``poll`` is called
    and ``eager`` is set, with the newest pushed weights' version."""

    def __init__(self, version: int = 0, eager: bool = True):
        self.version, self.eager = version, eager
        self.queue: list[RolloutJob] = []
        self.done: list[RolloutResult] = []
        self.pushes: list[int] = []
        self.max_live_seen = 0
        self.names = ["scripted-0"]

    @property
    def in_flight(self) -> int:
        return sum(j.groups for j in self.queue) + sum(r.output.num_rows // N for r in self.done)

    def submit(self, job):
        self.queue.append(job)

    def push_weights(self, source, version):
        self.pushes.append(version)
        self.version = version
        return 0.25

    def run_one(self):
        job = self.queue.pop(0)
        rows = job.groups * N
        ids = torch.full((rows, 1), job.job_id)
        out = RolloutOutput(ids, torch.ones(rows, 1, dtype=torch.bool), torch.zeros(rows, 1),
                            torch.arange(rows) // N, ["stop"] * rows, torch.ones(rows,
                                                                                   dtype=torch.long))
        self.done.append(RolloutResult(job.job_id, job.prompts, out, self.version, "scripted-0",
                                       0.0, job.meta))

    def poll(self, timeout):
        if not self.done and self.eager and self.queue:
            self.run_one()
        done, self.done = self.done, []
        return done

    def times(self):
        return PoolTimes(rollout_idle=0.0, weight_sync=0.0)


def make_jobs(drawn: list[int]):
    def make_job(job_id: int, groups: int) -> RolloutJob:
        tasks = list(range(len(drawn), len(drawn) + groups))
        drawn.extend(tasks)
        return RolloutJob(job_id, [[1, 2, t] for t in tasks], SamplingParams(n=N, seed=job_id),
                          meta=tasks)
    return make_job


def run_steps(collector, pool, steps: int, start: int = 0, background: int = 1):
    """``steps`` collections at versions start, start + 1, ...; after each the workers run
    ``background`` queued jobs (during the update). Returns [(version, [(task, group
    version)])] and the metrics of each step."""
    trained, metrics = [], []
    for version in range(start, start + steps):
        groups = collector.collect(2, version, weights=dict)
        trained.append((version, [(g.meta, g.version) for g in groups]))
        metrics.append(collector.step_metrics())
        for _ in range(background):
            if pool.queue:
                pool.run_one()
    return trained, metrics


def test_one_step_off_policy_overlaps_and_trains_at_staleness_one():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=1)
    trained, metrics = run_steps(collector, pool, 5)
    # step 1 (version 0) admits jobs 0 and 1 (tasks 0-3); job 0 runs in the collection,
    # job 1 during the update with version 0; from then on each step trains the groups
    # sampled during the previous update: staleness exactly 1
    assert trained[0] == (0, [(0, 0), (1, 0)])
    assert trained[1] == (1, [(2, 0), (3, 0)])
    assert trained[2] == (2, [(4, 1), (5, 1)])
    assert trained[4] == (4, [(8, 3), (9, 3)])
    assert [m["staleness_mean"] for m in metrics] == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert metrics[3]["staleness_hist_1"] == 2.0 and metrics[3]["staleness_hist_0"] == 0.0
    assert sum(m["dropped_stale"] for m in metrics) == 0
    assert pool.pushes == [1, 2, 3, 4]
    assert metrics[1]["seconds_weight_sync"] == 0.0  # the scripted pool reports no time
    # tasks are drawn once each, in order, never more than two steps ahead
    assert drawn == list(range(len(drawn))) and len(drawn) == 12


def test_max_staleness_zero_admits_a_steps_groups_only_with_its_weights():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=0)
    trained, metrics = run_steps(collector, pool, 4)
    for version, groups in trained:
        assert [v for _, v in groups] == [version, version]
    assert not pool.queue and len(drawn) == 8  # nothing admitted ahead
    assert all(m["staleness_max"] == 0.0 for m in metrics)


def test_stale_groups_are_dropped_and_replaced():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=1)
    collector.collect(2, 0)
    pool.run_one()  # job 1 at version 0
    # the trainer jumps two versions (e.g. steps that trained on other data): job 1 is now
    # staler than 1, dropped; replacement jobs are admitted and sampled at version 2
    groups = collector.collect(2, 2, weights=dict)
    assert [(g.meta, g.version) for g in groups] == [(4, 2), (5, 2)]
    m = collector.step_metrics()
    assert m["dropped_stale"] == 2.0 and m["staleness_max"] == 0.0


def test_resume_keeps_waiting_groups_and_resubmits_jobs_in_flight():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=2)
    trained, _ = run_steps(collector, pool, 3, background=2)
    before = [t for _, groups in trained for t, _ in groups]
    before += [g.meta for g in collector.collect(1, 3, weights=dict)]
    # the save: the partner of the group just taken waits; other jobs are in flight
    state = collector.state_dict()
    waiting = [g.meta for g, _ in state["buffer"]["items"]]
    in_flight = [t for job in state["in_flight"] for t in job.meta]
    assert waiting and in_flight
    assert sorted(before + waiting + in_flight) == drawn  # every drawn task accounted for
    resumed_pool = ScriptedPool(version=3)
    resumed = AsyncCollector(resumed_pool, make_jobs(list(drawn)), groups_per_step=2,
                             max_staleness=2, version=3)
    resumed.load_state_dict(state)
    assert [t for job in resumed_pool.queue for t in job.meta] == in_flight
    after, _ = run_steps(resumed, resumed_pool, 4, start=3)
    tasks = [t for _, groups in after for t, _ in groups]
    # the waiting group first, then the resubmitted jobs' tasks, then new draws
    assert tasks == (waiting + in_flight + list(range(len(drawn), 20)))[:8]
    for version, groups in after:
        assert all(version - v <= 2 for _, v in groups)
    # the resubmitted jobs were sampled by the resumed weights (version >= 3)
    assert all(v >= 3 for _, groups in after for t, v in groups if t in in_flight)


def test_a_collection_that_gets_nothing_times_out_with_what_was_in_flight():
    pool = ScriptedPool(eager=False)
    collector = AsyncCollector(pool, make_jobs([]), groups_per_step=2, max_staleness=1,
                               wait_timeout_s=0.0)
    with pytest.raises(TimeoutError, match=r"4 group\(s\) in flight on scripted-0"):
        collector.collect(2, 0)


def test_discard_drops_waiting_and_running_groups_and_refills():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=1)
    collector.collect(2, 0)
    collector.step_metrics()
    # job 1 (tasks 2, 3) is queued; a rollback replaces the weights: discard it
    assert collector.discard() == 2
    pool.run_one()  # job 1 finishes anyway, with the discarded weights
    groups = collector.collect(2, 1, weights=dict)
    # job 1's result was dropped on arrival; new jobs were admitted at version 1
    assert [(g.meta, g.version) for g in groups] == [(4, 1), (5, 1)]
    m = collector.step_metrics()
    assert m["dropped_discarded"] == 2.0 and m["dropped_stale"] == 0.0


def test_steps_with_extra_rounds_get_their_whole_consumption_sampled_ahead():
    # dynamic sampling: every step collects three rounds of 2 groups at its version. The
    # admission counts a step as what the recent steps took (6 groups), so during each
    # update the workers sample the next step's 6 groups: from step 3 on every group trains
    # at staleness 1 and the trainer finds them waiting
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=1)
    staleness = []
    for version in range(6):
        groups = [g for _ in range(3) for g in collector.collect(2, version, weights=dict)]
        staleness.append([version - g.version for g in groups])
        collector.step_metrics()
        while pool.queue:  # the update is long enough for every admitted job
            pool.run_one()
    assert collector.step_groups == 6
    # step 1 had no history (one round of 2 ahead: the first 2 groups of step 2 are stale by
    # one, its other rounds are sampled after the update); from then on the whole step ahead
    assert staleness[0] == [0] * 6
    assert staleness[1] == [1, 1, 0, 0, 0, 0]
    assert all(s == [1] * 6 for s in staleness[2:])
    # never more than (k + 1) steps' groups admitted ahead of the trainer
    assert len(drawn) <= 6 * 6 + 2 * 6


def test_a_step_that_takes_only_its_groups_keeps_the_plain_bound():
    pool, drawn = ScriptedPool(), []
    collector = AsyncCollector(pool, make_jobs(drawn), groups_per_step=2, max_staleness=1)
    run_steps(collector, pool, 6)
    assert collector.step_groups == 2
    assert collector.live <= 2 * 2

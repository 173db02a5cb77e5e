"""A discrete-event simulator of the asynchronous rollout / update pipeline: how many GRPO
steps per hour N rollout workers, M update processes and a staleness bound k give, for given
rollout and update costs, and how much of the time the trainer and the workers sit idle.

It drives the real scheduling code (:class:`rlvr.distributed.async_collector.AsyncCollector`
with its admission rule and :class:`rlvr.distributed.staleness.StalenessBuffer`) over a pool
of virtual workers on a virtual clock, so what it predicts is what that code does when the
costs are as given. Model:

- a step takes B groups; a job of J groups costs ``rollout_s * J / B`` seconds on one worker
  (``rollout_s``: one worker sampling one step's groups), times a seeded log-normal factor of
  mean 1 and coefficient of variation ``rollout_cv`` (the long tail of generation lengths);
- a worker runs its jobs in order, loading the newest weights pushed before a job starts
  (``load_s`` seconds when they changed);
- the trainer collects its B groups (waiting while none are there), pushes its new weights
  (``sync_s`` seconds of its own time), then updates for ``update_s / M`` seconds (perfect
  data-parallel scaling: an upper bound on what M processes give);
- ``k = 0`` is the synchronous loop over the same workers: a step's jobs are admitted only
  once the step starts, so rollout and update take turns.

Not modelled: contention between the processes for shared cores or memory bandwidth (the
costs must be measured in the configuration being predicted), streaming of partial rollouts
within a job, reward scoring (count it in ``rollout_s`` or ``update_s``).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass

from rlvr.distributed.async_collector import AsyncCollector
from rlvr.distributed.rollout_jobs import PoolTimes, RolloutJob, RolloutResult
from rlvr.rollout.types import SamplingParams


@dataclass(frozen=True)
class SimResult:
    """What a simulated run gives.

    Attributes:
        steps_per_hour: steps / simulated seconds * 3600.
        seconds_per_step: simulated seconds / steps.
        trainer_idle: fraction of the time the trainer waited for groups.
        rollout_idle: fraction of the workers' time without a job (averaged over workers).
        staleness_mean: mean staleness of the trained groups (versions).
        dropped: groups dropped as staler than k.
    """

    steps_per_hour: float
    seconds_per_step: float
    trainer_idle: float
    rollout_idle: float
    staleness_mean: float
    dropped: int


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0


class _VirtualPool:
    """The rollout-pool API over simulated workers on a virtual clock."""

    def __init__(self, clock: _Clock, workers: int, cost, load_s: float):
        self.clock, self.cost, self.load_s = clock, cost, load_s
        self.names = [f"sim-{i}" for i in range(workers)]
        self.queues: list[deque] = [deque() for _ in range(workers)]
        self.running: list = [None] * workers
        self.loaded = [0] * workers
        self.free_since = [0.0] * workers
        self.idle = [0.0] * workers
        self.events: list = []  # (finish time, order, worker)
        self.order = 0
        self.done: list[RolloutResult] = []
        self.version = 0
        self.loading = 0.0

    @property
    def in_flight(self) -> int:
        return (sum(j.groups for q in self.queues for j in q)
                + sum(r[0].groups for r in self.running if r is not None)
                + sum(len(r.prompts) for r in self.done))

    def submit(self, job: RolloutJob) -> None:
        load = [sum(j.groups for j in q) + (r[0].groups if r is not None else 0)
                for q, r in zip(self.queues, self.running)]
        w = min(range(len(load)), key=load.__getitem__)
        self.queues[w].append(job)
        self._start(w)

    def _start(self, w: int) -> None:
        if self.running[w] is not None or not self.queues[w]:
            return
        job = self.queues[w].popleft()
        now = self.clock.now
        self.idle[w] += now - self.free_since[w]
        load = self.load_s if self.loaded[w] != self.version else 0.0
        self.loaded[w] = self.version
        self.loading += load
        self.running[w] = (job, self.version)
        self.order += 1
        heapq.heappush(self.events, (now + load + self.cost(job), self.order, w))

    def advance_to(self, t: float) -> None:
        """Run the workers up to time ``t``."""
        while self.events and self.events[0][0] <= t:
            finish, _, w = heapq.heappop(self.events)
            self.clock.now = finish
            job, version = self.running[w]
            self.running[w] = None
            self.done.append(RolloutResult(job.job_id, job.prompts, None, version,
                                           self.names[w], 0.0, job.meta))
            self.free_since[w] = finish
            self._start(w)
        self.clock.now = max(self.clock.now, t)

    def push_weights(self, source, version: int) -> float:
        self.version = version
        return 0.0

    def poll(self, timeout: float) -> list[RolloutResult]:
        if not self.done and self.events:
            self.advance_to(self.events[0][0])
        done, self.done = self.done, []
        return done

    def times(self) -> PoolTimes:
        return PoolTimes()

    def idle_seconds(self, end: float) -> float:
        return sum(self.idle) + sum(end - f for f, r in zip(self.free_since, self.running)
                                    if r is None)


def simulate(rollout_s: float, update_s: float, *, workers: int = 1, update_processes: int = 1,
             max_staleness: int = 1, groups_per_step: int = 8, job_groups: int | None = None,
             sync_s: float = 0.0, load_s: float = 0.0, steps: int = 200,
             rollout_cv: float = 0.0, seed: int = 0) -> SimResult:
    """Simulate ``steps`` GRPO steps of the pipeline (see the module doc).

    Args:
        rollout_s: seconds one worker takes to sample one step's ``groups_per_step`` groups.
        update_s: seconds one update process takes for one step's update.
        workers: rollout workers N >= 1.
        update_processes: update processes M >= 1 (the update takes ``update_s / M``).
        max_staleness: k >= 0 (0: synchronous).
        groups_per_step: B >= 1.
        job_groups: groups per job (default ``ceil(B / N)``: a step spread over the workers).
        sync_s: the trainer's seconds per weight push.
        load_s: a worker's seconds to load new weights.
        steps: steps to simulate.
        rollout_cv: coefficient of variation of a job's cost (log-normal, mean 1; 0: fixed).
        seed: the job-cost draws' seed.

    Returns:
        :class:`SimResult`.

    Raises:
        ValueError: a non-positive cost, count or step number.
    """
    if rollout_s <= 0 or update_s < 0 or workers < 1 or update_processes < 1 or steps < 1:
        raise ValueError("need rollout_s > 0, update_s >= 0, workers, update_processes and "
                         "steps >= 1")
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(rollout_cv ** 2))
    job_groups = job_groups or math.ceil(groups_per_step / workers)

    def cost(job: RolloutJob) -> float:
        factor = rng.lognormvariate(-sigma ** 2 / 2, sigma) if sigma else 1.0
        return rollout_s * job.groups / groups_per_step * factor

    clock = _Clock()
    pool = _VirtualPool(clock, workers, cost, load_s)
    params = SamplingParams(n=1)

    def make_job(job_id: int, groups: int) -> RolloutJob:
        return RolloutJob(job_id, [[0]] * groups, params, meta=[job_id] * groups)

    collector = AsyncCollector(pool, make_job, groups_per_step=groups_per_step,
                               max_staleness=max_staleness, job_groups=job_groups)
    waited = staleness = 0.0
    for step in range(steps):
        if step:  # the new weights: the trainer's own time
            pool.advance_to(clock.now + sync_s)
        start = clock.now
        for group in collector.collect(groups_per_step, step, weights=lambda: None):
            staleness += step - group.version
        waited += clock.now - start
        pool.advance_to(clock.now + update_s / update_processes)
    end = clock.now
    return SimResult(steps_per_hour=steps / end * 3600.0, seconds_per_step=end / steps,
                     trainer_idle=waited / end,
                     rollout_idle=pool.idle_seconds(end) / (workers * end),
                     staleness_mean=staleness / (steps * groups_per_step),
                     dropped=int(sum(collector.buffer.dropped.values())))

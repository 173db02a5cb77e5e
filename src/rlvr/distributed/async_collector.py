"""The trainer's side of asynchronous rollouts: keep a rollout pool fed under the staleness
bound and hand out versioned groups.

:class:`AsyncCollector` sits between a trainer and a pool of rollout workers
(:class:`rlvr.distributed.async_rollout.LocalRolloutPool` or
:class:`rlvr.distributed.ray_async.RayRolloutPool`). At the start of each collection the
trainer passes its policy version (updates applied) and, when it changed, its new weights are
pushed to the workers. Jobs are admitted ahead of time by the admission rule of
:func:`rlvr.distributed.staleness.may_submit` (at most ``k + 1`` steps' groups in the
pipeline), built by the caller's ``make_job`` (which draws the tasks); results are split into
groups and kept in a :class:`rlvr.distributed.staleness.StalenessBuffer`, which hands out only
groups with ``version >= current - k``. After the trainer took its groups the pipeline is
topped up again, so the workers generate the next steps' groups while the trainer updates.

A step may take more than ``groups_per_step`` groups: DAPO's dynamic sampling collects extra
rounds when groups have no reward variance. The admission rule then counts a step as the
groups the recent steps took (the mean of the last :data:`RECENT_STEPS`, at least B), so the
workers sample a whole step's consumption ahead of time, not only its first round; the
staleness bound does not depend on it (the buffer drops what is staler than k).

Per-step metrics (:meth:`AsyncCollector.step_metrics`): the staleness histogram and drops of
the buffer, and the time split ``seconds_trainer_idle`` (the trainer waiting for groups),
``seconds_rollout_idle`` (worker-seconds without a job, summed over workers) and
``seconds_weight_sync`` (handing weights over plus the workers' loading).

A rollback of the trainer's weights calls :meth:`AsyncCollector.discard`: nothing sampled by
the weights it replaced is handed out.

Resume: :meth:`AsyncCollector.state_dict` holds the groups waiting (with their versions) and
the jobs in flight (their prompts, sampling parameters and ``meta``); after
:meth:`AsyncCollector.load_state_dict` the waiting groups are handed out under the same bound
(the stale ones dropped) and the jobs that were in flight are submitted again, to be sampled
by the resumed weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.distributed.rollout_jobs import RolloutJob, RolloutResult, split_groups
from rlvr.distributed.staleness import StalenessBuffer, may_submit
from rlvr.rollout.types import RolloutOutput

DEFAULT_WAIT_TIMEOUT_S = 3600.0
RECENT_STEPS = 4  # steps whose consumption sets how many groups one step takes


@dataclass
class Group:
    """One prompt's ``n`` completions, as a worker sampled them.

    Attributes:
        prompt: the prompt's token ids.
        output: its ``n`` rows (``prompt_index`` 0); None from a simulated pool
            (:mod:`rlvr.distributed.pipeline_sim`).
        version: the policy version that sampled every row.
        meta: the job's ``meta`` entry for this prompt.
        job_id: the job it came from.
    """

    prompt: list[int]
    output: RolloutOutput
    version: int
    meta: Any
    job_id: int


class AsyncCollector:
    """Feeds a rollout pool under the staleness bound (see the module doc).

    Args:
        pool: a rollout pool (``submit``, ``push_weights``, ``poll``, ``times``,
            ``in_flight``, ``names``).
        make_job: ``make_job(job_id, groups) -> RolloutJob`` with ``groups`` prompts and a
            ``meta`` list of one entry per prompt; it draws the tasks, so it is called only
            when a job is admitted.
        groups_per_step: groups one step takes (B >= 1).
        max_staleness: the bound k >= 0.
        job_groups: prompts per job (default ``groups_per_step``: one ``generate`` call per
            step's worth of groups).
        version: the policy version of the pool's current weights.
        wait_timeout_s: the longest a collection waits with no result while the workers are
            alive and answering (a dead or silent worker is reported by the pool sooner).

    Raises:
        ValueError: a count < 1 or a negative bound.
    """

    def __init__(self, pool, make_job: Callable[[int, int], RolloutJob], *,
                 groups_per_step: int, max_staleness: int, job_groups: int | None = None,
                 version: int = 0, wait_timeout_s: float = DEFAULT_WAIT_TIMEOUT_S):
        if groups_per_step < 1 or (job_groups is not None and job_groups < 1):
            raise ValueError(f"groups_per_step and job_groups must be >= 1, got "
                             f"{groups_per_step}, {job_groups}")
        if max_staleness < 0:
            raise ValueError(f"max_staleness must be >= 0, got {max_staleness}")
        self.pool, self.make_job = pool, make_job
        self.groups_per_step, self.max_staleness = groups_per_step, max_staleness
        self.job_groups = job_groups or groups_per_step
        self.version = int(version)
        self.wait_timeout_s = wait_timeout_s
        self.buffer = StalenessBuffer()
        self.jobs: dict[int, RolloutJob] = {}  # in flight
        self.next_job_id = 0
        self.taken_at_version = 0
        self._recent: list[int] = []  # groups taken at each of the last versions
        self._ignored: set[int] = set()  # discarded jobs still running
        self._discarded = 0
        self._idle = self._sync = 0.0
        self._times = pool.times()

    @property
    def step_groups(self) -> int:
        """Groups one step takes, as the admission rule counts it: the mean over the last
        :data:`RECENT_STEPS` versions (rounded up), at least ``groups_per_step``."""
        if not self._recent:
            return self.groups_per_step
        return max(self.groups_per_step, -(-sum(self._recent) // len(self._recent)))

    @property
    def live(self) -> int:
        """Groups in the pipeline: in flight plus waiting in the buffer."""
        return sum(job.groups for job in self.jobs.values()) + len(self.buffer)

    def collect(self, groups: int, version: int, weights: Callable[[], Any] | None = None
                ) -> list[Group]:
        """``groups`` groups with ``version - k <= group.version``, oldest arrival first.

        Args:
            groups: how many (>= 1).
            version: the trainer's policy version now (updates applied; never decreases).
            weights: returns the trainer's current weights (``nn.Module`` or ``state_dict``),
                called when ``version`` is newer than the pool's; None: do not push.

        Raises:
            ValueError: ``version`` is older than the last one.
            TimeoutError: no result for ``wait_timeout_s`` seconds (the message says how
                many groups were in flight on which workers).
            RolloutWorkerError: from the pool (a dead, silent or failed worker, named).
        """
        if version < self.version:
            raise ValueError(f"policy version {version} is older than the last one "
                             f"({self.version})")
        if version > self.version:
            if weights is not None:
                self._sync += self.pool.push_weights(weights(), version)
            if self.taken_at_version:
                self._recent = (self._recent + [self.taken_at_version])[-RECENT_STEPS:]
            self.version, self.taken_at_version = version, 0
        sync_done = time.perf_counter()
        got: list[Group] = []
        last_result = time.monotonic()
        while True:
            taken = self.buffer.take(groups - len(got), version, self.max_staleness)
            got += [group for group, _ in taken]
            self.taken_at_version += len(taken)
            self._admit(groups - len(got))
            if len(got) == groups:
                break
            results = self.pool.poll(timeout=1.0)
            if results:
                last_result = time.monotonic()
            elif time.monotonic() - last_result > self.wait_timeout_s:
                raise TimeoutError(
                    f"no rollout came back for {self.wait_timeout_s:.0f} s: "
                    f"{self.pool.in_flight} group(s) in flight on "
                    f"{', '.join(self.pool.names)} (alive and answering)")
            for result in results:
                self._accept(result)
        self._idle += time.perf_counter() - sync_done
        return got

    def discard(self) -> int:
        """Drop every group waiting and every job in flight (the weights that sampled them
        were replaced, e.g. by a rollback); results of discarded jobs are dropped when they
        arrive and the pipeline is refilled. Returns the groups discarded (also reported as
        ``dropped_discarded`` by the next :meth:`step_metrics`)."""
        n = self.buffer.clear() + sum(job.groups for job in self.jobs.values())
        self._ignored.update(self.jobs)
        self.jobs.clear()
        self._discarded += n
        return n

    def step_metrics(self) -> dict[str, float]:
        """The staleness histogram and drops since the last call
        (:meth:`StalenessBuffer.step_metrics`), ``dropped_discarded`` (:meth:`discard`) and
        the time split in seconds: ``seconds_trainer_idle``, ``seconds_rollout_idle``,
        ``seconds_weight_sync``; the counts restart."""
        times = self.pool.times()
        metrics = self.buffer.step_metrics(self.max_staleness)
        metrics["dropped_discarded"] = float(self._discarded)
        self._discarded = 0
        metrics.update(
            seconds_trainer_idle=self._idle,
            seconds_rollout_idle=max(0.0, times.rollout_idle - self._times.rollout_idle),
            seconds_weight_sync=max(0.0, times.weight_sync - self._times.weight_sync))
        self._idle, self._times = 0.0, times
        return metrics

    def state_dict(self) -> dict:
        """What a checkpoint needs: version, job counter, the waiting groups (with their
        versions) and the jobs in flight (torch-saveable)."""
        return {"version": self.version, "next_job_id": self.next_job_id,
                "taken_at_version": self.taken_at_version, "recent": list(self._recent),
                "buffer": self.buffer.state_dict(),
                "in_flight": [self.jobs[j] for j in sorted(self.jobs)]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`: the waiting groups, and the jobs that were in flight
        submitted again (sampled by the pool's current weights).

        Raises:
            ValueError: jobs are in flight here already (load before the first collection).
        """
        if self.jobs:
            raise ValueError("load_state_dict after jobs were submitted")
        self.version = max(self.version, int(state["version"]))
        self.next_job_id = int(state["next_job_id"])
        self.taken_at_version = (int(state["taken_at_version"])
                                 if int(state["version"]) == self.version else 0)
        self._recent = [int(x) for x in state.get("recent", [])]
        self.buffer.load_state_dict(state["buffer"])
        for job in state["in_flight"]:
            self.jobs[job.job_id] = job
            self.pool.submit(job)

    # -- internals ----------------------------------------------------------------------------
    def _admit(self, wanted_now: int) -> None:
        """Submit jobs while the admission rule allows, or while the pipeline holds fewer
        groups than the current collection still needs (dropped groups are replaced)."""
        unit = self.step_groups
        while (self.live < wanted_now or
               may_submit(self.live, self.job_groups, unit, self.max_staleness,
                          min(self.taken_at_version, unit))):
            job = self.make_job(self.next_job_id, self.job_groups)
            if job.groups != self.job_groups or len(job.meta) != job.groups:
                raise ValueError(f"make_job gave {job.groups} prompts and "
                                 f"{len(job.meta)} meta entries, expected {self.job_groups}")
            self.next_job_id += 1
            self.jobs[job.job_id] = job
            self.pool.submit(job)

    def _accept(self, result: RolloutResult) -> None:
        if result.job_id in self._ignored:
            self._ignored.discard(result.job_id)
            return
        job = self.jobs.pop(result.job_id)
        if result.version > self.version:
            raise ValueError(f"job {result.job_id} came back from policy version "
                             f"{result.version}, newer than the trainer's {self.version}")
        outputs = (split_groups(result.output, job.params.n) if result.output is not None
                   else [None] * job.groups)  # a simulated pool samples nothing
        for prompt, output, meta in zip(job.prompts, outputs, job.meta):
            self.buffer.put(Group(prompt, output, result.version, meta, job.job_id),
                            result.version)

"""Asynchronous rollouts over Ray actors: the same pool API as
:class:`rlvr.distributed.async_rollout.LocalRolloutPool` (``submit``, ``push_weights``,
``poll``, ``times``, ``close``), for :class:`rlvr.distributed.async_collector.AsyncCollector`
when ``rollout.ray_address`` is set.

Each actor (:class:`AsyncRolloutActor`, the body of
:class:`rlvr.distributed.ray_actors.RolloutWorker` plus a policy version) runs its calls in
submission order: weights pushed with :meth:`RayRolloutPool.push_weights` (one ``ray.put``
into the object store, one reference per actor) are loaded after the job it is running and
before any job submitted later, so every job is sampled by the newest weights pushed before
it and its result says which version that was.

No silent waits: every ``ray.wait`` has a timeout; an actor answers ``ping`` from a
concurrency group of its own while it generates, and is pinged every ``heartbeat_s``. An
actor that dies (its ping or a call fails with ``RayActorError``) or leaves a ping unanswered
for ``heartbeat_timeout_s`` raises :class:`rlvr.distributed.rollout_jobs.RolloutWorkerError`
naming it (name, pid, Ray actor id) from the next call, and the pool kills its actors. With
:meth:`RayRolloutPool.watch` a watchdog thread (:class:`rlvr.distributed.watchdog.Watchdog`,
as for the local worker processes) pings the actors and raises that error in the trainer's
main thread even while it is busy elsewhere (an update). Its functions import ``ray``, an
optional dependency (``pip install rlvr[ray]``); the module itself imports without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rlvr.distributed.ray_actors import RolloutWorker
from rlvr.distributed.ray_cluster import LOCAL, init_ray, kill_actors, local_num_cpus, wait_ready
from rlvr.distributed.rollout_jobs import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_HEARTBEAT_TIMEOUT_S,
    DEFAULT_STARTUP_TIMEOUT_S,
    PoolTimes,
    RolloutJob,
    RolloutResult,
    RolloutWorkerError,
    WorkerTimes,
)
from rlvr.distributed.watchdog import Failure, Watchdog
from rlvr.rollout.engine import as_state_dict, default_pad_token_id


class AsyncRolloutActor(RolloutWorker):
    """Actor body: a :class:`RolloutWorker` that knows the policy version of its weights and
    its time split. ``ping`` runs in the ``ping`` concurrency group (answers while a job
    runs); everything else runs one call at a time, in submission order.

    Args:
        *args: :class:`RolloutWorker`'s.
        name: the label used in results and errors.
        version: the policy version of the initial weights.
        **kwargs: :class:`RolloutWorker`'s.
    """

    def __init__(self, *args, name: str = "rlvr-rollout", version: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.name, self.version = name, int(version)
        self.doing = "waiting for a job"
        self.times = WorkerTimes()
        self._last_end = time.perf_counter()

    def load(self, state_dict: Mapping, version: int) -> int:
        """Load new weights (Ray resolves the object reference) of policy ``version``."""
        self.doing = f"loading the weights of policy version {version}"
        start = time.perf_counter()
        self.update_weights(state_dict)
        self.version = int(version)
        self.times.loading += time.perf_counter() - start
        self.times.loads += 1
        self.doing = f"waiting for a job (policy version {self.version})"
        return self.version

    def run(self, job: RolloutJob) -> RolloutResult:
        """Sample a job with the current weights; the result carries their version."""
        start = time.perf_counter()
        self.times.idle += max(0.0, start - self._last_end)
        self.doing = (f"generating job {job.job_id} ({job.groups} prompts x {job.params.n}, "
                      f"policy version {self.version})")
        output = self.generate(job.prompts, job.params)
        self._last_end = time.perf_counter()
        self.times.busy += self._last_end - start
        self.doing = f"waiting for a job (policy version {self.version})"
        return RolloutResult(job.job_id, job.prompts, output, self.version, self.name,
                             self._last_end - start, job.meta)

    def ping(self) -> tuple[str, WorkerTimes]:
        """What the actor is doing and its time split (called in the ``ping`` concurrency
        group, so it is answered while a job runs)."""
        return self.doing, replace(self.times)


class RayRolloutPool:
    """N :class:`AsyncRolloutActor` actors behind the rollout-pool API (see the module doc).

    Args:
        model: the trainer's policy (plain causal LM; a LoRA policy's merged copy).
        engine: the actors' local engine (``"torch"`` or ``"hf"``).
        workers: number of actors, >= 1.
        pad_token_id, engine_options: as for :class:`RolloutWorker`.
        threads_per_worker: torch threads in each actor (None: Ray's default).
        num_cpus_per_worker: CPUs each actor asks Ray for.
        version: the policy version of ``model``'s weights.
        heartbeat_s: seconds between pings.
        heartbeat_timeout_s: an actor whose ping stays unanswered this long is reported.
        startup_timeout_s: how long the actors may take to start.
        own_ray: :meth:`close` shuts Ray down (also when this pool had to start it).

    Attributes:
        names, pids, actor_ids: each actor's name (``rlvr-rollout-<i>``), process id and
            Ray actor id (hex).

    Raises:
        ValueError: ``workers < 1`` or a timeout not above the heartbeat.
        RuntimeError: the actors did not start in time.
    """

    def __init__(self, model, *, engine: str = "torch", workers: int = 1,
                 pad_token_id: int | None = None, engine_options: Mapping[str, Any] | None = None,
                 threads_per_worker: int | None = None, num_cpus_per_worker: float = 1.0,
                 version: int = 0, heartbeat_s: float = DEFAULT_HEARTBEAT_S,
                 heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, own_ray: bool = False):
        import ray  # optional dependency (extra `ray`)

        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if heartbeat_timeout_s <= heartbeat_s:
            raise ValueError(f"heartbeat_timeout_s ({heartbeat_timeout_s}) must exceed "
                             f"heartbeat_s ({heartbeat_s})")
        if not ray.is_initialized():
            own_ray = init_ray(LOCAL, local_num_cpus(workers)) or own_ray
        self.own_ray = own_ray
        self.heartbeat_s, self.heartbeat_timeout_s = heartbeat_s, heartbeat_timeout_s
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        self.version = int(version)
        self._weight_sync = 0.0
        state = ray.put(_cpu_state(model))
        actor = ray.remote(concurrency_groups={"ping": 1})(AsyncRolloutActor).options(
            num_cpus=num_cpus_per_worker)
        self.names = [f"rlvr-rollout-{i}" for i in range(workers)]
        self._actors = [actor.remote(type(model), model.config, state, engine, self.pad_token_id,
                                     dict(engine_options or {}), threads_per_worker, name=name,
                                     version=self.version)
                        for name in self.names]
        info = wait_ready([a.info.remote() for a in self._actors], self._actors, "rollout",
                          startup_timeout_s)
        self.pids = [i["pid"] for i in info]
        self.actor_ids = [a._actor_id.hex() for a in self._actors]
        self._lock = threading.RLock()  # the pings, shared with the watchdog's thread
        self._watchdog: Watchdog | None = None
        self._failed: RolloutWorkerError | None = None
        self._jobs: dict[Any, tuple[int, RolloutJob]] = {}  # future -> (actor, job)
        self._loads: dict[Any, int] = {}  # load futures -> actor
        self._pings: dict[int, tuple[Any, float]] = {}  # actor -> (future, sent at)
        self._doing = ["waiting for a job"] * workers
        self._times = [WorkerTimes() for _ in range(workers)]

    @property
    def in_flight(self) -> int:
        """Groups submitted and not yet returned."""
        return sum(job.groups for _, job in self._jobs.values())

    def submit(self, job: RolloutJob) -> None:
        """Run a job on the actor with the fewest groups in flight.

        Raises:
            RolloutWorkerError: the pool stopped on a failed actor (the same error again).
        """
        self._check_open()
        load = [0] * len(self._actors)
        for index, queued in self._jobs.values():
            load[index] += queued.groups
        index = min(range(len(self._actors)), key=load.__getitem__)
        self._jobs[self._actors[index].run.remote(job)] = (index, job)

    def push_weights(self, source: Any, version: int) -> float:
        """``ray.put`` the weights once and queue a load of policy ``version`` on every actor
        (after its current job, before any later one). Returns the seconds spent here.

        Raises:
            ValueError: ``version`` is older than the last one pushed.
            RolloutWorkerError: the pool stopped on a failed actor (the same error again).
        """
        import ray  # optional dependency (extra `ray`)

        if version < self.version:
            raise ValueError(f"policy version {version} is older than the workers' "
                             f"{self.version}")
        self._check_open()
        start = time.perf_counter()
        ref = ray.put(_cpu_state(source))
        for index, actor in enumerate(self._actors):
            self._loads[actor.load.remote(ref, int(version))] = index
        self.version = int(version)
        seconds = time.perf_counter() - start
        self._weight_sync += seconds
        return seconds

    def poll(self, timeout: float) -> list[RolloutResult]:
        """Results that finish within ``timeout`` seconds (returns at the first), checking
        the actors' pings every ``heartbeat_s``.

        Raises:
            RolloutWorkerError: an actor died, failed a job or a weight load, or stopped
                answering pings.
        """
        import ray  # optional dependency (extra `ray`)

        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            self._check_open()
            self._heartbeat()
            pending = list(self._jobs) + list(self._loads)
            wait = min(self.heartbeat_s, max(0.0, deadline - time.monotonic()))
            ready = []
            if pending:
                ready, _ = ray.wait(pending, num_returns=len(pending), timeout=wait)
            elif wait > 0:
                time.sleep(wait)
            results = []
            for future in ready:
                if future in self._loads:
                    index = self._loads.pop(future)
                    self._get(future, index, "loading new weights")
                else:
                    index, job = self._jobs.pop(future)
                    results.append(self._get(future, index, f"generating job {job.job_id}"))
            if results or time.monotonic() >= deadline:
                return results

    def times(self) -> PoolTimes:
        """The time split as of the actors' last pings."""
        workers = {n: replace(t) for n, t in zip(self.names, self._times)}
        return PoolTimes(rollout_idle=sum(t.idle for t in workers.values()),
                         weight_sync=self._weight_sync + sum(t.loading for t in workers.values()),
                         workers=workers)

    def close(self) -> None:
        """Stop the watchdog, kill the actors; shut Ray down if this pool owns it.
        Idempotent."""
        if self._watchdog is not None:
            self._watchdog.stop()
        with self._lock:
            actors, self._actors = self._actors, []
            kill_actors(actors, self.own_ray)
            self.own_ray = False

    # -- the watchdog: a failure interrupts the trainer even while it is not waiting ---------
    def watch(self) -> None:
        """Ping the actors every ``heartbeat_s`` from a thread of this process and, when one is
        dead or leaves a ping unanswered for ``heartbeat_timeout_s``, raise the
        :class:`RolloutWorkerError` naming it in the main thread wherever it is (a long
        update, a validation), not only at the next :meth:`poll`. Uses ``SIGUSR1``
        (:class:`rlvr.distributed.watchdog.Watchdog`; the previous handler comes back at
        :meth:`close`); call it from the main thread.

        Raises:
            ValueError: not called from the main thread.
        """
        self._watchdog = Watchdog(self._failure, self._fail, interval_s=self.heartbeat_s,
                                  name=", ".join(self.names))
        self._watchdog.start()

    # -- internals --------------------------------------------------------------------------
    def _label(self, index: int) -> str:
        return (f"rollout worker {self.names[index]} (pid {self.pids[index]}, Ray actor "
                f"{self.actor_ids[index]})")

    def _check_open(self) -> None:
        """Raise the failure that closed the pool (again: it may have been swallowed where it
        first landed), or a RuntimeError when it was closed."""
        if not self._actors:
            if self._failed is not None:
                raise self._failed
            raise RuntimeError("the rollout pool is closed")

    def _get(self, future, index: int, what: str):
        import ray  # optional dependency (extra `ray`)

        try:
            return ray.get(future, timeout=self.heartbeat_timeout_s)
        except ray.exceptions.RayActorError as exc:
            self._fail(self.names[index], f"{self._label(index)} died while {what}: "
                       f"{str(exc).splitlines()[0]}")
        except ray.exceptions.RayTaskError as exc:
            self._fail(self.names[index], f"{self._label(index)} failed while {what}:\n{exc}")
        except ray.exceptions.GetTimeoutError:
            self._fail(self.names[index], f"{self._label(index)} did not hand over a finished "
                       f"result within {self.heartbeat_timeout_s:.0f} s while {what}")
        return None

    def _heartbeat(self) -> None:
        """:meth:`_failure`, raised here."""
        found = self._failure()
        if found is not None:
            self._fail(*found)

    def _failure(self) -> Failure | None:
        """One ping outstanding per actor at most: record an answered one, send the next
        ``heartbeat_s`` after the previous; ``(name, message)`` of the first actor whose ping
        failed (dead: ``RayActorError``) or stayed unanswered for longer than
        ``heartbeat_timeout_s``, else None. Called by the trainer's calls and by the
        watchdog's thread (under a lock)."""
        import ray  # optional dependency (extra `ray`)

        with self._lock:
            now = time.monotonic()
            for index, actor in enumerate(self._actors):
                future, sent = self._pings.get(index, (None, -float("inf")))
                if future is not None:
                    done, _ = ray.wait([future], timeout=0)
                    if done:
                        try:
                            self._doing[index], self._times[index] = ray.get(future, timeout=5)
                        except ray.exceptions.RayActorError as exc:
                            return self.names[index], (
                                f"{self._label(index)} died while {self._doing[index]}: "
                                f"{str(exc).splitlines()[0]}")
                        except (ray.exceptions.RayError, TimeoutError) as exc:
                            return self.names[index], (f"{self._label(index)} failed to "
                                                       f"answer a ping: {exc}")
                        future = None
                    elif now - sent > self.heartbeat_timeout_s:
                        return self.names[index], (
                            f"{self._label(index)} stopped answering: no reply to a ping for "
                            f"{now - sent:.0f} s (timeout {self.heartbeat_timeout_s:.0f} s); "
                            f"last seen {self._doing[index]}")
                if future is None and now - sent >= self.heartbeat_s:
                    future, sent = actor.ping.options(concurrency_group="ping").remote(), now
                self._pings[index] = (future, sent)
        return None

    def _fail(self, name: str, message: str) -> None:
        self._failed = RolloutWorkerError(name, message)
        self.close()
        raise self._failed


def _cpu_state(source: Any) -> dict:
    """A module's or mapping's weights as detached CPU tensors (what ``ray.put`` stores)."""
    return {k: v.detach().cpu() for k, v in as_state_dict(source).items()}

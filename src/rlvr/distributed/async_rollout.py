"""Rollout worker processes on this machine that keep generating while the trainer updates.

:class:`LocalRolloutPool` starts N processes (``torch.multiprocessing`` spawn), each holding a
local engine (``torch`` or ``hf``) over its own copy of the policy
(:class:`rlvr.distributed.ray_actors.RolloutWorker`, the same body as the Ray actors), with
its own torch threads and optionally its own cores. The trainer

- submits jobs (:class:`rlvr.distributed.rollout_jobs.RolloutJob`: prompts and sampling
  parameters); each worker runs its jobs in order;
- pushes new weights with their policy version after each update
  (:meth:`LocalRolloutPool.push_weights`): the weights are packed into one flat tensor per
  dtype, which ``torch.multiprocessing`` hands to the workers through shared memory; a worker
  loads the newest weights it has received before starting its next job, so it keeps
  generating with the newest weights it has and never waits for the trainer;
- polls for results (:meth:`LocalRolloutPool.poll`): completions tagged with the version that
  sampled them (:class:`rlvr.distributed.rollout_jobs.RolloutResult`).

No silent waits. Every wait has a timeout. Each worker sends a heartbeat every
``heartbeat_s`` seconds from a thread of its own (so a long ``generate`` keeps beating), with
what it is doing. :meth:`LocalRolloutPool.poll` (and every other call) raises
:class:`rlvr.distributed.rollout_jobs.RolloutWorkerError` naming the worker (name and pid),
how it ended and what it was doing, as soon as a worker process has exited, or once no
message came from it for ``heartbeat_timeout_s`` seconds (stopped, deadlocked, swapped out);
the pool then stops all its workers. With :meth:`LocalRolloutPool.watch` a watchdog thread
(:class:`rlvr.distributed.watchdog.Watchdog`) raises that error in the trainer's main thread
even while it is busy elsewhere (an update).
A worker exits by itself when the trainer's process is gone, so a killed run leaves no
rollout processes behind.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
import torch.multiprocessing as mp

from rlvr.distributed.ray_actors import RolloutWorker
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
from rlvr.distributed.watchdog import Watchdog
from rlvr.rollout.engine import as_state_dict, default_pad_token_id


def pack_state(source: Any) -> tuple[dict[str, torch.Tensor], list[tuple]]:
    """A model's weights (an ``nn.Module`` or a ``state_dict``) copied into one flat tensor
    per dtype, so that handing them to another process moves one shared-memory block per
    dtype rather than one per tensor.

    Returns:
        ``(flats, index)``: ``flats[str(dtype)]`` a 1-D tensor, ``index`` a list of
        ``(name, dtype key, offset, shape)`` (offset in elements of that flat tensor).

    Raises:
        TypeError: ``source`` is neither a module nor a mapping.
    """
    state = as_state_dict(source)
    sizes: dict[str, int] = {}
    index = []
    for name, tensor in state.items():
        key = str(tensor.dtype)
        index.append((name, key, sizes.get(key, 0), tuple(tensor.shape)))
        sizes[key] = sizes.get(key, 0) + tensor.numel()
    dtypes = {str(t.dtype): t.dtype for t in state.values()}
    flats = {key: torch.empty(size, dtype=dtypes[key]) for key, size in sizes.items()}
    with torch.no_grad():
        for (_, key, offset, _), tensor in zip(index, state.values()):
            flats[key][offset:offset + tensor.numel()].copy_(tensor.detach().reshape(-1))
    return flats, index


def unpack_state(flats: Mapping[str, torch.Tensor], index: list[tuple]
                 ) -> dict[str, torch.Tensor]:
    """The ``state_dict`` of :func:`pack_state`'s output (views into the flat tensors)."""
    return {name: flats[key][offset:offset + _numel(shape)].view(shape)
            for name, key, offset, shape in index}


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class _Handle:
    """The trainer's view of one worker process."""

    def __init__(self, name: str, process, inbox):
        self.name, self.process, self.inbox = name, process, inbox
        self.pid: int | None = None
        self.jobs: dict[int, int] = {}  # job id -> groups
        self.last_seen = time.monotonic()
        self.doing = "starting"
        self.times = WorkerTimes()
        self.ready = False


class LocalRolloutPool:
    """N rollout worker processes on this machine (see the module doc).

    Args:
        model: the trainer's policy (a plain transformers causal LM; for a LoRA policy its
            merged copy): its class, config and current weights build each worker's model.
        engine: the workers' local engine (``"torch"`` or ``"hf"``).
        workers: number of processes, >= 1.
        pad_token_id: completion padding id (default from the model config).
        engine_options: extra keyword options of the workers' engine (e.g. ``dtype``).
        threads: ``torch.set_num_threads`` in each worker (None: torch's default).
        cores: CPU ids each worker is pinned to (``os.sched_setaffinity``; None: no
            pinning).
        version: the policy version of ``model``'s current weights (updates applied).
        heartbeat_s: seconds between a worker's heartbeats.
        heartbeat_timeout_s: a worker silent this long is reported as not answering.
        startup_timeout_s: how long the workers may take to build their models.
        name: the workers' name prefix (``<name>-<i>``, also the process names).

    Raises:
        ValueError: ``workers < 1`` or a timeout not above the heartbeat.
        RolloutWorkerError: a worker failed or did not start in time (named).
    """

    def __init__(self, model, *, engine: str = "torch", workers: int = 1,
                 pad_token_id: int | None = None, engine_options: Mapping[str, Any] | None = None,
                 threads: int | None = None, cores: list[int] | None = None, version: int = 0,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S,
                 heartbeat_timeout_s: float = DEFAULT_HEARTBEAT_TIMEOUT_S,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, name: str = "rlvr-rollout"):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if heartbeat_timeout_s <= heartbeat_s:
            raise ValueError(f"heartbeat_timeout_s ({heartbeat_timeout_s}) must exceed "
                             f"heartbeat_s ({heartbeat_s})")
        self.heartbeat_s, self.heartbeat_timeout_s = heartbeat_s, heartbeat_timeout_s
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        self.version = int(version)
        self._weight_sync = 0.0
        self._closed = False
        self._watchdog: Watchdog | None = None
        self._failed: RolloutWorkerError | None = None
        context = mp.get_context("spawn")
        self._outbox = context.Queue()
        self._messages: queue.Queue = queue.Queue()
        self._stop_pump = threading.Event()
        packed = pack_state(model)
        self._handles: list[_Handle] = []
        for i in range(workers):
            inbox = context.Queue()
            worker_name = f"{name}-{i}"
            process = context.Process(
                target=_rollout_main, daemon=True, name=worker_name,
                args=(worker_name, inbox, self._outbox, type(model), model.config, packed,
                      engine, self.pad_token_id, dict(engine_options or {}), threads, cores,
                      self.version, os.getpid(), heartbeat_s))
            process.start()
            self._handles.append(_Handle(worker_name, process, inbox))
        self._pump = threading.Thread(target=self._read_outbox, daemon=True,
                                      name=f"{name}-reader")
        self._pump.start()
        self._wait_ready(startup_timeout_s)

    # -- the trainer's calls --------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """The workers' names."""
        return [h.name for h in self._handles]

    @property
    def pids(self) -> list[int | None]:
        """The workers' process ids."""
        return [h.pid for h in self._handles]

    @property
    def in_flight(self) -> int:
        """Groups submitted and not yet returned."""
        return sum(sum(h.jobs.values()) for h in self._handles)

    def submit(self, job: RolloutJob) -> None:
        """Queue a job on the worker with the fewest groups in flight.

        Raises:
            RolloutWorkerError: a worker is gone or silent (checked first).
        """
        self._check()
        handle = min(self._handles, key=lambda h: sum(h.jobs.values()))
        handle.jobs[job.job_id] = job.groups
        handle.inbox.put(("job", job))

    def push_weights(self, source: Any, version: int) -> float:
        """Hand new weights (an ``nn.Module`` or a ``state_dict``) of policy version
        ``version`` to every worker; each loads them before its next job. Returns the
        seconds spent here (packing the weights; the workers' loading is counted in
        :meth:`times`).

        Raises:
            ValueError: ``version`` is older than the last one pushed.
            RolloutWorkerError: a worker is gone or silent.
        """
        if version < self.version:
            raise ValueError(f"policy version {version} is older than the workers' "
                             f"{self.version}")
        self._check()
        start = time.perf_counter()
        packed = pack_state(source)
        for handle in self._handles:
            handle.inbox.put(("weights", int(version), packed))
        self.version = int(version)
        seconds = time.perf_counter() - start
        self._weight_sync += seconds
        return seconds

    def poll(self, timeout: float) -> list[RolloutResult]:
        """The results that arrive within ``timeout`` seconds: returns as soon as at least
        one is in (then also whatever else is already there), or an empty list at the
        timeout. Workers are checked every half second meanwhile.

        Raises:
            RolloutWorkerError: a worker exited, failed a job or stopped answering.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        results: list[RolloutResult] = []
        while True:
            self._check()
            wait = min(0.5, max(0.0, deadline - time.monotonic()))
            try:
                message = self._messages.get(timeout=wait) if wait > 0 else \
                    self._messages.get_nowait()
            except queue.Empty:
                message = None
            while message is not None:
                result = self._handle(message)
                if result is not None:
                    results.append(result)
                try:
                    message = self._messages.get_nowait()
                except queue.Empty:
                    message = None
            if results or time.monotonic() >= deadline:
                return results

    def times(self) -> PoolTimes:
        """The time split so far (workers' figures as of their last message)."""
        workers = {h.name: replace(h.times) for h in self._handles}
        return PoolTimes(rollout_idle=sum(t.idle for t in workers.values()),
                         weight_sync=self._weight_sync + sum(t.loading for t in workers.values()),
                         workers=workers)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the workers (a ``stop`` message, then terminate / kill what is left after
        ``timeout_s``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.stop()
        for handle in self._handles:
            if handle.process.is_alive():
                try:
                    handle.inbox.put(("stop",))
                except (ValueError, OSError):
                    pass
        deadline = time.monotonic() + timeout_s
        for handle in self._handles:
            handle.process.join(timeout=max(0.1, deadline - time.monotonic()))
            if handle.process.is_alive():
                handle.process.terminate()
                handle.process.join(timeout=2.0)
            if handle.process.is_alive():
                handle.process.kill()
                handle.process.join(timeout=2.0)
            handle.inbox.cancel_join_thread()
            handle.inbox.close()
        self._stop_pump.set()
        self._pump.join(timeout=2.0)
        self._outbox.cancel_join_thread()
        self._outbox.close()

    def __enter__(self) -> LocalRolloutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------
    def _read_outbox(self) -> None:
        """Reader thread: the workers' messages into a thread-safe queue, so the trainer's own
        waits always time out (a message cut short by a dying worker blocks only this
        thread)."""
        by_name = {h.name: h for h in self._handles}
        while not self._stop_pump.is_set():
            try:
                message = self._outbox.get(timeout=0.5)
            except queue.Empty:
                continue
            except (EOFError, OSError, ValueError):
                return
            handle = by_name.get(message[0])
            if handle is not None:
                handle.last_seen = time.monotonic()
            self._messages.put(message)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(h.ready for h in self._handles):
            try:
                self._check(silence=False)
                if time.monotonic() > deadline:
                    late = [f"{h.name} (pid {h.process.pid})" for h in self._handles
                            if not h.ready]
                    self._fail(late[0].split()[0], f"rollout worker(s) {', '.join(late)} did "
                               f"not start within {timeout_s:.0f} s")
                try:
                    self._handle(self._messages.get(timeout=0.5))
                except queue.Empty:
                    pass
            except BaseException:
                self.close(timeout_s=2.0)
                raise

    def _handle(self, message) -> RolloutResult | None:
        name, kind = message[0], message[1]
        handle = next(h for h in self._handles if h.name == name)
        if kind == "heartbeat":
            handle.doing, handle.times = message[2], message[3]
        elif kind == "ready":
            handle.ready, handle.pid = True, message[2]["pid"]
            handle.doing = "waiting for a job"
        elif kind == "loaded":
            handle.times = message[3]
        elif kind == "result":
            result, handle.times = message[2], message[3]
            handle.jobs.pop(result.job_id, None)
            return result
        elif kind == "error":
            self._fail(name, f"rollout worker {name} (pid {handle.process.pid}) failed while "
                       f"{message[2]}:\n{message[3]}")
        return None

    def _check(self, silence: bool = True) -> None:
        """Raise (naming the worker) if a worker exited or, with ``silence``, has been silent
        longer than the heartbeat timeout."""
        if self._closed:
            if self._failed is not None:  # raised before, maybe swallowed where it landed
                raise self._failed
            raise RuntimeError("the rollout pool is closed")
        found = self._failure(silence)
        if found is not None:
            self._fail(*found)

    def _failure(self, silence: bool = True) -> tuple[str, str] | None:
        """``(worker name, message)`` of the first worker that exited or (``silence``) has
        been silent too long, else None. Reads only what the reader thread and the processes
        update, so the watchdog thread may call it."""
        now = time.monotonic()
        for handle in self._handles:
            code = handle.process.exitcode
            if code is not None:
                how = (f"killed by {signal.Signals(-code).name}" if code < 0
                       else f"exit code {code}")
                return handle.name, (f"rollout worker {handle.name} (pid {handle.process.pid}) "
                                     f"died ({how}) while {handle.doing}; {len(handle.jobs)} "
                                     f"job(s) were in flight on it")
            silent = now - handle.last_seen
            if silence and handle.ready and silent > self.heartbeat_timeout_s:
                return handle.name, (f"rollout worker {handle.name} (pid "
                                     f"{handle.process.pid}) stopped answering: no heartbeat "
                                     f"for {silent:.0f} s (timeout "
                                     f"{self.heartbeat_timeout_s:.0f} s); last seen "
                                     f"{handle.doing}")
        return None

    # -- the watchdog: a failure interrupts the trainer even while it is not waiting ---------
    def watch(self) -> None:
        """Check the workers every half second from a thread of this process and, on a
        failure, raise the :class:`RolloutWorkerError` in the main thread wherever it is (a
        long update, a validation): the error comes within about a second of a worker's death
        (heartbeat timeout for a silent one) instead of at the next :meth:`poll`. Uses
        ``SIGUSR1`` (:class:`rlvr.distributed.watchdog.Watchdog`; the previous handler comes
        back at :meth:`close`); call it from the main thread.

        Raises:
            ValueError: not called from the main thread.
        """
        self._watchdog = Watchdog(self._failure, self._fail, interval_s=0.5,
                                  name=", ".join(self.names))
        self._watchdog.start()

    def _fail(self, name: str, message: str) -> None:
        self._failed = RolloutWorkerError(name, message)
        self.close(timeout_s=2.0)
        raise self._failed


def _rollout_main(name: str, inbox, outbox, model_cls, model_config, packed, engine: str,
                  pad_token_id: int, engine_options: dict, threads: int | None,
                  cores: list[int] | None, version: int, parent: int,
                  heartbeat_s: float) -> None:
    """A worker process: build the model, then run jobs, loading the newest weights received
    before each job; a heartbeat thread reports every ``heartbeat_s`` seconds and ends the
    process when the trainer's process is gone."""
    status = {"doing": "building its model"}
    times = WorkerTimes()

    def send(kind: str, *body) -> None:
        outbox.put((name, kind, *body))

    def beat() -> None:
        while True:
            time.sleep(heartbeat_s)
            if os.getppid() != parent:
                os._exit(1)
            send("heartbeat", status["doing"], replace(times))

    threading.Thread(target=beat, daemon=True, name=f"{name}-heartbeat").start()
    try:
        if cores:
            os.sched_setaffinity(0, set(cores))
        worker = RolloutWorker(model_cls, model_config, unpack_state(*packed), engine,
                               pad_token_id, engine_options, threads)
        del packed
        send("ready", {**worker.info(), "version": version})
        jobs: deque[RolloutJob] = deque()
        weights = None
        while True:
            idle = not jobs and weights is None
            status["doing"] = (f"waiting for a job (policy version {version})" if idle
                               else status["doing"])
            t0 = time.perf_counter()
            try:
                message = inbox.get(timeout=heartbeat_s) if idle else inbox.get_nowait()
            except queue.Empty:
                message = None
            if idle:
                times.idle += time.perf_counter() - t0
            if message is not None:
                if message[0] == "stop":
                    return
                if message[0] == "job":
                    jobs.append(message[1])
                elif message[0] == "weights":
                    weights = message[1:]  # the newest wins
                continue
            if weights is not None:
                status["doing"] = f"loading the weights of policy version {weights[0]}"
                t0 = time.perf_counter()
                worker.update_weights(unpack_state(*weights[1]))
                version, weights = weights[0], None
                times.loading += time.perf_counter() - t0
                times.loads += 1
                send("loaded", version, replace(times))
                continue
            if jobs:
                job = jobs.popleft()
                status["doing"] = (f"generating job {job.job_id} ({job.groups} prompts x "
                                   f"{job.params.n}, policy version {version})")
                t0 = time.perf_counter()
                output = worker.generate(job.prompts, job.params)
                seconds = time.perf_counter() - t0
                times.busy += seconds
                send("result", RolloutResult(job.job_id, job.prompts, output, version, name,
                                             seconds, job.meta), replace(times))
    except BaseException:  # report, then end the process (the trainer raises it, named)
        send("error", status["doing"], traceback.format_exc())
        time.sleep(1.0)  # let the queue's feeder thread deliver it

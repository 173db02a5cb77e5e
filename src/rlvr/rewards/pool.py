"""Verifier worker processes with a hard wall-time bound per call.

Why processes: a verifier (sympy simplification, a regex on adversarial text, a sandbox client)
can hang in C code where no exception can reach it, and ``signal.alarm`` only works in the main
thread of the main process. A worker that overruns its deadline is killed and replaced; its
call gets status ``timeout``. This works from any thread of the trainer, from Ray actors and
from ``rlvr verify --workers N`` alike.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from rlvr.registry import load_plugins
from rlvr.rewards.registry import FORMAT_RULES, VERIFIERS
from rlvr.rewards.types import FORMAT, Status, Verdict


@dataclass(frozen=True)
class VerifyJob:
    """One verifier call: ``VERIFIERS[verifier or task_type](completion, reference, **options)``.

    Attributes:
        task_type: registered task type (e.g. ``"math"``).
        completion: the model's whole output.
        reference: the task's reference (a string for math, a dict for code).
        options: keyword options for the verifier.
        timeout_s: wall-time bound of this call in seconds.
        plugins: modules to import first, so that task types they register exist in the
            worker process too (see ``RewardConfig.plugins``).
        verifier: name of the registered verifier to run; ``None`` = the one registered
            under ``task_type`` (see ``RewardConfig.verifiers``).
        format_rule: name of the format rule to run after the verifier, in the same call and
            under the same time bound (its score comes back as the verdict's ``format``
            component); ``None`` runs none.
        format_options: keyword options for the format rule.
        verdict: a verdict already given (a batch verifier's, see
            ``RewardPipeline.score_batch``): the verifier is not called again, only the
            format rule runs.
    """

    task_type: str
    completion: str
    reference: Any
    options: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 2.0
    plugins: tuple[str, ...] = ()
    verifier: str | None = None
    format_rule: str | None = None
    format_options: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None


def run_verifier(job: VerifyJob) -> tuple[Verdict, float]:
    """Run one job in this process (no hard time bound). Returns ``(verdict, seconds)``.

    Never raises for a verifier or format rule failure: an exception, or a value that is not
    what the protocol asks for (:func:`checked_verdict`, :func:`checked_format`), becomes
    ``Status.error`` with its message. With ``job.format_rule`` the verdict's components hold
    the format score under ``"format"`` (0.0 when the rule failed).
    """
    start = time.perf_counter()
    name = job.verifier or job.task_type
    try:
        load_plugins(job.plugins)
        verdict = job.verdict if job.verdict is not None else checked_verdict(
            VERIFIERS.get(name)(job.completion, job.reference, **job.options), name)
    except Exception as exc:  # a verifier bug must not take the run down; it is reported
        verdict = Verdict(Status.error, detail=f"{type(exc).__name__}: {exc}"[:500])
    if job.format_rule is not None:
        verdict = _with_format(verdict, job)
    return verdict, time.perf_counter() - start


def _with_format(verdict: Verdict, job: VerifyJob) -> Verdict:
    """``verdict`` with the job's format score as its ``format`` component; a format rule that
    raises or returns something else than a number in [0, 1] makes the verdict an ``error``
    (format 0.0), unless the verifier had already failed (its reason is kept)."""
    rule = job.format_rule
    try:
        load_plugins(job.plugins)
        score, problem = checked_format(
            FORMAT_RULES.get(rule)(job.completion, **job.format_options), rule)
    except Exception as exc:  # a format rule bug is reported like a verifier bug
        score, problem = 0.0, f"format rule {rule!r} raised {type(exc).__name__}: {exc}"
    components = {**verdict.components, FORMAT: score}
    if problem is None or verdict.status in (Status.error, Status.timeout):
        return dataclasses.replace(verdict, components=components)
    return Verdict(Status.error, extracted=verdict.extracted, method=verdict.method,
                   detail=problem[:500], components=components)


def checked_format(value: Any, rule: str) -> tuple[float, str | None]:
    """``(score, None)`` if a format rule's return ``value`` is a finite number in [0, 1], else
    ``(0.0, reason)`` naming the rule and what it returned (``True`` is no number here)."""
    if _unit_number(value):
        return float(value), None
    return 0.0, f"format rule {rule!r} returned {value!r}, expected a number in [0, 1]"[:500]


def _unit_number(value: Any) -> bool:
    """``value`` is an int or float (not a bool), finite and in [0, 1]."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and 0.0 <= value <= 1.0)  # also false for NaN


def checked_verdict(value: Any, verifier: str) -> Verdict:
    """``value`` if it is a well-formed :class:`Verdict`, else an ``error`` verdict naming the
    verifier and what it returned: ``None`` or another type, a status that is not a
    :class:`Status`, a ``score`` or an ``outcome`` (a subclass may override the property) that
    is not a finite number in [0, 1], a ``score`` on an ``error`` or ``timeout`` status, or
    ``components`` that are not finite numbers by name. Such a row is then counted as a
    verifier error (and left out of GRPO's group statistics), never scored."""
    if not isinstance(value, Verdict):
        return Verdict(Status.error, detail=f"verifier {verifier!r} returned "
                       f"{type(value).__name__} instead of a Verdict")
    if not isinstance(value.status, Status):
        return Verdict(Status.error, detail=f"verifier {verifier!r} returned status "
                       f"{value.status!r}, not a Status")
    if not _finite_components(value.components):
        return Verdict(Status.error, extracted=value.extracted, method=value.method,
                       detail=f"verifier {verifier!r} returned components "
                       f"{value.components!r}, expected finite numbers by name"[:500])
    if value.status in (Status.error, Status.timeout) and value.score is not None:
        # a failed call must never score: not even its own status may carry a score
        return Verdict(Status.error, extracted=value.extracted, method=value.method,
                       detail=f"verifier {verifier!r} returned status {value.status} with "
                       f"score {value.score!r}; an {value.status} scores nothing"[:500])
    if value.score is not None:
        try:
            score = float(value.score)
        except (TypeError, ValueError):
            score = math.nan
        if not (0.0 <= score <= 1.0):  # also false for NaN
            return Verdict(Status.error, extracted=value.extracted, method=value.method,
                           detail=f"verifier {verifier!r} returned score {value.score!r}, "
                           f"expected a finite number in [0, 1]")
    try:
        outcome = value.outcome
    except Exception as exc:  # a subclass's own property may raise
        outcome = f"{type(exc).__name__}: {exc}"
    if not _unit_number(outcome):
        return Verdict(Status.error, extracted=value.extracted, method=value.method,
                       detail=f"verifier {verifier!r} returned a verdict whose outcome is "
                       f"{outcome!r}, expected a finite number in [0, 1]"[:500])
    return value


def _finite_components(components: Any) -> bool:
    """``components`` is a dict of names to finite numbers (bools are not numbers here)."""
    return isinstance(components, dict) and all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
        and math.isfinite(v) for k, v in components.items())


def _worker_main(conn: Connection) -> None:
    # Runs in the child. Builtins were preloaded by the fork server, so a restart after a
    # timeout costs a fork, not a re-import of sympy. The READY message tells the pool the
    # process is up: a job's deadline starts then, not while the fork server still imports.
    try:
        conn.send(READY)
        while True:
            try:
                message = conn.recv()
            except (EOFError, KeyboardInterrupt):
                return
            if message is None:
                return
            index, job = message
            verdict, seconds = run_verifier(job)
            conn.send((index, verdict, seconds))
    finally:
        # A multiprocessing child leaves through os._exit, which skips atexit: close the
        # sandbox pools here, or their pre-started sandboxes' cgroups would stay behind.
        pools = sys.modules.get("rlvr.sandbox.pool")
        if pools is not None:
            pools.close_all_pools()


def remove_sandbox_leftovers() -> int:
    """Remove the sandbox cgroups of processes that are gone (killing what still runs in
    them): a verifier worker killed at its deadline leaves its run's groups behind, and so
    does any process that dies mid-run. Called when a worker is replaced and when the pool
    closes, so a run leaves no cgroup directories. Returns how many groups were removed (0
    where the sandbox uses no cgroups)."""
    # deferred: importing rlvr.sandbox costs ~40 ms, on `rlvr`'s start-up path (rlvr.rewards
    # imports this module); only a replaced worker or a closing pool needs it
    from rlvr.sandbox.cgroups import reap_stale

    return reap_stale()


READY = "ready"
STARTUP_TIMEOUT_S = 120.0  # a cold fork server imports sympy & co. first; slow on a busy host


class _Worker:
    def __init__(self, ctx: mp.context.BaseContext) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.index: int | None = None
        self.deadline = 0.0

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the child has sent :data:`READY`.

        Raises:
            RuntimeError: the child died or sent nothing within ``timeout_s`` seconds.
        """
        try:
            message = self.conn.recv() if self.conn.poll(timeout_s) else None
        except (EOFError, OSError):
            message = None
        if message != READY:
            self.kill()
            raise RuntimeError(f"verifier worker (pid {self.process.pid}) did not start "
                               f"within {timeout_s:g} s (exit code {self.process.exitcode})")

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


class VerifierPool:
    """A fixed number of verifier worker processes; each call has a wall-time deadline.

    Args:
        workers: number of worker processes (>= 1). ``None`` uses ``os.cpu_count()``.
        start_method: multiprocessing start method; ``forkserver`` (default) is safe in a
            process that already runs threads (torch, the trainer) and makes restarts cheap.

    Thread-safe: concurrent :meth:`verify_many` calls are served one after another.

    Raises:
        ValueError: if ``workers < 1``.
    """

    def __init__(self, workers: int | None = 1, start_method: str = "forkserver") -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if workers < 1:
            raise ValueError(f"VerifierPool needs workers >= 1, got {workers}")
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # the built-ins, with the implementations the registry loads on first use
            self._ctx.set_forkserver_preload(["rlvr.rewards.builtin", "rlvr.rewards.math_task",
                                              "rlvr.rewards.code"])
        self._size = workers
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.timeouts = 0
        self.restarts = 0

    @property
    def size(self) -> int:
        return self._size

    def _ensure_started(self) -> None:
        # Start them all, then wait: the fork server serves them one after another anyway.
        fresh = [_Worker(self._ctx) for _ in range(self._size - len(self._workers))]
        try:
            for worker in fresh:
                worker.wait_ready(STARTUP_TIMEOUT_S)
        except RuntimeError:
            for worker in fresh:
                worker.kill()
            raise
        self._workers.extend(fresh)

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        fresh = _Worker(self._ctx)
        fresh.wait_ready(STARTUP_TIMEOUT_S)
        self._workers[self._workers.index(worker)] = fresh
        self.restarts += 1
        remove_sandbox_leftovers()  # the killed worker's sandbox run, if it was in one

    def verify_many(
        self,
        jobs: Sequence[VerifyJob],
        on_result: Callable[[int], None] | None = None,
    ) -> list[tuple[Verdict, float]]:
        """Run every job; return ``(verdict, seconds)`` per job, in input order.

        A job that overruns ``job.timeout_s`` gets ``Status.timeout`` (its worker is killed and
        replaced); a worker that dies gets ``Status.error``. ``on_result(n_done)`` is called
        after each finished job (for progress bars). A job's deadline starts once its worker
        process is up (see :data:`STARTUP_TIMEOUT_S`), so a cold start is never a timeout.

        Raises:
            RuntimeError: a worker process did not start within :data:`STARTUP_TIMEOUT_S`.
        """
        with self._lock:
            self._ensure_started()
            return self._schedule(jobs, on_result)

    def _schedule(self, jobs, on_result) -> list[tuple[Verdict, float]]:
        results: list[tuple[Verdict, float] | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        done = 0

        def finish(index: int, verdict: Verdict, seconds: float) -> None:
            nonlocal done
            results[index] = (verdict, seconds)
            done += 1
            if on_result:
                on_result(done)

        while pending or any(w.index is not None for w in self._workers):
            for worker in self._workers:
                if worker.index is None and pending:
                    index = pending.popleft()
                    worker.index, worker.deadline = index, time.monotonic() + jobs[index].timeout_s
                    worker.conn.send((index, jobs[index]))
            busy = [w for w in self._workers if w.index is not None]
            wait_s = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = wait([w.conn for w in busy], timeout=wait_s)
            for worker in busy:
                if worker.conn in ready:
                    try:
                        index, verdict, seconds = worker.conn.recv()
                    except (EOFError, OSError):
                        finish(worker.index, Verdict(Status.error, detail="verifier worker died"),
                               0.0)
                        self._replace(worker)
                        continue
                    worker.index = None
                    finish(index, verdict, seconds)
                elif time.monotonic() >= worker.deadline:
                    index, timeout_s = worker.index, jobs[worker.index].timeout_s
                    self.timeouts += 1
                    self._replace(worker)
                    finish(index, Verdict(Status.timeout, detail=f"exceeded {timeout_s:g} s"),
                           timeout_s)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop every worker process (and remove the sandbox cgroups of workers that were
        killed, see :func:`remove_sandbox_leftovers`). The pool restarts them on the next
        call."""
        with self._lock:
            had_workers = bool(self._workers)
            for worker in self._workers:
                worker.stop()
            self._workers.clear()
            if had_workers:
                remove_sandbox_leftovers()

    def __enter__(self) -> VerifierPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

"""Concurrent sandbox runs, bounded to the usable cores across threads AND processes.

The bound is machine-wide: ``N`` lock files under a shared directory, one ``flock`` per running
sandbox. Trainer threads, ``rlvr verify --workers`` processes and reward worker processes on the
same machine therefore share one budget instead of each oversubscribing the CPUs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import queue
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from rlvr.sandbox.runner import Launched, execute, launch, launch_key
from rlvr.sandbox.types import SandboxJob, SandboxResult, SandboxStatus, Tier


def usable_cores() -> int:
    """CPUs this process may run on (affinity-aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class SlotLimiter:
    """At most ``slots`` holders at a time, across threads and processes (``flock`` files).

    Args:
        slots: number of concurrent holders (default: :func:`usable_cores`).
        directory: where the lock files live; processes sharing it share the budget
            (default ``$TMPDIR/rlvr-sandbox-slots``).
    """

    def __init__(self, slots: int | None = None, directory: str | None = None):
        self.slots = max(1, int(slots or usable_cores()))
        self.directory = directory or os.path.join(tempfile.gettempdir(), "rlvr-sandbox-slots")
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        self._local = threading.BoundedSemaphore(self.slots)
        self._pid = os.getpid()

    @contextlib.contextmanager
    def acquire(self) -> Iterator[int]:
        """Hold one slot for the duration of the ``with`` block; yields the slot index."""
        if self._pid != os.getpid():  # forked: the semaphore's state belongs to the parent
            self._local = threading.BoundedSemaphore(self.slots)
            self._pid = os.getpid()
        with self._local:  # keeps this process's threads from spinning on the locks
            delay = 0.001
            while True:
                for i in range(self.slots):
                    fd = os.open(os.path.join(self.directory, f"slot-{i}"),
                                 os.O_RDWR | os.O_CREAT, 0o600)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                        continue
                    try:
                        yield i
                    finally:
                        os.close(fd)  # closing releases the flock
                    return
                time.sleep(delay)  # all slots busy in other processes
                delay = min(delay * 2, 0.02)


class SandboxPool:
    """Runs sandbox jobs concurrently; usable from many threads and from worker processes.

    Each job gets its own fresh sandbox, used once. With ``prestart`` (default) the pool keeps
    up to ``workers`` sandboxes already started (interpreter up, waiting for a job), so a job
    does not wait for namespace setup and interpreter start-up; a pre-started sandbox only
    takes a job started with the same limits, environment and tier.

    Args:
        workers: threads for :meth:`map` / :meth:`submit`, and machine-wide slots of the default
            limiter (default: usable cores).
        limiter: the machine-wide bound on running programs (default: a :class:`SlotLimiter`
            with ``workers`` slots in the shared default directory).
        tier: force a tier for every run (default: the probed best).
        prestart: keep pre-started sandboxes (see above).
        max_idle_s: a pre-started sandbox idle longer than this (seconds) is replaced.
    """

    def __init__(
        self,
        workers: int | None = None,
        limiter: SlotLimiter | None = None,
        tier: Tier | None = None,
        prestart: bool = True,
        max_idle_s: float = 300.0,
    ):
        self.workers = max(1, int(workers or usable_cores()))
        self.limiter = limiter or SlotLimiter(self.workers)
        self.tier = tier
        self.prestart = prestart
        self.max_idle_s = max_idle_s
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._warm: list[Launched] = []
        self._pid = os.getpid()
        self._refills: queue.SimpleQueue | None = None
        self._launcher_thread: threading.Thread | None = None
        _live_pools.add(self)

    def _take_warm(self, key) -> Launched | None:
        stale = []
        found = None
        with self._lock:
            if self._pid != os.getpid():  # forked: those sandboxes belong to the parent
                self._warm, self._pid = [], os.getpid()
            now = time.monotonic()
            for sb in list(self._warm):
                if not sb.alive() or now - sb.spawned_at > self.max_idle_s:
                    self._warm.remove(sb)
                    stale.append(sb)
                elif found is None and sb.key == key:
                    self._warm.remove(sb)
                    found = sb
        for sb in stale:
            sb.discard()
        return found

    def _refill(self, job: SandboxJob) -> None:
        # Pre-started sandboxes are spawned by one long-lived thread of this pool: bwrap's
        # --die-with-parent (PR_SET_PDEATHSIG) fires when the spawning *thread* exits, so a
        # sandbox spawned from a short-lived caller thread would die while waiting.
        with self._lock:
            if self._pid != os.getpid():
                self._warm, self._refills, self._pid = [], None, os.getpid()
            if len(self._warm) >= self.workers:
                return
            if self._refills is None:
                self._refills = queue.SimpleQueue()
                self._launcher_thread = threading.Thread(
                    target=self._launcher, args=(self._refills,), name="rlvr-sandbox-prestart",
                    daemon=True,
                )
                self._launcher_thread.start()
            self._refills.put(job)

    def _launcher(self, requests: queue.SimpleQueue) -> None:
        while True:
            job = requests.get()
            if job is None:
                return
            with self._lock:
                if len(self._warm) >= self.workers:
                    continue
            try:
                sb = launch(job, tier=self.tier)
            except OSError:
                continue  # a later run launches its own and reports the problem
            with self._lock:
                if requests is self._refills:
                    self._warm.append(sb)
                    continue
            sb.discard()  # the pool was closed meanwhile

    def run(self, job: SandboxJob) -> SandboxResult:
        """Run one job in the calling thread once a slot is free (blocking)."""
        with self.limiter.acquire():
            sb = self._take_warm(launch_key(job, self.tier)) if self.prestart else None
            warm = sb is not None
            if sb is None:
                try:
                    sb = launch(job, tier=self.tier)
                except OSError as e:
                    tier = self.tier or launch_key(job)[0]
                    return SandboxResult(SandboxStatus.sandbox_error, tier,
                                         detail=f"launch failed: {e}")
            if self.prestart:
                self._refill(job)  # starts in the background while this job runs
            result = execute(sb, job)
            if warm and result.status is SandboxStatus.sandbox_error:
                # A pre-started sandbox that died while idle is not the job's problem: retry
                # once in a fresh one.
                try:
                    result = execute(launch(job, tier=self.tier), job)
                except OSError:
                    pass
            return result

    def submit(self, job: SandboxJob) -> Future:
        """Queue one job; returns a Future of its :class:`SandboxResult`."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="rlvr-sandbox")
            return self._executor.submit(self.run, job)

    def map(self, jobs: Iterable[SandboxJob]) -> list[SandboxResult]:
        """Run all jobs concurrently; results in input order."""
        return [f.result() for f in [self.submit(j) for j in jobs]]

    def close(self) -> None:
        """Stop the worker threads (waits for queued jobs) and kill pre-started sandboxes."""
        with self._lock:
            executor, self._executor = self._executor, None
            warm, self._warm = (self._warm if self._pid == os.getpid() else []), []
            launcher = None
            if self._refills is not None and self._pid == os.getpid():
                self._refills.put(None)
                launcher = self._launcher_thread
            self._refills, self._launcher_thread = None, None
        if executor is not None:
            executor.shutdown(wait=True)
        for sb in warm:
            sb.discard()
        # A sandbox the launcher is starting right now is discarded by the launcher itself
        # once it sees the pool closed; wait for that so no sandbox outlives close().
        if launcher is not None and launcher is not threading.current_thread():
            launcher.join(timeout=30)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_live_pools: weakref.WeakSet[SandboxPool] = weakref.WeakSet()


@atexit.register
def close_all_pools() -> None:
    """Close every live :class:`SandboxPool` of this process (their pre-started sandboxes are
    killed and their cgroups removed). Runs at interpreter exit; a process that leaves through
    ``os._exit`` (a multiprocessing child) calls it itself."""
    for pool in list(_live_pools):
        try:
            pool.close()
        except Exception:  # pragma: no cover - best effort at interpreter exit
            pass


_default: SandboxPool | None = None
_default_pid = -1
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The process-wide pool (re-created in a forked child)."""
    global _default, _default_pid
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _default = SandboxPool()
            _default_pid = os.getpid()
        return _default

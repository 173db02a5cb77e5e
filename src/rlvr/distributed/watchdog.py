"""The watchdog of the rollout pools: a thread of the trainer's process that checks the rollout
workers every few seconds and, on a failure, raises the pool's
:class:`rlvr.distributed.errors.RolloutWorkerError` in the trainer's main thread wherever it
is (a long update, a validation), not only at its next wait for groups.

Used by :class:`rlvr.distributed.async_rollout.LocalRolloutPool` (worker processes) and
:class:`rlvr.distributed.ray_async.RayRolloutPool` (Ray actors): each pool supplies how to
find a failure and how to fail (close itself and raise the error naming the worker).

The interruption: the thread records the failure and calls
``_thread.interrupt_main(SIGUSR1)``, which runs the handler installed by
:meth:`Watchdog.start` in the main thread at its next Python instruction (or inside a
blocking call that checks for signals); the handler calls the pool's ``fail``, which raises
there. Ray's blocking calls (``ray.get``, ``ray.wait``) run signal handlers but cannot pass
on an exception raised by one (it comes out later as a ``SystemError``), so a handler that
finds the main thread inside the ``ray`` package returns without raising, and the thread
interrupts again every ``RETRY_S`` until the error lands outside it (at the latest when the
Ray call returns). A pool that failed keeps its error and raises it again from its next call,
in case it was swallowed where it landed.
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Callable
from types import FrameType

Failure = tuple[str, str]  # (worker name, message)
RETRY_S = 0.1  # seconds between interruptions while the main thread is inside Ray


def in_ray_call(frame: FrameType | None) -> bool:
    """Whether ``frame`` or one of its callers runs code of the ``ray`` package."""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == "ray" or module.startswith("ray."):
            return True
        frame = frame.f_back
    return False


class Watchdog:
    """Calls ``check()`` every ``interval_s`` seconds from a daemon thread; the first failure
    it returns is raised in the main thread by ``fail(name, message)`` (see the module doc).

    Args:
        check: returns ``(worker name, message)`` for a failed worker, else None; called
            from the watchdog's thread, so it must read only thread-safe state. An exception
            it raises is reported as a failure of ``name``'s workers (unless stopped).
        fail: closes the pool and raises its error; called in the main thread.
        interval_s: seconds between checks (> 0).
        name: the workers' names, named in the error when ``check`` itself raises (the
            thread is ``<name> watchdog``).

    Raises:
        ValueError: ``interval_s <= 0``.
    """

    def __init__(self, check: Callable[[], Failure | None], fail: Callable[[str, str], None],
                 *, interval_s: float, name: str):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.check, self.fail, self.interval_s, self.name = check, fail, interval_s, name
        self.pending: Failure | None = None
        self._stop = threading.Event()
        self._previous = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Install the ``SIGUSR1`` handler (the previous one comes back at :meth:`stop`) and
        start the thread.

        Raises:
            ValueError: not called from the main thread.
        """
        if threading.current_thread() is not threading.main_thread():
            raise ValueError("a rollout pool's watchdog must be started from the main thread")
        self._previous = signal.signal(signal.SIGUSR1, self._on_interrupt)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{self.name} watchdog")
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread (waits up to ``timeout_s`` for a check in progress) and put the
        previous ``SIGUSR1`` handler back. Idempotent; a no-op before :meth:`start`."""
        self._stop.set()
        if self._previous is not None:
            try:
                signal.signal(signal.SIGUSR1, self._previous)
                self._previous = None
            except ValueError:  # not the main thread: the handler is a no-op once stopped
                pass
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s if self.pending is None else RETRY_S):
            if self.pending is None:
                try:
                    found = self.check()
                except Exception as exc:  # reported, never lost in this thread
                    if self._stop.is_set():
                        return
                    found = (self.name, f"the rollout workers could not be checked: "
                                        f"{type(exc).__name__}: {exc}")
                if found is None or self._stop.is_set():
                    continue
                self.pending = found
            _thread.interrupt_main(signal.SIGUSR1)  # again until the handler raises

    def _on_interrupt(self, signum, frame) -> None:
        if self.pending is None or self._stop.is_set() or in_ray_call(frame):
            return  # nothing found yet, stopped, or inside Ray: the thread comes back
        self.fail(*self.pending)

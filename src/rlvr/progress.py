"""Progress of the long phases (validation, pass@k sampling, SFT, GRPO steps, ``rlvr eval``
sampling) with an ETA, so that neither a terminal nor a log goes quiet for minutes.

On a terminal a phase is a transient rich progress bar (done / total, elapsed, time left);
piped or logged it prints plain lines instead, one each time another ``every_fraction`` of the
work is done (10%) and, from a background thread, one whenever ``every_seconds`` (30 s) passed
without a line, so a log shows that a slow phase is alive and when it should end::

    validation before_grpo: 64/200 problems (32%), 12 s elapsed, ETA 25 s

A phase whose amount of work is unknown (``total=None``: one rollout call, a step) shows its
elapsed time and its current part (:meth:`Phase.status`). The line at completion is left to the
caller, which prints the phase's result anyway.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

EVERY_FRACTION = 0.1
EVERY_SECONDS = 30.0

#: The phases running now, innermost last (:func:`announce` tells the innermost one).
_RUNNING: list[Phase] = []


def format_seconds(seconds: float) -> str:
    """A duration for people: ``7 s``, ``3m05s``, ``2h07m``."""
    seconds = int(round(max(0.0, seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def eta_seconds(elapsed: float, done: int, total: int | None) -> float | None:
    """Seconds left at the rate so far (``elapsed`` for ``done`` of ``total``), or None while
    nothing is done or the total is unknown."""
    if not total or done <= 0:
        return None
    return elapsed / done * max(total - done, 0)


class Phase:
    """One long phase: a context manager; call :meth:`update` with the units done so far.

    Args:
        label: what runs, e.g. ``validation before_grpo``; every line starts with it.
        total: units of work (problems, steps), or None when unknown (elapsed time only).
        console: where the bar or lines go (rich :class:`~rich.console.Console`).
        unit: the units' name in plain lines (``problems``).
        live: a rich bar (True) or plain lines (False); None: a bar when ``console`` is a
            terminal.
        every_fraction: plain lines each time this share of ``total`` more is done (None:
            none; for loops that print their own lines).
        every_seconds: plain lines also after this many seconds without one (0: never).
        clock: the time source (tests).
    """

    def __init__(self, label: str, total: int | None, console: Console, *, unit: str = "",
                 live: bool | None = None, every_fraction: float | None = EVERY_FRACTION,
                 every_seconds: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.console, self.unit = label, total, console, unit
        self.live = (console.is_terminal and not console.is_dumb_terminal) if live is None else live
        self.every_fraction, self.every_seconds, self.clock = every_fraction, every_seconds, clock
        self.done, self.part = 0, ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._task = None
        self._start = self._last_line = 0.0
        self._next_mark = every_fraction if every_fraction is not None else math.inf

    # -- the context ------------------------------------------------------------------------
    def __enter__(self) -> Phase:
        _RUNNING.append(self)
        self._start = self._last_line = self.clock()
        if self.live:
            columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                       MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                       TimeRemainingColumn()]
            if not self.total:  # unknown amount of work: elapsed time only
                columns = [SpinnerColumn(), TextColumn("{task.description}"),
                           TimeElapsedColumn()]
            self._bar = Progress(*columns, console=self.console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        elif self.every_seconds > 0:
            self._thread = threading.Thread(target=self._heartbeat, daemon=True,
                                            name=f"progress: {self.label}")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self in _RUNNING:
            _RUNNING.remove(self)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.stop()

    # -- reporting --------------------------------------------------------------------------
    def update(self, done: int, total: int | None = None) -> None:
        """``done`` units of ``total`` are finished (a running count, not an increment);
        ``total`` sets or changes the amount of work when given."""
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total
            if self._bar is not None:
                self._bar.update(self._task, completed=done, total=self.total)
                return
            if not self.total or done >= self.total:
                return  # the caller prints the result
            now = self.clock()
            if (done / self.total >= self._next_mark - 1e-9
                    or (self.every_seconds > 0 and now - self._last_line >= self.every_seconds)):
                self._line(now)

    def advance(self, units: int = 1) -> None:
        """``units`` more are finished."""
        self.update(self.done + units)

    def status(self, part: str) -> None:
        """Name the part now running (``rollout``, ``reward``, ``update``): shown in the bar
        and in the following plain lines."""
        with self._lock:
            self.part = part
            if self._bar is not None:
                self._bar.update(self._task, description=self._title())

    def text(self, now: float | None = None) -> str:
        """The plain progress line for the state now."""
        elapsed = (self.clock() if now is None else now) - self._start
        if not self.total:
            return f"{self._title()}: running, {format_seconds(elapsed)} elapsed"
        eta = eta_seconds(elapsed, self.done, self.total)
        unit = f" {self.unit}" if self.unit else ""
        return (f"{self._title()}: {self.done}/{self.total}{unit} "
                f"({self.done / self.total:.0%}), {format_seconds(elapsed)} elapsed, ETA "
                + ("unknown" if eta is None else format_seconds(eta)))

    # -- helpers ----------------------------------------------------------------------------
    def _title(self) -> str:
        return f"{self.label} ({self.part})" if self.part else self.label

    def _line(self, now: float) -> None:
        # called with the lock held
        self.console.print(self.text(now), highlight=False, markup=False, soft_wrap=True)
        self._last_line = now
        if self.total and self.every_fraction is not None:
            reached = self.done / self.total / self.every_fraction
            self._next_mark = (math.floor(reached + 1e-9) + 1) * self.every_fraction

    def _heartbeat(self) -> None:
        while True:
            with self._lock:
                wait = self._last_line + self.every_seconds - self.clock()
            if self._stop.wait(max(wait, 0.01)):
                return
            with self._lock:
                now = self.clock()
                if now - self._last_line >= self.every_seconds and not (
                        self.total and self.done >= self.total):
                    self._line(now)


class _Silent:
    """A :class:`Phase` stand-in that reports nothing."""

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, done: int, total: int | None = None) -> None:
        """Nothing."""

    def advance(self, units: int = 1) -> None:
        """Nothing."""

    def status(self, part: str) -> None:
        """Nothing."""


def silent(label: str = "", total: int | None = None, **_) -> _Silent:
    """A phase that reports nothing (the default where no console is given)."""
    return _Silent()


PhaseFactory = Callable[..., "Phase | _Silent"]


def announce(part: str) -> None:
    """Tell the innermost running :class:`Phase` (if any) which part of it runs now
    (:meth:`Phase.status`): code deep in a phase (a GRPO step's rollout source) names its
    parts without being handed the phase."""
    if _RUNNING:
        _RUNNING[-1].status(part)


def console_phases(console: Console) -> PhaseFactory:
    """A factory ``(label, total, **options) -> Phase`` writing to ``console``: what the
    library functions that take a ``phase`` argument want."""
    return lambda label, total=None, **options: Phase(label, total, console, **options)


def step_eta(done: int, total: int, elapsed: float) -> str:
    """``ETA 4m10s`` for a loop of ``total`` steps with ``done`` done in ``elapsed`` s (the
    mean step time so far), or ``""`` when done or nothing is done yet."""
    eta = eta_seconds(elapsed, done, total)
    return "" if eta is None or done >= total else f"ETA {format_seconds(eta)}"


__all__ = ["EVERY_FRACTION", "EVERY_SECONDS", "Phase", "PhaseFactory", "console_phases",
           "eta_seconds", "format_seconds", "silent", "step_eta"]

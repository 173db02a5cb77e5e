"""Running tool calls with a hard time bound each, and a bounded observation whatever happens.

Every call runs in its own daemon thread, at most ``workers`` at a time. A call's clock starts
when it starts running (not while it waits for a slot, so a busy step does not time calls
out), and the caller stops waiting for it at its bound: its observation then says it timed
out, its slot goes to the next call, and the thread is abandoned (Python cannot kill a
thread). So a tool that hangs costs the episode its bound, never the run; a hung tool keeps
its thread (and CPU, if it spins) until it returns, which is why tools that run untrusted or
unbounded work do it in a process they bound themselves (the python tool: the sandbox, whose
own limits are set from the same bound). A tool that raises, returns something that is not
text, or returns megabytes yields an observation of at most ``output_bytes`` bytes.

While a call runs, :func:`current_limits` gives the tool its own bounds.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.tools.output import bound_text
from rlvr.tools.registry import Tool
from rlvr.tools.types import ToolError, ToolLimits, ToolOutcome, ToolStatus, ToolTimeout

# ToolLimits is a frozen dataclass: the shared default cannot be mutated
_LIMITS: contextvars.ContextVar[ToolLimits] = contextvars.ContextVar(
    "rlvr_tool_limits", default=ToolLimits())  # noqa: B039


def current_limits() -> ToolLimits:
    """The limits of the tool call running in this thread (the defaults outside a call):
    ``timeout_s`` is already the call's own bound (the smaller of the tool's and the
    environment's)."""
    return _LIMITS.get()


def invalid(name: str, message: str, limits: ToolLimits) -> ToolOutcome:
    """The outcome of a call that cannot be made (malformed, unknown tool, bad arguments):
    ``Error: <message>``, bounded to ``limits.output_bytes``."""
    text, cut = bound_text(f"Error: {message}", limits.output_bytes)
    return ToolOutcome(name, ToolStatus.invalid, text, 0.0, cut)


def check_arguments(tool: Tool, arguments: Any) -> str | None:
    """Why ``arguments`` cannot be passed to ``tool.fn`` as keywords (not a mapping, a key that
    is not a string, a missing or unknown parameter), or None when they can."""
    if not isinstance(arguments, Mapping):
        return f"{tool.name}: arguments must be an object, got {type(arguments).__name__}"
    if not all(isinstance(k, str) for k in arguments):
        return f"{tool.name}: argument names must be strings"
    try:
        inspect.signature(tool.fn).bind(**arguments)
    except TypeError as exc:
        return f"{tool.name}: {exc}"
    return None


def _invoke(tool: Tool, arguments: Mapping[str, Any], limits: ToolLimits) -> ToolOutcome:
    # Runs in the call's thread: never raises.
    _LIMITS.set(limits)
    start = time.monotonic()
    status = ToolStatus.ok
    try:
        value = tool.fn(**arguments)
        if not isinstance(value, str):
            status, value = ToolStatus.error, (f"Error: tool {tool.name!r} returned "
                                               f"{type(value).__name__}, not text")
    except ToolTimeout as exc:
        status, value = ToolStatus.timeout, _message(exc)
    except ToolError as exc:
        status, value = ToolStatus.error, _message(exc)
    except BaseException as exc:  # a tool's bug (SystemExit too) is the model's observation
        status, value = ToolStatus.error, f"Error: {type(exc).__name__}: {_message(exc)}"
    seconds = time.monotonic() - start
    text, cut = bound_text(value, limits.output_bytes)
    return ToolOutcome(tool.name, status, text, seconds, cut)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a hostile __str__
        return type(exc).__name__


class _Call:
    def __init__(self, tool: Tool, arguments: Mapping[str, Any], limits: ToolLimits):
        self.tool, self.arguments, self.limits = tool, arguments, limits
        self.started: float | None = None
        self.outcome: ToolOutcome | None = None  # set once: by the thread or at the deadline


def run_calls(calls: Sequence[tuple[Tool, Mapping[str, Any]]], limits: ToolLimits,
              workers: int | None = None) -> list[ToolOutcome]:
    """Run tool calls concurrently, each bounded in time and output; outcomes in input order.

    Args:
        calls: ``(tool, arguments)`` pairs; arguments are passed as keywords (check them first
            with :func:`check_arguments`: a mismatch here is an ``error`` outcome).
        limits: ``timeout_s`` is the environment's bound (each call gets
            ``tool.bound_s(limits.timeout_s)``), ``output_bytes`` the observation bound.
        workers: calls running at once (default: the CPUs this process may use), >= 1.

    Never raises for anything a tool does; a call that outlives its bound gets status
    ``timeout`` with ``seconds`` = its bound (see the module doc for what becomes of it).
    """
    if not calls:
        return []
    slots = threading.Semaphore(max(1, workers or len(os.sched_getaffinity(0))))
    done = threading.Condition()
    jobs = [_Call(tool, args, ToolLimits(tool.bound_s(limits.timeout_s), limits.output_bytes))
            for tool, args in calls]

    def target(job: _Call) -> None:
        slots.acquire()
        with done:
            job.started = time.monotonic()
            done.notify_all()
        outcome = _invoke(job.tool, job.arguments, job.limits)
        with done:
            if job.outcome is None:  # not abandoned at its deadline
                job.outcome = outcome
                slots.release()
            done.notify_all()

    for job in jobs:
        threading.Thread(target=target, args=(job,), daemon=True,
                         name=f"rlvr-tool-{job.tool.name}").start()
    with done:
        while any(job.outcome is None for job in jobs):
            now = time.monotonic()
            for job in jobs:
                if job.outcome is None and job.started is not None \
                        and now >= job.started + job.limits.timeout_s:
                    text, cut = bound_text(f"Error: the {job.tool.name} call timed out after "
                                           f"{job.limits.timeout_s:g} s", job.limits.output_bytes)
                    job.outcome = ToolOutcome(job.tool.name, ToolStatus.timeout, text,
                                              job.limits.timeout_s, cut)
                    slots.release()  # the slot goes to the next call; the thread is left
            deadlines = [job.started + job.limits.timeout_s for job in jobs
                         if job.outcome is None and job.started is not None]
            if any(job.outcome is None for job in jobs):
                done.wait(timeout=max(0.0, min(deadlines) - now) if deadlines else None)
    return [job.outcome for job in jobs]  # type: ignore[misc]

"""Supervising one sandboxed run from the parent: hand the job over once the sandbox is ready,
then watch its CPU time, the wall clock and its output until the supervisor's record arrives.

The parent never executes anything the program produced; it only reads capped bytes and parses
the supervisor's one JSON record (which must carry an HMAC keyed by this run's nonce).

Time limits (see :class:`~rlvr.sandbox.types.SandboxLimits`): the run's clock starts when the
driver reports ready, which is also when the job is handed over. From then on the parent polls
the run's CPU time (:class:`~rlvr.sandbox.cputime.CpuMeter`, summed over every process and
thread of the run) and kills the run once it exceeds the budget; a run that finishes over the
budget between two polls is a timeout too, so the verdict depends on the CPU time used, not on
when a poll happened. The wall clock only decides as a loose backstop for programs that use no
CPU (sleep, block), and RLIMIT_CPU is the kernel's hard per-process kill behind both.
"""

from __future__ import annotations

import hmac
import json
import math
import os
import selectors
import subprocess
import time

from rlvr.sandbox.cputime import CpuMeter
from rlvr.sandbox.types import SandboxJob

RESULT_CAP = 64 << 20  # bytes accepted on the supervisor's result channel


class Run:
    """Mutable state of one supervised run.

    ``timed_out`` is ``None``, ``"startup"`` (the sandbox never got ready), ``"cpu"`` (the
    parent killed the run over its CPU budget) or ``"wall"`` (the wall backstop expired).
    ``cpu_used`` is in CPU seconds since the ready report, ``ended_at`` when the run's clock
    stopped (record received, kill decided or supervisor gone).
    """

    def __init__(self) -> None:
        self.ready_at: float | None = None
        self.ended_at: float | None = None
        self.cpu_base: float | None = None
        self.cpu_used = 0.0
        self.record: dict | None = None
        self.result_buf = bytearray()
        self.output = bytearray()
        self.output_over = False
        self.timed_out: str | None = None
        self.started_at = time.monotonic()

    @property
    def program_wall_s(self) -> float:
        """Wall seconds from the ready report to the end of the run's clock (0 if never ready)."""
        if self.ready_at is None:
            return 0.0
        return (self.ended_at or time.monotonic()) - self.ready_at

    def stop_clock(self, meter: CpuMeter) -> None:
        """Take the final CPU reading (once), before teardown adds CPU of its own.

        With a record, the supervisor's own count (everything it reaped, see ``driver.py``)
        also counts: a ``/proc`` reading taken while processes exit can miss one.
        """
        if self.ended_at is not None:
            return
        self.ended_at = time.monotonic()
        if self.cpu_base is not None:
            self.cpu_used = max(self.cpu_used, meter.read() - self.cpu_base)
        reported = self.record.get("cpu") if self.record is not None else None
        if isinstance(reported, (int, float)) and not isinstance(reported, bool):
            if math.isfinite(reported) and reported >= 0:
                self.cpu_used = max(self.cpu_used, float(reported))


def _parse_result_lines(run: Run, nonce: str) -> None:
    while True:
        i = run.result_buf.find(b"\n")
        if i < 0:
            return
        line = bytes(run.result_buf[:i])
        del run.result_buf[: i + 1]
        if run.ready_at is None:
            if line == b"READY":
                run.ready_at = time.monotonic()
            continue
        if run.record is None:
            # Assume the program can write this channel and read it (a dumpable holder of it,
            # such as bwrap's own pid 1 before --as-pid-1, opens it to the program through
            # /proc/<pid>/fd), so a line may be anything and the record may be seen by the
            # program: the nonce never travels, the record is
            # ``<HMAC-SHA256 of the JSON, keyed by the nonce, hex> <JSON>``. A line whose MAC
            # does not check out is not even parsed.
            mac, _, body = line.partition(b" ")
            want = hmac.new(nonce.encode(), body, "sha256").hexdigest().encode()
            if not hmac.compare_digest(mac, want):
                continue
            try:
                rec = json.loads(body)
            except Exception:
                continue
            if isinstance(rec, dict):
                run.record = rec


def supervise(
    proc: subprocess.Popen,
    job: SandboxJob,
    payload: bytes,
    nonce: str,
    spawned_at: float,
    meter: CpuMeter,
) -> Run:
    """Watch the started sandbox ``proc`` until its record arrives, it is gone, or a limit
    ends the run: wait for its ``READY``, then hand over ``payload`` (the job, carrying
    ``nonce``), poll ``meter`` against the CPU budget, keep the wall backstop and the output
    cap (the module docstring). Returns the :class:`Run`; kills nothing (the caller does).

    Raises:
        OSError: reading or writing the sandbox's pipes failed.
    """
    lim = job.limits
    budget, wall_limit = lim.timeout_s, lim.wall_limit_s()
    # The run's CPU time grows by at most this many CPU seconds per wall second; the sandbox
    # may use any core of the machine, not only those of our own affinity mask.
    cores = os.cpu_count() or 1
    run = Run()
    # A pre-started sandbox may have been waiting long: its start-up clock is not the job's.
    startup_deadline = max(spawned_at + lim.startup_timeout_s, time.monotonic() + 1.0)
    sel = selectors.DefaultSelector()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
    sel.register(proc.stdout, selectors.EVENT_READ, "res")
    sel.register(proc.stderr, selectors.EVENT_READ, "out")
    pending = memoryview(payload)
    open_reads = 2
    next_poll = 0.0
    try:
        while run.record is None and open_reads:
            now = time.monotonic()
            if run.ready_at is None:
                deadline = startup_deadline
            else:
                if run.cpu_base is None:
                    # The budget starts now: take the baseline, then hand the job over (the
                    # driver does nothing for the job before it has it).
                    run.cpu_base = meter.read()
                    sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
                    next_poll = now
                deadline = run.ready_at + wall_limit
                if now >= next_poll:
                    run.cpu_used = meter.read() - run.cpu_base
                    if run.cpu_used > budget:
                        run.timed_out = "cpu"
                        run.stop_clock(meter)
                        break
                    # No poll before this one could find the budget spent (CPU time grows at
                    # most `cores` times as fast as wall time), so polls are rare while much
                    # budget is left and frequent near its end: the overshoot stays below
                    # `cores` x min_interval_s without reading the meter often.
                    left = (budget - run.cpu_used) / cores
                    next_poll = now + min(0.25, max(meter.min_interval_s, left))
            if now >= deadline:
                run.timed_out = "startup" if run.ready_at is None else "wall"
                run.stop_clock(meter)
                break
            wait = deadline - now if run.ready_at is None else min(deadline, next_poll) - now
            for key, _ in sel.select(max(0.0, min(wait, 0.5))):
                tag = key.data
                if tag == "in":
                    try:
                        n = os.write(proc.stdin.fileno(), pending[: 1 << 16])
                        pending = pending[n:]
                    except BlockingIOError:
                        continue
                    except OSError:  # the sandbox is gone; reading tells us the rest
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                chunk = _read_ready(key.fileobj)
                if chunk is None:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_reads -= 1
                    continue
                if tag == "res":
                    if len(run.result_buf) + len(chunk) > RESULT_CAP:
                        run.output_over = True  # only a runaway could do this; treat as a cap
                        run.stop_clock(meter)
                        return run
                    run.result_buf += chunk
                    _parse_result_lines(run, nonce)
                    if run.record is not None:
                        run.stop_clock(meter)
                else:
                    room = lim.max_output_bytes - len(run.output)
                    run.output += chunk[: max(room, 0)]
                    if len(chunk) > room:
                        run.output_over = True
                        run.stop_clock(meter)
                        return run
        run.stop_clock(meter)  # the supervisor is gone (both channels closed)
        if run.record is not None:
            # Let the supervisor finish on its own (its sweep, the pid namespace teardown):
            # the result channel reaches EOF when it is gone. Keep collecting output meanwhile.
            end = time.monotonic() + 1.0
            res_open = proc.stdout in [k.fileobj for k in sel.get_map().values()]
            while res_open and time.monotonic() < end:
                for key, _ in sel.select(max(0.0, end - time.monotonic())):
                    chunk = _read_ready(key.fileobj)
                    if chunk is None:
                        continue
                    if not chunk:
                        sel.unregister(key.fileobj)
                        if key.data == "res":
                            res_open = False
                    elif key.data == "out":
                        room = lim.max_output_bytes - len(run.output)
                        run.output += chunk[: max(room, 0)]
                        if len(chunk) > room:
                            run.output_over = True
    finally:
        sel.close()
    return run


def _read_ready(pipe) -> bytes | None:
    """Up to 64 KiB from a non-blocking pipe the selector said is readable: ``b""`` at EOF,
    ``None`` when the read would block after all."""
    try:
        return os.read(pipe.fileno(), 1 << 16)
    except BlockingIOError:
        return None

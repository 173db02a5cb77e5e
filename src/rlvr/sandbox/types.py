"""Public data types of the sandbox: limits, jobs, statuses and results."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

# Default CPU-time budget of one run, in CPU seconds (program + tests, all processes).
#
# Measured (src/rlvr/sandbox, 2 vCPU Intel Xeon with AVX2, Debian 12, bwrap tier, cgroup
# accounting; every reference solution of MBPP (974) and HumanEval (164) graded through the
# sandbox, 2 runs at a time; the machine was shared, load average 2-8):
#
#   reference                  CPU s, no extra load   CPU s, + 2 busy loops   wall s, + 2 loops
#   MBPP/123 (amicable sums)   1.65-1.74              1.66                    3.7-4.9
#   HumanEval/75               0.095-0.097            0.093-0.100             0.33-0.37
#   any other reference        <= 0.02                <= 0.02
#   MBPP/123, 10 reruns each:  1.61-1.75 s CPU (no extra load, + 2 and + 4 busy loops alike),
#                              3.2-4.6 s wall
#
# Load stretched MBPP/123's wall time to 3.2-4.9 s (the old 5 s wall limit failed it on a
# slower machine) while its CPU time stayed within 1.61-1.75 s. A slower CPU stretches CPU time
# too, by about 2x between the machines this project runs on, so the budget keeps a 3x margin
# on such a machine as well: 12 s = 6.9x the slowest reference here, 3.4x at 2x slower.
# The price is CPU burned by programs that loop forever (up to 12 CPU seconds each).
DEFAULT_CPU_BUDGET_S = 12.0


class SandboxStatus(str, Enum):
    """Outcome of one sandboxed run (after grading, for graded runs).

    - ``ok``: the program ran to completion and every test passed.
    - ``wrong_answer``: it ran, but at least one test compared unequal / asserted false.
    - ``runtime_error``: the program raised or exited before the tests, or a test raised, or the
      run hit a hard limit other than time / memory / output (e.g. open files).
    - ``timeout``: the run used more CPU time than its budget (summed over all its processes,
      checked by the parent), a process hit RLIMIT_CPU, or the run outlived the looser
      wall-clock backstop (a program that sleeps or blocks). ``detail`` says which.
    - ``memory``: MemoryError, or the memory cgroup OOM-killed the run.
    - ``output_limit``: the program wrote more than the output cap.
    - ``sandbox_error``: the infrastructure failed (bwrap / interpreter could not start, driver
      bug); not the program's fault, so callers exclude such samples instead of scoring them.
    """

    ok = "ok"
    wrong_answer = "wrong_answer"
    runtime_error = "runtime_error"
    timeout = "timeout"
    memory = "memory"
    output_limit = "output_limit"
    sandbox_error = "sandbox_error"

    def __str__(self) -> str:
        return self.value


class Tier(str, Enum):
    """Isolation level a run used.

    - ``bwrap``: bubblewrap with new user / pid / net / ipc / uts / mount namespaces, read-only
      ``/usr``, tmpfs work dir, empty environment, uid 65534; plus rlimits and cgroups.
    - ``rlimit``: WEAKER fallback: a plain child process as uid 65534 (when started as root) in a
      fresh temp dir with an empty environment, rlimits, its own session and (when writable)
      cgroups. It shares the host's network and file system view: not safe for untrusted code.
    """

    bwrap = "bwrap"
    rlimit = "rlimit"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run (seconds, bytes, counts).

    Time is judged by CPU time, not wall time: a loaded machine stretches a program's wall time
    (it waits for a core) but not the CPU time it needs, so a correct program's verdict must
    not depend on the load. A run is a ``timeout`` when

    - its CPU time, summed over all its processes and threads from the moment the in-sandbox
      driver reports ready, exceeds ``timeout_s`` (checked by the parent, see
      :mod:`rlvr.sandbox.cputime`); or
    - one process reaches RLIMIT_CPU (``cpu_s``): the kernel's hard per-process kill, in case
      the parent's check comes late; or
    - the run outlives the wall-clock backstop :meth:`wall_limit_s`, which only exists to stop
      programs that use no CPU (sleep, wait on a pipe, a lock or a child; stdin is
      ``/dev/null``, so reading input fails at once) and is deliberately loose.

    A slower CPU does stretch CPU time (about 2x between the machines this runs on), which is
    what the margin of the default budget is for (see ``DEFAULT_CPU_BUDGET_S``). Whoever bounds
    a whole run from outside (e.g. the reward pipeline's per-call limit) must allow more than
    ``startup_timeout_s + wall_limit_s()`` wall seconds, or that bound decides instead.

    Attributes:
        timeout_s: the CPU-time budget in CPU seconds (the program, its tests and every
            process it starts, together).
        cpu_s: RLIMIT_CPU per process in seconds; ``None`` means ``ceil(timeout_s) + 1``.
        wall_timeout_s: wall-clock backstop in seconds, measured by the parent from the
            moment the driver reports ready; ``None`` means
            ``max(wall_factor * timeout_s, timeout_s + wall_slack_s)`` (24 s for the default
            12 s budget: a program that sleeps holds its sandbox and verifier worker at most
            twice as long as one that spins).
        wall_factor: see ``wall_timeout_s``. At 2x a program that needs its whole budget is
            stopped by the backstop only if it gets less than half a core (more than 4
            runnable processes on 2 cores); the slowest reference (1/7 of the default budget)
            only below 1/14 of a core.
        wall_slack_s: see ``wall_timeout_s``; keeps the backstop loose for small budgets
            (below 2 s), where scheduling delays are large relative to the budget.
        memory_bytes: memory cgroup limit of the whole run (when cgroups are writable).
        address_space_bytes: RLIMIT_AS per process (kept loose: it breaks threads), ``None``
            for none.
        max_processes: pids cgroup limit (RLIMIT_NPROC in the fallback tier, which root ignores).
        max_open_files: RLIMIT_NOFILE.
        max_file_bytes: RLIMIT_FSIZE (largest file the program may write).
        max_output_bytes: cap on captured stdout + stderr; exceeding it kills the run
            (``output_limit``).
        tmpfs_bytes: size of the tmpfs work dir and ``/tmp`` (bwrap tier).
        startup_timeout_s: how long (wall) the sandbox may take to start before
            ``sandbox_error`` (infrastructure, not the program).
    """

    timeout_s: float = DEFAULT_CPU_BUDGET_S
    cpu_s: float | None = None
    wall_timeout_s: float | None = None
    wall_factor: float = 2.0
    wall_slack_s: float = 2.0
    memory_bytes: int = 512 << 20
    address_space_bytes: int | None = 4 << 30
    max_processes: int = 64
    max_open_files: int = 256
    max_file_bytes: int = 16 << 20
    max_output_bytes: int = 1 << 20
    tmpfs_bytes: int = 64 << 20
    startup_timeout_s: float = 20.0

    def wall_limit_s(self) -> float:
        """The wall-clock backstop in seconds (see ``wall_timeout_s``)."""
        if self.wall_timeout_s is not None:
            return float(self.wall_timeout_s)
        return max(self.wall_factor * self.timeout_s, self.timeout_s + self.wall_slack_s)

    def rlimit_cpu_s(self) -> int:
        """RLIMIT_CPU in whole seconds (at least 1; see ``cpu_s``)."""
        cpu = self.cpu_s if self.cpu_s is not None else math.ceil(self.timeout_s) + 1
        return max(1, math.ceil(cpu))


@dataclass(frozen=True)
class InSandboxCheck:
    """A test that could not be turned into a probe and runs inside the sandbox.

    It runs in the trusted supervisor process of the sandbox, never in the program's process:
    the program's functions are reached through remote calls that return plain data.

    Attributes:
        source: Python source. For ``kind="stmt"`` it is executed as is (e.g.
            ``assert abs(f(2) - 1.41) < 1e-6``) and passes if it raises nothing. For
            ``kind="check"`` it must define ``check(candidate)`` (HumanEval style), which is
            then called with the program's entry point.
        kind: ``"stmt"`` or ``"check"``.
    """

    source: str
    kind: str = "stmt"


@dataclass(frozen=True)
class SandboxJob:
    """What to run in one sandbox.

    Attributes:
        program: the untrusted Python source; executed as ``__main__`` from ``/work/prog.py``.
        entry_point: the function under test (also bound as ``candidate`` for probes).
        setup_code: trusted code run in the program's namespace after the program (for the
            probes) and, when there are checks, in the supervisor's check namespace too (for
            them: what it imports and defines there is never the program's).
        probes: expressions evaluated in the program's namespace after it ran; their values
            come back encoded with :mod:`rlvr.sandbox.codec` and are compared by the caller.
            Expected values never enter the sandbox.
        checks: tests that run inside the sandbox's supervisor (see :class:`InSandboxCheck`).
        names: identifiers the checks (and the setup code) use. Those the program binds to
            functions or classes are reachable from the checks by remote call, except
            builtins and what ``check_prelude`` or ``setup_code`` defines, which always stay
            the trusted ones (the entry point is always the program's); standard-library
            module names are the supervisor's own imports; nothing else of the program is.
        check_prelude: trusted source (e.g. a HumanEval prompt with helpers such as ``poly``)
            run in the supervisor before the checks, never in the program's process.
        env: extra environment variables for the program (the environment is otherwise empty).
        limits: resource limits.
        python: the interpreter that runs the driver and the program (an absolute host path;
            ``None``: the probed one, :attr:`SandboxEnvironment.python`). In the bwrap tier a
            path outside ``/usr`` has its prefix (two levels above the binary) bound
            read-only.
        read_only_paths: host directories the program may read (absolute paths), bound
            read-only at the same path in the bwrap tier (e.g. a ``site-packages`` the
            program imports from); the fallback tier sees the host's files anyway.
    """

    program: str
    entry_point: str | None = None
    setup_code: str = ""
    probes: tuple[str, ...] = ()
    checks: tuple[InSandboxCheck, ...] = ()
    names: tuple[str, ...] = ()
    check_prelude: str = ""
    env: dict[str, str] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    python: str | None = None
    read_only_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe's result: ``value`` (decoded plain data) if ``ok`` else ``error`` (a type name)."""

    ok: bool
    value: Any = None
    error: str = ""


@dataclass(frozen=True)
class CheckOutcome:
    """One in-sandbox check: passed or not, with the error text (e.g. ``AssertionError: ``)."""

    ok: bool
    error: str = ""


@dataclass(frozen=True)
class SandboxResult:
    """Everything one sandboxed run reports.

    Attributes:
        status: the run's status. From :func:`rlvr.sandbox.run_job` it is ``ok`` when the
            program and all tests ran (probe values are not judged there) and ``wrong_answer``
            only for failed in-sandbox checks; :func:`rlvr.sandbox.grading.grade` judges probes.
        tier: the isolation tier used.
        wall_s: wall seconds from the start of the job (or the sandbox's spawn, if later) to
            the end of cleanup.
        cpu_s: CPU seconds used by all the run's processes and threads from the driver's
            ready report to the end of the run (the quantity the budget ``timeout_s`` limits);
            0.0 if the sandbox never got ready.
        probes: probe outcomes, in job order (empty if the tests did not run).
        checks: in-sandbox check outcomes, in job order.
        output: captured stdout + stderr of the program (decoded with ``errors="replace"``,
            at most ``max_output_bytes``).
        detail: short reason, for humans (e.g. ``"program_error: ZeroDivisionError"``).
        exit_code: the candidate process's exit code, or ``-signal``; ``None`` if unknown.
        leftover_killed: processes still alive at the end that cleanup had to kill.
    """

    status: SandboxStatus
    tier: Tier
    wall_s: float = 0.0
    cpu_s: float = 0.0
    probes: tuple[ProbeOutcome, ...] = ()
    checks: tuple[CheckOutcome, ...] = ()
    output: str = ""
    detail: str = ""
    exit_code: int | None = None
    leftover_killed: int = 0

    def to_dict(self) -> dict:
        """Plain-data view (status and tier as strings; probe values as ``repr``)."""
        return {
            "status": self.status.value,
            "tier": self.tier.value,
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "probes": [
                {"ok": p.ok, "value": repr(p.value), "error": p.error} for p in self.probes
            ],
            "checks": [{"ok": c.ok, "error": c.error} for c in self.checks],
            "output": self.output,
            "detail": self.detail,
            "exit_code": self.exit_code,
            "leftover_killed": self.leftover_killed,
        }

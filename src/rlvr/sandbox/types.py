"""Public data types of the sandbox: limits, jobs, statuses and results."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class SandboxStatus(str, Enum):
    """Outcome of one sandboxed run (after grading, for graded runs).

    - ``ok``: the program ran to completion and every test passed.
    - ``wrong_answer``: it ran, but at least one test compared unequal / asserted false.
    - ``runtime_error``: the program raised or exited before the tests, or a test raised, or the
      run hit a hard limit other than time / memory / output (e.g. open files).
    - ``timeout``: the wall deadline (enforced by the parent) or the CPU limit was hit.
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

    Attributes:
        timeout_s: wall-clock limit of the program and its tests, measured by the parent from
            the moment the in-sandbox driver reports ready.
        cpu_s: RLIMIT_CPU per process; ``None`` means ``timeout_s + 1``.
        memory_bytes: memory cgroup limit of the whole run (when cgroups are writable).
        address_space_bytes: RLIMIT_AS per process (kept loose: it breaks threads), ``None``
            for none.
        max_processes: pids cgroup limit (RLIMIT_NPROC in the fallback tier, which root ignores).
        max_open_files: RLIMIT_NOFILE.
        max_file_bytes: RLIMIT_FSIZE (largest file the program may write).
        max_output_bytes: cap on captured stdout + stderr; exceeding it kills the run
            (``output_limit``).
        tmpfs_bytes: size of the tmpfs work dir and ``/tmp`` (bwrap tier).
        startup_timeout_s: how long the sandbox may take to start before ``sandbox_error``.
    """

    timeout_s: float = 5.0
    cpu_s: float | None = None
    memory_bytes: int = 512 << 20
    address_space_bytes: int | None = 4 << 30
    max_processes: int = 64
    max_open_files: int = 256
    max_file_bytes: int = 16 << 20
    max_output_bytes: int = 1 << 20
    tmpfs_bytes: int = 64 << 20
    startup_timeout_s: float = 20.0


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
        setup_code: trusted code run in the program's namespace after the program.
        probes: expressions evaluated in the program's namespace after it ran; their values
            come back encoded with :mod:`rlvr.sandbox.codec` and are compared by the caller.
            Expected values never enter the sandbox.
        checks: tests that run inside the sandbox's supervisor (see :class:`InSandboxCheck`).
        names: identifiers the checks use; the program's definitions of these are made
            reachable from the checks (functions by remote call, stdlib modules by import,
            plain values by copy).
        env: extra environment variables for the program (the environment is otherwise empty).
        limits: resource limits.
    """

    program: str
    entry_point: str | None = None
    setup_code: str = ""
    probes: tuple[str, ...] = ()
    checks: tuple[InSandboxCheck, ...] = ()
    names: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)


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
        wall_s: seconds from spawn to the end of cleanup.
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
            "probes": [
                {"ok": p.ok, "value": repr(p.value), "error": p.error} for p in self.probes
            ],
            "checks": [{"ok": c.ok, "error": c.error} for c in self.checks],
            "output": self.output,
            "detail": self.detail,
            "exit_code": self.exit_code,
            "leftover_killed": self.leftover_killed,
        }

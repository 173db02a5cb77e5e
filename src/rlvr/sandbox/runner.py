"""Launch one sandboxed run, supervise it from the parent, clean up, and classify the outcome.

The parent (this process) owns every limit that matters for liveness: the CPU-time budget, the
wall-clock backstop, the output cap and the final kill. It never executes anything the program
produced; it only reads capped bytes and parses the supervisor's one JSON record (which must
carry this run's nonce).

Time limits (see :class:`~rlvr.sandbox.types.SandboxLimits`): the run's clock starts when the
driver reports ready, which is also when the job is handed over. From then on the parent polls
the run's CPU time (:class:`~rlvr.sandbox.cputime.CpuMeter`, summed over every process and
thread of the run) and kills the run once it exceeds the budget; a run that finishes over the
budget between two polls is a timeout too, so the verdict depends on the CPU time used, not on
when a poll happened. The wall clock only decides as a loose backstop for programs that use no
CPU (sleep, block), and RLIMIT_CPU is the kernel's hard per-process kill behind both.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from rlvr.sandbox import cgroups, codec, tiers
from rlvr.sandbox.cputime import CpuMeter, process_tree
from rlvr.sandbox.types import (
    CheckOutcome,
    ProbeOutcome,
    SandboxJob,
    SandboxResult,
    SandboxStatus,
    Tier,
)

RESULT_CAP = 64 << 20  # bytes accepted on the supervisor's result channel
_SH_JOIN_CGROUPS = 'for f in "$@"; do case "$f" in --) shift; break;; esac; echo $$ > "$f" || exit 97; shift; done; exec "$@"'  # noqa: E501


def _driver_limits(job: SandboxJob, env: tiers.SandboxEnvironment, tier: Tier) -> dict:
    lim = job.limits
    out = {
        "cpu_s": lim.rlimit_cpu_s(),
        "file_bytes": lim.max_file_bytes,
        "open_files": lim.max_open_files,
        "address_space_bytes": lim.address_space_bytes,
        # Binds only a non-root uid: in the fallback tier (run as nobody), not under bwrap.
        "processes": lim.max_processes if (tier is Tier.rlimit and env.drop_to_nobody) else None,
        # Without bwrap's --die-with-parent, the supervisor must die with this process itself.
        "pdeathsig": tier is Tier.rlimit,
    }
    if not env.cgroups and lim.address_space_bytes is not None:
        # No memory cgroup: RLIMIT_AS is the only memory bound left, so make it the real one.
        out["address_space_bytes"] = min(lim.address_space_bytes, lim.memory_bytes)
    return out


def _command(job, env, tier, workdir) -> tuple[list[str], dict, str | None]:
    limits_arg = json.dumps(_driver_limits(job, env, tier), separators=(",", ":"))
    if tier is Tier.bwrap:
        argv = tiers.bwrap_base_args(env, job.limits.tmpfs_bytes)
        for k, v in job.env.items():
            argv += ["--setenv", str(k), str(v)]
        argv += [env.python, "-I", "-S", "/sandbox/driver.py", limits_arg]
        return argv, {}, None
    argv = []
    if env.drop_to_nobody:
        argv = ["setpriv", f"--reuid={tiers.NOBODY}", f"--regid={tiers.NOBODY}", "--clear-groups"]
    argv += [env.python, "-I", "-S", os.path.join(env.stage_dir, "driver.py"), limits_arg]
    penv = {"PATH": "/usr/bin:/bin", "HOME": workdir, "LANG": "C.UTF-8", "TMPDIR": workdir}
    penv.update({str(k): str(v) for k, v in job.env.items()})
    return argv, penv, workdir


def _job_payload(job: SandboxJob, nonce: str) -> bytes:
    return json.dumps(
        {
            "nonce": nonce,
            "program": job.program,
            "setup": job.setup_code,
            "probes": list(job.probes),
            "names": list(job.names),
            "entry_point": job.entry_point,
            "checks": [{"src": c.source, "kind": c.kind} for c in job.checks],
        }
    ).encode()


class _Run:
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


def _parse_result_lines(run: _Run, nonce: str) -> None:
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
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("nonce") == nonce:
                run.record = rec


def _supervise(
    proc: subprocess.Popen,
    job: SandboxJob,
    payload: bytes,
    nonce: str,
    spawned_at: float,
    meter: CpuMeter,
) -> _Run:
    lim = job.limits
    budget, wall_limit = lim.timeout_s, lim.wall_limit_s()
    # The run's CPU time grows by at most this many CPU seconds per wall second; the sandbox
    # may use any core of the machine, not only those of our own affinity mask.
    cores = os.cpu_count() or 1
    run = _Run()
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
                try:
                    chunk = os.read(key.fileobj.fileno(), 1 << 16)
                except BlockingIOError:
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
                    try:
                        chunk = os.read(key.fileobj.fileno(), 1 << 16)
                    except BlockingIOError:
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 :][:1] != b"Z"
    except (OSError, ValueError):
        return False


def _kill_tree(proc: subprocess.Popen, cg: cgroups.RunCgroup | None) -> int:
    """SIGKILL the run's process group and every process in its cgroups (or, without cgroups,
    its process tree); reap the launcher. Returns once they are gone (bounded wait)."""
    # Without cgroups the tree is the only complete list: a daemon that left the process
    # group is still in it (re-parented to the supervisor or the pid namespace's init).
    tree = process_tree(proc.pid) if cg is None else set()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    killed = 0
    if cg is not None:
        killed = len(cg.pids())
        cg.remove()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a launcher stuck in the kernel
        proc.kill()
        proc.wait()
    # SIGKILLed processes take a moment to exit (a pid namespace is torn down after its
    # init); cg.remove() above waits for that, so wait here too rather than return early.
    deadline = time.monotonic() + 5.0
    while tree and time.monotonic() < deadline:
        tree = {pid for pid in tree if _alive(pid)}
        if tree:
            time.sleep(0.005)
    for f in (proc.stdin, proc.stdout, proc.stderr):
        try:
            f.close()
        except OSError:
            pass
    return killed


def _probe_outcomes(raw) -> tuple[ProbeOutcome, ...]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and "v" in item:
            try:
                out.append(ProbeOutcome(True, codec.decode(json.dumps(item["v"]))))
            except ValueError as e:
                out.append(ProbeOutcome(False, error=f"undecodable: {e}"[:200]))
        elif isinstance(item, dict):
            out.append(ProbeOutcome(False, error=str(item.get("e", "error"))[:100]))
        else:
            out.append(ProbeOutcome(False, error="malformed"))
    return tuple(out)


def _classify(
    run: _Run, oom: bool, job: SandboxJob, meter: CpuMeter
) -> tuple[SandboxStatus, str, dict]:
    """Map what happened to a status and a short detail. Returns (status, detail, fields)."""
    S = SandboxStatus
    rec = run.record
    lim = job.limits
    if run.output_over:
        return S.output_limit, "output cap exceeded", {}
    if run.cpu_used > lim.timeout_s:
        # Killed by the parent, or ended (finished, crashed, hit RLIMIT_CPU) after spending more
        # than the budget: either way the CPU time decides, not when the last poll happened.
        how = "killed" if run.timed_out == "cpu" else "ended"
        return S.timeout, (
            f"CPU budget exceeded: {run.cpu_used:.2f} s CPU > {lim.timeout_s:g} s budget "
            f"({how} after {run.program_wall_s:.2f} s wall; {meter.source} accounting)"
        ), {}
    if rec is not None:
        phase = rec.get("phase")
        exit_info = rec.get("exit") or {}
        code = exit_info.get("code", -(exit_info.get("signal") or 0)) if exit_info else None
        fields = {"exit_code": code}
        if phase == "done":
            checks = tuple(
                CheckOutcome(bool(c.get("ok")), str(c.get("error", c.get("err", "")))[:300])
                for c in rec.get("checks", [])
                if isinstance(c, dict)
            )
            fields.update(probes=_probe_outcomes(rec.get("probes")), checks=checks)
            if oom and any(c.error == "CandidateGone" for c in checks):
                return S.memory, "memory limit (OOM kill during tests)", fields
            if not rec.get("fds_ok", True):
                return S.runtime_error, "open-file limit exhausted", fields
            if not all(c.ok for c in checks):
                return S.wrong_answer, "in-sandbox check failed", fields
            return S.ok, "ran to completion", fields
        if phase in ("program_error", "setup_error"):
            err = rec.get("error") or {}
            etype = str(err.get("type", "?"))[:60]
            if etype == "MemoryError":
                return S.memory, f"{phase}: MemoryError", fields
            return S.runtime_error, f"{phase}: {etype}", fields
        if phase == "program_exit":
            sig = exit_info.get("signal")
            if oom:
                return S.memory, "memory limit (OOM kill)", fields
            cpu = exit_info.get("cpu") or 0.0
            rlimit = lim.rlimit_cpu_s()
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= rlimit - 0.05):
                why = f"CPU time limit: the program process reached RLIMIT_CPU ({rlimit} s)"
                return S.timeout, why, fields
            return S.runtime_error, f"program exited before the tests ({exit_info or rec.get('why')})", fields
        err = rec.get("error") or {}
        return S.sandbox_error, f"driver error: {err.get('type')}: {err.get('msg')}", fields
    if run.timed_out == "startup":
        return S.sandbox_error, "sandbox did not start in time", {}
    if run.timed_out == "wall":
        return S.timeout, (
            f"wall backstop: {run.program_wall_s:.2f} s wall >= {lim.wall_limit_s():g} s backstop; "
            f"{run.cpu_used:.2f} s of the {lim.timeout_s:g} s CPU budget used"
        ), {}
    if oom:
        return S.memory, "memory limit (OOM kill)", {}
    if run.ready_at is not None:
        return S.runtime_error, "sandbox supervisor killed by the program", {}
    return S.sandbox_error, "sandbox failed to start", {}


class Launched:
    """A started sandbox waiting for its one job (see :func:`launch` / :func:`execute`).

    Attributes:
        key: the launch parameters it was started with; a job may only run in a sandbox
            whose key equals :func:`launch_key` of that job.
        spawned_at: ``time.monotonic()`` at spawn.
    """

    def __init__(self, key, tier, proc, cg, workdir, spawned_at):
        self.key, self.tier, self.proc, self.cg = key, tier, proc, cg
        self.workdir, self.spawned_at = workdir, spawned_at

    def alive(self) -> bool:
        """True while the sandbox process has not exited."""
        return self.proc.poll() is None

    def discard(self) -> None:
        """Kill the sandbox and release everything it holds (idempotent)."""
        if self.proc is not None:
            _kill_tree(self.proc, self.cg)
            self.proc = None
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def launch_key(job: SandboxJob, tier: Tier | None = None) -> tuple:
    """What a pre-started sandbox must match to take ``job`` (tier, limits, environment)."""
    return (tier or tiers.environment().tier, job.limits, tuple(sorted(job.env.items())))


def launch(job: SandboxJob, *, tier: Tier | None = None) -> Launched:
    """Start a sandbox for jobs like ``job`` (only its limits, env and tier matter).

    The sandbox starts its interpreter and then waits for a job on stdin, so it can be started
    ahead of time; it runs exactly one job, never more.

    Raises:
        OSError: the cgroups, work dir or process could not be created.
    """
    env = tiers.environment()
    tier = tier or env.tier
    cg = workdir = None
    try:
        if env.cgroups:
            cg = cgroups.RunCgroup(job.limits.max_processes, job.limits.memory_bytes)
        if tier is Tier.rlimit:
            workdir = tempfile.mkdtemp(prefix="rlvr-sandbox-run-")
            if env.drop_to_nobody:
                os.chown(workdir, tiers.NOBODY, tiers.NOBODY)
        argv, penv, cwd = _command(job, env, tier, workdir)
        if cg is not None:
            # The shell joins the cgroups itself before exec, so no process of the run ever
            # exists outside them (no preexec_fn: unsafe in threaded callers).
            argv = ["/bin/sh", "-c", _SH_JOIN_CGROUPS, "sh", *cg.procs_files, "--", *argv]
        spawned_at = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=penv,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        if cg is not None:
            cg.remove()
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Launched(launch_key(job, tier), tier, proc, cg, workdir, spawned_at)


def execute(sandbox: Launched, job: SandboxJob) -> SandboxResult:
    """Run ``job`` in the started ``sandbox``, then destroy the sandbox. Blocks; thread-safe.

    Never raises for anything the program does; infrastructure failures come back as
    ``sandbox_error`` results with the reason in ``detail``.

    Raises:
        ValueError: the sandbox was started for different limits / env / tier.
    """
    if sandbox.key != launch_key(job, sandbox.tier):
        raise ValueError("sandbox was launched with different limits, env or tier")
    nonce = secrets.token_hex(16)
    t0 = sandbox.spawned_at
    meter = CpuMeter(sandbox.proc.pid, sandbox.cg)
    try:
        payload = _job_payload(job, nonce)
        run = _supervise(sandbox.proc, job, payload, nonce, sandbox.spawned_at, meter)
    except OSError as e:
        sandbox.discard()
        return SandboxResult(
            SandboxStatus.sandbox_error, sandbox.tier, time.monotonic() - t0, detail=f"supervise failed: {e}"
        )
    oom = sandbox.cg.oom_killed() if sandbox.cg is not None else False
    killed = len(sandbox.cg.pids()) if sandbox.cg is not None else 0
    sandbox.discard()
    status, detail, fields = _classify(run, oom, job, meter)
    if status is SandboxStatus.sandbox_error and run.record is None and run.output:
        detail += ": " + bytes(run.output[:300]).decode("utf-8", "replace").strip()
    return SandboxResult(
        status=status,
        tier=sandbox.tier,
        wall_s=time.monotonic() - max(t0, run.started_at),
        cpu_s=run.cpu_used,
        output=bytes(run.output).decode("utf-8", "replace"),
        detail=detail,
        leftover_killed=killed,
        **fields,
    )


def run_job(job: SandboxJob, *, tier: Tier | None = None) -> SandboxResult:
    """Run ``job`` in a fresh sandbox and return what happened. Blocks; thread-safe.

    Args:
        job: the program, probes and checks to run, and the limits.
        tier: force a tier (default: the probed best). Forcing ``bwrap`` where it does not
            work yields ``sandbox_error`` results.

    Never raises for anything the program does; infrastructure failures come back as
    ``sandbox_error`` results with the reason in ``detail``.
    """
    try:
        sandbox = launch(job, tier=tier)
    except OSError as e:
        return SandboxResult(
            SandboxStatus.sandbox_error, tier or tiers.environment().tier, detail=f"launch failed: {e}"
        )
    return execute(sandbox, job)

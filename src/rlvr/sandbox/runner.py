"""Launch one sandboxed run, supervise it from the parent, clean up, and classify the outcome.

The parent (this process) owns every limit that matters for liveness: the CPU-time budget, the
wall-clock backstop, the output cap and the final kill. This module starts the sandbox
(:func:`launch`, which may run ahead of the job) and tears it down; :mod:`.supervise` watches the
run (the time limits are described there) and :mod:`.classify` maps what happened to a status.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

from rlvr.sandbox import cgroups, tiers
from rlvr.sandbox.classify import classify
from rlvr.sandbox.cputime import CpuMeter, process_tree
from rlvr.sandbox.supervise import supervise
from rlvr.sandbox.types import SandboxJob, SandboxResult, SandboxStatus, Tier

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
        # Own pid namespace: the supervisor may kill(-1) everything of the run (never in the
        # fallback tier, where -1 would reach every process of uid 65534 on the host).
        "pidns": tier is Tier.bwrap,
    }
    if not env.cgroups and lim.address_space_bytes is not None:
        # No memory cgroup: RLIMIT_AS is the only memory bound left, so make it the real one.
        out["address_space_bytes"] = min(lim.address_space_bytes, lim.memory_bytes)
    return out


def _command(job, env, tier, workdir) -> tuple[list[str], dict, str | None]:
    limits_arg = json.dumps(_driver_limits(job, env, tier), separators=(",", ":"))
    python = job.python or env.python
    if tier is Tier.bwrap:
        binds = list(job.read_only_paths)
        if job.python and not os.path.realpath(python).startswith("/usr/"):
            binds.append(os.path.dirname(os.path.dirname(os.path.realpath(python))))
        argv = tiers.bwrap_base_args(env, job.limits.tmpfs_bytes, binds)
        for k, v in job.env.items():
            argv += ["--setenv", str(k), str(v)]
        argv += [python, "-I", "-S", "/sandbox/driver.py", limits_arg]
        return argv, {}, None
    argv = []
    if env.drop_to_nobody:
        argv = ["setpriv", f"--reuid={tiers.NOBODY}", f"--regid={tiers.NOBODY}", "--clear-groups"]
    argv += [python, "-I", "-S", os.path.join(env.stage_dir, "driver.py"), limits_arg]
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
            "check_prelude": job.check_prelude,
        }
    ).encode()


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
    """What a pre-started sandbox must match to take ``job`` (tier, limits, environment,
    interpreter and read-only paths)."""
    return (tier or tiers.environment().tier, job.limits, tuple(sorted(job.env.items())),
            job.python, job.read_only_paths)


def launch(job: SandboxJob, *, tier: Tier | None = None) -> Launched:
    """Start a sandbox for jobs like ``job`` (only its limits, env, interpreter, read-only
    paths and tier matter).

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
    # The sandbox is torn down whatever happens here (try/finally): its processes must never
    # outlive the call, even if supervising raises something unforeseen.
    try:
        meter = CpuMeter(sandbox.proc.pid, sandbox.cg)
        payload = _job_payload(job, nonce)
        run = supervise(sandbox.proc, job, payload, nonce, sandbox.spawned_at, meter)
        oom = sandbox.cg.oom_killed() if sandbox.cg is not None else False
        killed = len(sandbox.cg.pids()) if sandbox.cg is not None else 0
    except Exception as e:  # OSError: broken pipes or cgroups; anything else: a bug of ours
        return SandboxResult(
            SandboxStatus.sandbox_error, sandbox.tier, time.monotonic() - t0,
            detail=f"supervise failed: {type(e).__name__}: {e}"[:300],
        )
    finally:
        sandbox.discard()
    status, detail, fields = classify(run, oom, job, meter)
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
            SandboxStatus.sandbox_error, tier or tiers.environment().tier,
            detail=f"launch failed: {e}",
        )
    return execute(sandbox, job)

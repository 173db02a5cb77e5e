"""Probing what isolation this machine offers, once per process, and saying so loudly.

The chosen :class:`~rlvr.sandbox.types.Tier` is logged once at WARNING level when it is the
weaker ``rlimit`` tier (and at INFO otherwise) and recorded in every result.

Environment overrides (for tests and odd machines):

- ``RLVR_SANDBOX_TIER=rlimit`` forces the fallback tier even when bubblewrap works.
- ``RLVR_SANDBOX_PYTHON=/path/to/python3`` picks the interpreter that runs inside the sandbox
  (default ``/usr/bin/python3`` when present, else this process's base interpreter).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, replace

from rlvr.sandbox import cgroups
from rlvr.sandbox.types import Tier

log = logging.getLogger("rlvr.sandbox")

NOBODY = 65534
# The in-sandbox driver: the script and the modules it imports from its own directory.
_DRIVER_FILES = (
    "driver.py", "procs.py", "codec.py", "candidate.py", "checks.py", "remote.py",
    "remote_client.py",
)


@dataclass(frozen=True)
class SandboxEnvironment:
    """What the probe found.

    Attributes:
        tier: the best working tier.
        python: absolute path of the interpreter run inside the sandbox.
        python_prefix: directory to bind read-only in the bwrap tier (``None`` if under /usr).
        bwrap: path of the ``bwrap`` binary, or ``None``.
        cgroups: per-run cgroups (pids + memory) are usable.
        drop_to_nobody: the fallback tier runs the program as uid/gid 65534 (we are root and
            ``setpriv`` exists).
        stage_dir: read-only directory holding the driver files (``driver.py`` and the modules
            it imports, ``_DRIVER_FILES``).
        reason: why the tier was chosen, for the log and for test skip messages.
        cpu_accounting: how a run's CPU time (its budget) is measured: ``"cgroup"`` (a
            cpuacct group per run: exact) or ``"proc"`` (sums over ``/proc``; see
            :mod:`rlvr.sandbox.cputime`).
    """

    tier: Tier
    python: str
    python_prefix: str | None
    bwrap: str | None
    cgroups: bool
    drop_to_nobody: bool
    stage_dir: str
    reason: str
    cpu_accounting: str = "proc"


_env: SandboxEnvironment | None = None
_env_lock = threading.Lock()


def _pick_python() -> tuple[str, str | None]:
    forced = os.environ.get("RLVR_SANDBOX_PYTHON")
    if forced:
        py = forced
    elif os.path.exists("/usr/bin/python3"):
        py = "/usr/bin/python3"
    else:
        py = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    real = os.path.realpath(py)
    if real.startswith("/usr/"):
        return py, None
    # e.g. a pyenv build: its prefix (two levels above bin/python) must be visible read-only.
    return real, os.path.dirname(os.path.dirname(real))


def _stage_driver() -> str:
    """Copy the driver files into a root-owned, world-readable dir (content-addressed).

    Staging (rather than binding the package dir) keeps the files readable by uid 65534 in the
    fallback tier, whatever the permissions of the checkout.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    blobs = {}
    h = hashlib.sha256(b"precompiled\0")  # a stage made before precompiling has no cache
    for name in _DRIVER_FILES:
        with open(os.path.join(here, name), "rb") as f:
            blobs[name] = f.read()
        h.update(name.encode() + b"\0" + blobs[name])
    stage = os.path.join(tempfile.gettempdir(), f"rlvr-sandbox-driver-{h.hexdigest()[:16]}")
    if os.path.isdir(stage):
        return stage
    tmp = tempfile.mkdtemp(prefix="rlvr-sandbox-stage-")
    for name, blob in blobs.items():
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(blob)
        os.chmod(os.path.join(tmp, name), 0o644)
    _precompile(tmp)
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, stage)
    except OSError:  # another process staged it first
        shutil.rmtree(tmp, ignore_errors=True)
    return stage


def _precompile(stage: str) -> None:
    """Byte-compile the modules the driver imports (every driver file but ``driver.py``) into
    the stage.

    The stage is read-only to the sandbox, so without this every run's fresh interpreter
    compiles them again (about 4 ms each, per process). The cache is tagged with this
    interpreter's version: a sandbox interpreter of another version ignores it and compiles as
    before. A failure here only costs that time.
    """
    import importlib.util
    import py_compile

    for name in _DRIVER_FILES:
        if name == "driver.py":  # run as a script: never read from a cache
            continue
        src = os.path.join(stage, name)
        try:
            cfile = importlib.util.cache_from_source(src)
            py_compile.compile(src, cfile=cfile, doraise=True)
            os.chmod(os.path.dirname(cfile), 0o755)
            os.chmod(cfile, 0o644)
        except (OSError, py_compile.PyCompileError, NotImplementedError) as e:
            log.debug("not precompiling %s: %s", name, e)


def bwrap_base_args(env: SandboxEnvironment, tmpfs_bytes: int,
                    read_only: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The bubblewrap arguments shared by every run (namespaces, mounts, identity), plus a
    read-only bind of each host directory in ``read_only`` at the same path (its copy of
    the program then lives in the tmpfs ``/work``, never in the bound directory)."""
    args = [
        env.bwrap or "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        # The driver's supervisor is pid 1 itself, no bwrap reaper above it: a reaper would be
        # dumpable, so the program could open the result channel it holds (/proc/1/fd/1) for
        # reading and writing, and ptrace it; the non-dumpable supervisor as pid 1 hides its
        # fds and, as init, ignores SIGKILL / SIGSTOP sent from inside the sandbox.
        "--as-pid-1",
        "--new-session",
        "--cap-drop", "ALL",
        "--uid", str(NOBODY),
        "--gid", str(NOBODY),
        "--hostname", "sandbox",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for name in ("bin", "lib", "lib32", "lib64", "sbin"):
        if os.path.islink(f"/{name}") or os.path.isdir(f"/usr/{name}"):
            if os.path.isdir(f"/usr/{name}"):
                args += ["--symlink", f"usr/{name}", f"/{name}"]
    if env.python_prefix:
        args += ["--ro-bind", env.python_prefix, env.python_prefix]
    args += [
        "--proc", "/proc",
        # bwrap covers these read-only itself only where it sees them writable; started as
        # host root, its user namespace maps the sandbox's uid to host uid 0, so the root-owned
        # 0644 sysctl files (kernel.core_pattern: a '|cmd' there runs as host root) would be
        # writable although the directory is not. Cover them always.
        "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
        "--ro-bind-try", "/proc/irq", "/proc/irq",
        "--ro-bind-try", "/proc/bus", "/proc/bus",
        "--dev", "/dev",
        "--size", str(int(tmpfs_bytes)), "--tmpfs", "/tmp",
        "--size", str(int(tmpfs_bytes)), "--tmpfs", "/work",
        "--ro-bind", env.stage_dir, "/sandbox",
        "--chdir", "/work",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/work",
    ]  # fmt: skip
    for path in read_only:  # after the tmpfs mounts, which would hide a bind under /work
        args += ["--ro-bind", path, path]
    return args


def _probe_bwrap(env: SandboxEnvironment) -> str | None:
    """Run the real bwrap command line once; returns an error text or None if it works."""
    cmd = bwrap_base_args(env, 1 << 20) + [
        env.python, "-I", "-S", "-c",
        "import os, sys; assert sys.version_info >= (3, 10); "
        "assert os.getuid() == 65534; print('ok')",
    ]  # fmt: skip
    try:
        r = subprocess.run(cmd, capture_output=True, env={}, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode != 0 or r.stdout.strip() != b"ok":
        return (r.stderr.decode(errors="replace").strip() or f"rc={r.returncode}")[:300]
    return None


def environment(refresh: bool = False) -> SandboxEnvironment:
    """Probe (once per process) and return the sandbox environment.

    Raises:
        RuntimeError: no usable interpreter for the sandbox.
    """
    global _env
    with _env_lock:
        if _env is not None and not refresh:
            return _env
        python, prefix = _pick_python()
        if not os.path.exists(python):
            raise RuntimeError(f"sandbox interpreter {python} does not exist")
        is_root = os.geteuid() == 0
        env = SandboxEnvironment(
            tier=Tier.rlimit,
            python=python,
            python_prefix=prefix,
            bwrap=shutil.which("bwrap"),
            cgroups=is_root and cgroups.available(),
            drop_to_nobody=is_root and shutil.which("setpriv") is not None,
            stage_dir=_stage_driver(),
            reason="",
        )
        if env.cgroups and cgroups.cpu_accounting_available():
            env = replace(env, cpu_accounting="cgroup")
        forced = os.environ.get("RLVR_SANDBOX_TIER", "").strip().lower()
        if forced == "rlimit":
            reason = "RLVR_SANDBOX_TIER=rlimit forces the fallback tier"
        elif env.bwrap is None:
            reason = "bwrap not found (install the Debian package 'bubblewrap')"
        else:
            err = _probe_bwrap(env)
            reason = f"bwrap does not work here: {err}" if err else "bwrap works"
            if err is None:
                env = replace(env, tier=Tier.bwrap)
        env = replace(env, reason=reason)
        extras = (
            f"cgroups={'yes' if env.cgroups else 'NO'} cpu_accounting={env.cpu_accounting} "
            f"python={env.python}"
        )
        if env.tier is Tier.bwrap:
            log.info("rlvr sandbox: tier=bwrap (%s)", extras)
        else:
            log.warning(
                "rlvr sandbox: WEAK ISOLATION, tier=rlimit (%s; %s). Programs share the host's "
                "network and file system view; do not run untrusted code like this.",
                reason,
                extras,
            )
            if not env.cgroups:
                log.warning("rlvr sandbox: no writable cgroups: memory and process limits weaker")
        _env = env
        return env


def bwrap_available() -> tuple[bool, str]:
    """(True, reason) if the bwrap tier is in use, else (False, why not): for test skips."""
    env = environment()
    return env.tier is Tier.bwrap, env.reason

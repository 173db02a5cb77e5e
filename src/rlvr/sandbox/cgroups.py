"""Per-run cgroup v1 groups (``pids``, ``memory``, optionally ``cpuacct``): limits, OOM
detection, CPU accounting, tree kill.

RLIMIT_NPROC does not bind root, so the process count is capped by a pids cgroup; memory is
capped for the whole run (all its processes together) by a memory cgroup. Both also give a
complete list of the run's processes, which is how cleanup finds daemons that left the process
group. A ``cpuacct`` group, where that controller is mounted and writable, gives the run's exact
CPU time summed over all its processes and threads (``cpuacct.usage``), including processes that
were reaped automatically (``SIGCHLD`` ignored), which ``/proc`` sums miss; without it the CPU
budget falls back to ``/proc`` accounting (:mod:`rlvr.sandbox.cputime`). Only cgroup v1
hierarchies mounted at ``/sys/fs/cgroup/<controller>`` are used; on other layouts
:func:`available` is False and the sandbox runs without cgroups (and says so).
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time

ROOT = "/sys/fs/cgroup"
BASE = "rlvr-sandbox"
CONTROLLERS = ("pids", "memory")
# Used when present (``cpuacct`` may be co-mounted as ``cpu,cpuacct``, reached through the
# ``cpuacct`` symlink); the limits do not depend on it, only the precision of CPU accounting.
OPTIONAL_CONTROLLERS = ("cpuacct",)

_counter = itertools.count()
_lock = threading.Lock()


def _base(controller: str) -> str:
    return os.path.join(ROOT, controller, BASE)


def _optional_present() -> tuple[str, ...]:
    return tuple(
        c for c in OPTIONAL_CONTROLLERS if os.path.isfile(os.path.join(ROOT, c, "cgroup.procs"))
    )


def available() -> bool:
    """True if per-run pids and memory groups can be created here (root, cgroup v1).

    The optional ``cpuacct`` group is not required (see :attr:`RunCgroup.has_cpu_accounting`).
    """
    try:
        for c in CONTROLLERS:
            if not os.path.isfile(os.path.join(ROOT, c, "cgroup.procs")):
                return False
            os.makedirs(_base(c), exist_ok=True)
        probe = RunCgroup(max_processes=8, memory_bytes=64 << 20)
        probe.remove()
        reap_stale()
        return True
    except OSError:
        return False


def cpu_accounting_available() -> bool:
    """True if runs get a ``cpuacct`` group here (exact CPU accounting; see the module doc).

    Only meaningful when :func:`available` is True (the groups are created together)."""
    return "cpuacct" in _optional_present()


def reap_stale(timeout_s: float = 1.0) -> int:
    """Kill and remove run groups left by dead processes (e.g. a verifier worker killed
    mid-run, or one that exited without closing its sandbox pool). Groups are named
    ``<owner pid>-...``. A group whose processes are still exiting is retried for up to
    ``timeout_s`` seconds, then left for the next call. Returns how many groups were removed
    (0 where the controllers are not mounted)."""
    removed = 0
    for c in CONTROLLERS + _optional_present():
        try:
            names = os.listdir(_base(c))
        except OSError:
            continue
        for name in names:
            owner = name.split("-", 1)[0]
            if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            if _kill_and_remove(os.path.join(_base(c), name), timeout_s):
                removed += 1
    return removed


def _kill_and_remove(path: str, timeout_s: float) -> bool:
    """SIGKILL the processes of the group at ``path`` and remove it, retrying while the
    kernel still counts exiting processes (EBUSY) for up to ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = f.read().split()
        except OSError:
            return False  # gone already (another process reaped it), or not a group
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return False
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class RunCgroup:
    """The pids + memory (+ cpuacct, when available) cgroups of one run.

    Args:
        max_processes: ``pids.max`` (threads count too).
        memory_bytes: ``memory.limit_in_bytes`` (and the memory+swap limit when present, so the
            run cannot swap instead of failing).

    Raises:
        OSError: the groups could not be created or configured (the caller reports a
            ``sandbox_error``; a half-made group is removed first).
    """

    def __init__(self, max_processes: int, memory_bytes: int):
        with _lock:
            n = next(_counter)
        self.name = f"{os.getpid()}-{n}-{os.urandom(3).hex()}"
        self.paths = {c: os.path.join(_base(c), self.name) for c in CONTROLLERS}
        made = []
        try:
            for p in self.paths.values():
                os.mkdir(p, 0o700)
                made.append(p)
            _write(os.path.join(self.paths["pids"], "pids.max"), str(int(max_processes)))
            mem = self.paths["memory"]
            _write(os.path.join(mem, "memory.limit_in_bytes"), str(int(memory_bytes)))
            memsw = os.path.join(mem, "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _write(memsw, str(int(memory_bytes)))
        except OSError:
            for p in made:
                try:
                    os.rmdir(p)
                except OSError:
                    pass
            raise
        # Optional: a run without a cpuacct group is measured through /proc instead.
        for c in _optional_present():
            p = os.path.join(_base(c), self.name)
            try:
                os.makedirs(_base(c), exist_ok=True)
                os.mkdir(p, 0o700)
            except OSError:
                continue
            self.paths[c] = p

    @property
    def has_cpu_accounting(self) -> bool:
        """True if the run has a cpuacct group (:meth:`cpu_seconds` can answer)."""
        return "cpuacct" in self.paths

    def cpu_seconds(self) -> float | None:
        """CPU seconds (user + system) used so far by every process and thread that ever ran in
        the run's group, or ``None`` without a cpuacct group (or if it cannot be read)."""
        p = self.paths.get("cpuacct")
        if p is None:
            return None
        try:
            with open(os.path.join(p, "cpuacct.usage")) as f:
                return int(f.read().strip()) / 1e9  # nanoseconds
        except (OSError, ValueError):
            return None

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a launcher writes its own pid into before exec."""
        return [os.path.join(p, "cgroup.procs") for p in self.paths.values()]

    def pids(self) -> set[int]:
        """Pids of all processes currently in the run's groups."""
        out: set[int] = set()
        for p in self.paths.values():
            try:
                with open(os.path.join(p, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
            except (OSError, ValueError):
                pass
        return out

    def oom_killed(self) -> bool:
        """True if the kernel OOM-killed a process of this run (memory limit reached)."""
        mem = self.paths["memory"]
        try:
            with open(os.path.join(mem, "memory.oom_control")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value) > 0
            # Older kernels have no oom_kill counter: having hit the limit is the best signal.
            with open(os.path.join(mem, "memory.failcnt")) as f:
                return int(f.read().strip() or 0) > 0
        except (OSError, ValueError):
            return False

    def kill_all(self, timeout_s: float = 5.0) -> int:
        """SIGKILL every process in the groups until they are empty.

        Returns the number of distinct processes killed. Loops because a process may fork
        while it is being killed (the pids limit bounds how long that can go on).
        """
        killed: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)
        return len(killed)

    def remove(self, timeout_s: float = 5.0) -> bool:
        """Remove the groups (killing what is left). Returns False if one could not be removed."""
        self.kill_all(timeout_s)
        ok = True
        for p in self.paths.values():
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    os.rmdir(p)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    # EBUSY for a moment while killed processes finish exiting.
                    if time.monotonic() > deadline:
                        ok = False
                        break
                    self.kill_all(0.05)
                    time.sleep(0.002)
        return ok

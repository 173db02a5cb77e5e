"""Shared helpers of the sandbox tests (not a conftest: plain functions, imported explicitly)."""

from __future__ import annotations

import os
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def shared_path(*parts: str) -> Path:
    """Path under the shared data dir (``../shared`` next to the repo)."""
    return SHARED.joinpath(*parts)


def _is_sandbox(cmd: bytes) -> bool:
    return b"rlvr-sandbox" in cmd or b"/sandbox/driver.py" in cmd


def _ours_or_orphaned(pid: int, me: int) -> bool:
    """Whether the sandbox process ``pid`` belongs to this process or to nobody: above its
    chain of sandbox processes (driver, bwrap, the program's children) sits this process, or
    init (it escaped and was orphaned). A live sandbox of another process (another
    pytest-xdist worker) is not this test's leftover."""
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{parent}/cmdline", "rb") as f:
                parent_cmd = f.read()
        except (OSError, ValueError, IndexError):
            return True  # the parent just exited: count it (the check is then retried)
        if parent in (me, 1) or parent == 0:
            return True
        if not _is_sandbox(parent_cmd):
            return False
        pid = parent
    return True


def leftover_processes(cgroup_prefix: str) -> list[int]:
    """Pids of live processes that belong to this test process's sandbox runs.

    A run's processes are found through their cgroup path (``rlvr-sandbox/<our pid>-...``), or
    (without cgroups) through the driver's command line, if they descend from this process or
    were orphaned.
    """
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                cg = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if f"/rlvr-sandbox/{cgroup_prefix}" in cg:
            found.append(int(entry))
        elif b"driver.py" in cmd and _is_sandbox(cmd) and _ours_or_orphaned(int(entry), me):
            found.append(int(entry))
    return found


def assert_no_leftovers() -> None:
    """No process of this test process's runs is alive.

    The process-wide default pool keeps pre-started (idle, job-less) sandboxes on purpose;
    it is closed first so that only real leftovers would remain.
    """
    from rlvr.sandbox import default_pool

    default_pool().close()
    # A SIGKILLed process can take a moment to be reaped on a loaded machine; a real leftover
    # (a daemon that escaped the kill) is still there seconds later.
    deadline = time.monotonic() + 3.0
    while (left := leftover_processes(f"{os.getpid()}-")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []

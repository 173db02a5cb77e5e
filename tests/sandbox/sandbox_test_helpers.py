"""Shared helpers of the sandbox tests (not a conftest: plain functions, imported explicitly)."""

from __future__ import annotations

import os
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def shared_path(*parts: str) -> Path:
    """Path under the shared data dir (``../shared`` next to the repo)."""
    return SHARED.joinpath(*parts)


def leftover_processes(cgroup_prefix: str) -> list[int]:
    """Pids of live processes that belong to this test process's sandbox runs.

    A run's processes are found through their cgroup path (``rlvr-sandbox/<our pid>-...``), or
    (without cgroups) through the driver's command line.
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
        if f"/rlvr-sandbox/{cgroup_prefix}" in cg or b"driver.py" in cmd and b"rlvr-sandbox" in cmd:
            found.append(int(entry))
    return found


def assert_no_leftovers() -> None:
    """No process of this test process's runs is alive.

    The process-wide default pool keeps pre-started (idle, job-less) sandboxes on purpose;
    it is closed first so that only real leftovers would remain.
    """
    from rlvr.sandbox import default_pool

    default_pool().close()
    assert leftover_processes(f"{os.getpid()}-") == []

"""CPU time of a sandboxed run, summed over all its processes and threads (seconds).

The run's time limit is a CPU budget, not a wall-clock one: a loaded machine stretches a
program's wall time but hardly its CPU time, so judging by CPU time keeps a correct program's
verdict independent of the load. The host process (``supervise.py``) polls a :class:`CpuMeter`
while the run goes on and kills the run when the budget is spent. Sources, best first:

- ``cgroup``: the run's ``cpuacct`` group (``cpuacct.usage``): exact, and it includes
  processes that exited and were reaped in any way.
- ``proc`` (no cpuacct group): ``utime + stime + cutime + cstime`` from ``/proc/<pid>/stat``,
  summed over the launcher and all its descendants, plus any process listed in the run's
  pids / memory groups. Every process of a run stays in that tree (orphans are re-parented to
  the driver, a child subreaper, or after it to bwrap's init in the pid namespace); the tree
  is needed even with groups, because a zombie is no longer listed in ``cgroup.procs`` but
  its CPU time is not yet in its parent's ``cutime`` either.

At the end of a run the driver reports its own count (its CPU plus that of every descendant,
all reaped by then; see ``driver.py``) and the host keeps the larger of that and its last
reading: a ``/proc`` scan taken while processes exit and get reaped can miss one.

The ``/proc`` sums count a process that already exited through its parent's ``cutime`` /
``cstime`` once the parent has reaped it, and as a zombie before that. They miss children
reaped automatically (their parent set ``SIGCHLD`` to ``SIG_IGN``): a program could hide CPU
spread over many short-lived processes that way. Each process is still bounded by RLIMIT_CPU
and the whole run by the wall backstop, so that costs at most those bounds; the ``cgroup``
source has no such gap. Resolution is one clock tick (10 ms) for the ``/proc`` sources.
"""

from __future__ import annotations

import os

from rlvr.sandbox.cgroups import RunCgroup

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` from ``state`` on (the command name, which may hold
    spaces and parentheses, is cut off at its last ``)``), or ``None`` if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return None


def process_cpu_seconds(pid: int | str) -> float:
    """CPU seconds of one process (all its threads) plus its reaped descendants; 0.0 if gone.

    ``utime + stime + cutime + cstime`` of ``/proc/<pid>/stat`` (fields 14-17).
    """
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 15:
        return 0.0
    try:
        return sum(int(x) for x in fields[11:15]) * _TICK_S
    except ValueError:
        return 0.0


def process_tree(root: int) -> set[int]:
    """``root`` and every live descendant (by scanning ``/proc`` for parent pids)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(entry)
        if fields is None or len(fields) < 2:
            continue
        try:
            children.setdefault(int(fields[1]), []).append(int(entry))
        except ValueError:
            continue
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in tree:
            continue
        tree.add(pid)
        todo.extend(children.get(pid, ()))
    return tree


class CpuMeter:
    """Reads the CPU seconds used so far by one run.

    Args:
        root_pid: pid of the run's launcher process (the ``Popen`` child), used by the
            ``proc-tree`` source.
        cg: the run's cgroups, or ``None``.

    Attributes:
        source: ``"cgroup"`` or ``"proc"`` (see the module docstring).
        min_interval_s: how often (seconds) reading is cheap enough to repeat: one file for
            ``cgroup``, a scan of ``/proc`` (about 1 ms per 100 processes) for ``proc``.
    """

    def __init__(self, root_pid: int, cg: RunCgroup | None = None):
        self.root_pid, self.cg = root_pid, cg
        self._last = 0.0
        if cg is not None and cg.has_cpu_accounting:
            self.source, self.min_interval_s = "cgroup", 0.01
        else:
            self.source, self.min_interval_s = "proc", 0.05

    def read(self) -> float:
        """CPU seconds (user + system) used by the run's processes so far.

        Never raises: processes that vanish while being read count as 0 (their time is then
        in their parent's ``cutime``, or lost if nobody reaps them, see the module docstring).
        """
        if self.source == "cgroup":
            value = self.cg.cpu_seconds()
            # Unreadable only once the group is being removed: the run is over by then, and
            # mixing in a /proc sum would compare numbers from two different clocks.
            self._last = self._last if value is None else value
            return self._last
        pids = process_tree(self.root_pid)
        if self.cg is not None:
            pids |= self.cg.pids()
        return sum(process_cpu_seconds(pid) for pid in pids)

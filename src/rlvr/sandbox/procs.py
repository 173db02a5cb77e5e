"""Process plumbing of the in-sandbox driver (standalone: standard library only).

Loaded by ``driver.py`` from the sandbox's read-only stage, as ``codec.py`` is: rlimits,
``prctl``, the newline-framed message channel from the candidate process (which notices the
candidate's death), exit statuses, and the final sweep that kills and reaps every process the
run left behind.
"""

import ctypes
import os
import resource
import select
import signal

MAX_MESSAGE = 16 << 20  # bytes accepted from the candidate process in one message
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


class CandidateGone(BaseException):
    """The candidate process died, or broke the protocol; later tests cannot run."""


def safe_str(e):
    """``str(e)`` cut to 300 characters, or "?" when ``str`` itself raises."""
    try:
        return str(e)[:300]
    except BaseException:
        return "?"


def text(x, n):
    """A string field of a candidate message, cut to ``n`` characters (anything else: "?")."""
    return x[:n] if isinstance(x, str) else "?"


def apply_limits(lim):
    """Set soft = hard rlimits on this process (inherited by the candidate).

    ``lim``: the host's limits (``cpu_s``, ``file_bytes``, ``open_files``,
    ``address_space_bytes``, ``processes``; a missing or None entry is left as it is). A value
    above the current hard limit is cut to it.
    """
    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "file_bytes": resource.RLIMIT_FSIZE,
        "open_files": resource.RLIMIT_NOFILE,
        "address_space_bytes": resource.RLIMIT_AS,
        "processes": resource.RLIMIT_NPROC,
    }
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, which in table.items():
        value = lim.get(key)
        if value is None:
            continue
        soft, hard = resource.getrlimit(which)
        value = int(value)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # CPU: SIGXCPU at the soft limit, SIGKILL one second later (if SIGXCPU is ignored).
        top = value + 1 if which == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            top = min(top, hard)
        resource.setrlimit(which, (value, top))


def prctl(option, arg):
    """``prctl(option, arg, 0, 0, 0)``.

    Raises:
        OSError: the call failed (errno as the kernel set it).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl failed")


class Lines:
    """Newline-framed messages from a child's pipe, noticing when the child dies."""

    def __init__(self, fd, pid):
        self.fd, self.pid, self.buf, self.status, self.cpu = fd, pid, bytearray(), None, None

    def child_exited(self):
        """Whether the child has exited (its status and CPU seconds are then kept)."""
        if self.status is None:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.status, self.cpu = status, usage.ru_utime + usage.ru_stime
        return self.status is not None

    def readline(self):
        """The next message (bytes, without its newline).

        Raises:
            CandidateGone: the pipe closed, the child exited with nothing left to read, or a
                message grew beyond ``MAX_MESSAGE``.
        """
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                return line
            start = len(self.buf)
            if start > MAX_MESSAGE:
                raise CandidateGone("message too large")
            # Poll with a short timeout: descendants of the candidate may hold the pipe's
            # write end open, so EOF alone does not tell us the candidate is gone.
            ready, _, _ = select.select([self.fd], [], [], 0.02)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise CandidateGone("closed")
                self.buf += chunk
            elif self.child_exited():
                ready, _, _ = select.select([self.fd], [], [], 0)
                if not ready:
                    raise CandidateGone("exited")


def exit_info(status, cpu=None):
    """A wait status as record data: ``{"signal", "cpu"}`` or ``{"code", "cpu"}`` (None: none)."""
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status), "cpu": cpu}
    return {"code": os.waitstatus_to_exitcode(status), "cpu": cpu}


def _others_alive():
    """Whether any process but this one and pid 1 is left (zombies reaped by us excepted)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in (1, me):
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                if stat[stat.rindex(b")") + 2 :][:1] != b"Z":
                    return True
            except (OSError, ValueError):
                continue
    return False


def sweep_children(pidns=False):
    """Kill every remaining child (orphans were re-parented to us as subreaper).

    With ``pidns`` (the run has its own pid namespace), ``kill(-1)`` reaches every process of
    the run but pid 1 (us under bwrap --as-pid-1) and us at once: a chain of processes that
    forks faster than the loop below kills one generation a round cannot outlive it.
    Returns whether processes are still alive after the sweep (``pidns`` only).
    """
    me = str(os.getpid())
    for i in range(1000):
        if i >= 20:  # a process killed while tearing down much memory takes a while to exit
            select.select([], [], [], 0.002)
        found = False
        if pidns:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                ppid = stat[stat.rindex(b")") + 2 :].split()[1].decode()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not found and not (pidns and _others_alive()):
            return False
    return pidns and _others_alive()

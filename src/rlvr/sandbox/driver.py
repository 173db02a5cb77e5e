"""The driver that runs INSIDE the sandbox (standalone: standard library + ``codec.py``, and
``remote.py`` when a test runs in the supervisor).

Started as ``python3 -I -S driver.py '<limits json>'`` with:

- fd 0: the job, as one JSON document, written by the host and then closed;
- fd 1: the result channel to the host (only the trusted supervisor writes here);
- fd 2: the program's stdout and stderr, captured by the host with a cap.

It splits itself in two processes *before* it reads the job:

- the **supervisor** (this process) makes itself non-dumpable (so the other process cannot
  read its memory, ptrace it or open its file descriptors through ``/proc``), reads the job
  (which carries the run's nonce and any tests that must run inside the sandbox), and writes
  the one result record, authenticated by an HMAC keyed with the nonce, to fd 1 (the nonce
  itself never leaves, in case the program can reach fd 1; under bwrap this process is the pid
  namespace's init, so ``/proc/1/fd`` is closed to the program and its SIGKILL does not reach us);
- the **candidate** process drops fds 0 and 1 (its stdout goes to fd 2), receives only the
  program, the probe expressions and a list of names, runs the program as ``__main__``,
  evaluates the probes, and then answers remote calls from the supervisor.

The remote protocol (``remote.py``, which describes it in full) carries plain codec data plus
references: a callable or iterator a check passes as an argument stays in the supervisor (a
*callback*: the candidate's calls of it come back as requests, and the supervisor runs the
trusted object on plain-data arguments); an object of the program the codec cannot encode stays
in the candidate (a *handle*: the supervisor's proxy forwards attribute reads, calls, ``len``,
``str``, truth value, iteration, and operators only between two handles; ``==`` with plain data
is False, ordering a TypeError); mutable arguments a call changed are sent back and written
into the check's own objects. Both wait loops serve nested requests, bounded in depth.

So nothing the program does (exit early, patch ``json``, print fake records, return objects with
a lying ``__eq__``, walk frames) can produce a passing record: probe values are compared by the
host on decoded plain data, in-sandbox tests run in the supervisor on plain data (or proxies that
never let a program object meet plain data in a comparison) returned by remote calls, the
supervisor decodes nothing but codec data and runs no code the program chose, and only the
supervisor knows the nonce and the expected values.

Time: the driver keeps no timers (a per-test timer would be wall time, which load stretches).
It writes ``READY`` once it is up; the host takes the run's CPU baseline then, sends the job,
and enforces the CPU budget (summed over all processes) and the wall backstop from outside;
RLIMIT_CPU, set here, is the kernel's per-process kill behind both. The supervisor is a child
subreaper, so every orphan of the run becomes its child; before it writes the record it kills
and reaps all of them, so the record's ``cpu`` (its own CPU since ``READY`` plus that of every
reaped descendant) is the run's complete CPU time; the host keeps the larger of it and its own
reading.
"""

import builtins
import ctypes
import json
import os
import resource
import select
import signal
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codec  # noqa: E402  (the sibling file, bound read-only next to this one)

MAX_MESSAGE = 16 << 20  # bytes accepted from the candidate process in one message
# Encoded bytes of probe values, all probes together, passed on to the host (which decodes them
# outside every sandbox limit); later values fail their probes. Far above what a test compares.
MAX_PROBE_BYTES = 4 << 20
# Free fds the candidate must have left after the program for its run to count as not having
# exhausted RLIMIT_NOFILE: one would not do (os.pipe() takes fds in pairs and leaves one free).
FD_HEADROOM = 8
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


class CandidateGone(BaseException):
    """The candidate process died, or broke the protocol; later tests cannot run."""


class CandidateError(Exception):
    """A remote call into the candidate's code raised (the remote type name is the message)."""


def _apply_limits(lim):
    """Set soft = hard rlimits on this process (inherited by the candidate)."""
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


def _prctl(option, arg):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl failed")


class _Lines:
    """Newline-framed messages from a child's pipe, noticing when the child dies."""

    def __init__(self, fd, pid):
        self.fd, self.pid, self.buf, self.status, self.cpu = fd, pid, bytearray(), None, None

    def _child_exited(self):
        if self.status is None:
            pid, status, usage = os.wait4(self.pid, os.WNOHANG)
            if pid:
                self.status, self.cpu = status, usage.ru_utime + usage.ru_stime
        return self.status is not None

    def readline(self):
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
            elif self._child_exited():
                ready, _, _ = select.select([self.fd], [], [], 0)
                if not ready:
                    raise CandidateGone("exited")


def _exit_info(status, cpu=None):
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status), "cpu": cpu}
    return {"code": os.waitstatus_to_exitcode(status), "cpu": cpu}


# ----------------------------------------------------------------------------- candidate side


def _candidate(r_job, w_res, devnull):
    """Child process: run the untrusted program, report probes, serve remote calls."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor died: so do we
    except OSError:
        pass
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the program's stdout joins the capped output channel, never fd 1
    os.close(devnull)
    rfile = os.fdopen(r_job, "rb")
    job = json.loads(_read_line_blocking(rfile))
    path = os.path.join(os.getcwd(), "prog.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(job["program"])
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = [path]
    g = module.__dict__

    def send(text):
        _flush_std()
        data = text.encode("utf-8", "replace") + b"\n"
        while data:
            data = data[os.write(w_res, data) :]

    def fail(phase, e):
        send(json.dumps({"phase": phase, "error": {"type": type(e).__name__, "msg": _safe_str(e)}}))
        os._exit(0)

    try:
        exec(_compile_program(job["program"], path), g)
    except BaseException as e:  # SystemExit too: leaving before the tests is a failure
        fail("program_error", e)
    if job.get("setup"):
        try:
            exec(compile(job["setup"], "<setup>", "exec"), g)
        except BaseException as e:
            fail("setup_error", e)

    pg = dict(g)
    if job.get("entry_point"):
        pg["candidate"] = g.get(job["entry_point"])
    items = []
    for src in job.get("probes", []):
        try:
            value = eval(compile(src, "<test>", "eval"), pg)
            items.append('{"v":' + codec.encode(value) + "}")
        except BaseException as e:
            items.append(json.dumps({"e": type(e).__name__, "msg": _safe_str(e)}))
    server = []  # the remote-protocol server (remote.py), made when first needed

    def get_server():
        if not server:
            import remote  # deferred: a run of probes alone never needs it

            server.append(remote.Server(pg, send, lambda: _read_message(rfile)))
        return server[0]

    names = {}
    for name in job.get("names", []):
        if name in g:
            names[name] = _describe(g[name], get_server)
    fds_ok = True
    spare = []
    try:
        for _ in range(FD_HEADROOM):
            spare.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        fds_ok = False  # the program exhausted RLIMIT_NOFILE (or came within FD_HEADROOM of it)
    for fd in spare:
        os.close(fd)
    head = json.dumps({"phase": "done", "names": names, "fds_ok": fds_ok})
    send(head[:-1] + ',"probes":[' + ",".join(items) + "]}")

    first = _read_message(rfile)  # the first remote call from the supervisor (None at EOF)
    if first is None:
        os._exit(0)
    get_server().serve(first)


def _read_message(rfile):
    """The supervisor's next message (a dict), or None at EOF."""
    line = rfile.readline()
    return json.loads(line) if line else None


# Wraps a top-level ``if __name__ == "__main__":`` block (see ``_compile_program``).
_MAIN_BLOCK_WRAPPER = """\
try:
    pass
except SystemExit:
    pass
except MemoryError:
    raise
except Exception:
    pass
"""


def _is_main_test(ast, test):
    """``__name__ == "__main__"`` (either operand order)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    pair = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in pair) and any(
        isinstance(b, ast.Constant) and b.value == "__main__" for b in pair
    )


def _compile_program(source, path):
    """The program's code object, to run as ``__main__``.

    A top-level ``if __name__ == "__main__":`` block still runs, so its CPU time, memory,
    processes and output count against the limits as before; but ``SystemExit`` or an ordinary
    exception leaving it (``input()`` on the empty stdin, ``unittest.main()``,
    ``sys.exit(main())``) no longer fails the program: the HumanEval / MBPP harnesses never run
    that block, and the tests here run after it either way. ``MemoryError`` still fails (the
    memory status must show). An exit or exception anywhere else, and ``os._exit`` anywhere,
    still ends the program before the tests: a failure.

    Raises:
        SyntaxError, ValueError: the program does not compile (reported as a program error).
    """
    if "__main__" not in source:
        return compile(source, path, "exec")
    import ast  # deferred: only a program that names __main__ pays for the import

    tree = ast.parse(source, path)
    wrapped = False
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.If) and _is_main_test(ast, node.test):
            wrap = ast.parse(_MAIN_BLOCK_WRAPPER).body[0]
            for n in ast.walk(wrap):  # point the wrapper's lines at the block's own
                ast.copy_location(n, node)
            wrap.body = [node]
            tree.body[i] = wrap
            wrapped = True
    if not wrapped:
        return compile(source, path, "exec")
    return compile(tree, path, "exec")


def _read_line_blocking(rfile):
    """One newline-terminated line from the supervisor (b"" at EOF)."""
    return rfile.readline()


def _flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _safe_str(e):
    try:
        return str(e)[:300]
    except BaseException:
        return "?"


def _describe(value, get_server):
    """What the supervisor learns of a name the checks use: a module (by name), a function,
    a value (plain data; an object the codec cannot encode is a handle, see remote.py)."""
    if isinstance(value, types.ModuleType):
        return {"k": "module", "m": getattr(value, "__name__", "")}
    if callable(value):
        return {"k": "func"}
    try:
        return {"k": "value", "v": json.loads(codec.encode(value))}
    except BaseException:
        pass
    try:
        return {"k": "value", "v": json.loads(codec.encode(value, get_server().ref_out))}
    except BaseException:
        return {"k": "opaque"}


# ---------------------------------------------------------------------------- supervisor side


def _remote_exception(type_name, msg):
    # A test may expect e.g. ValueError from the candidate: mirror builtin exception types
    # (by name only; no object from the candidate is ever rebuilt).
    base = getattr(builtins, type_name, None)
    # StopIteration / StopAsyncIteration are not mirrored: raised inside ``map(candidate, xs)``
    # they would end the check's loop silently, so a program raising one would pass its asserts.
    if (
        isinstance(base, type)
        and issubclass(base, Exception)
        and base is not Exception
        and not issubclass(base, (StopIteration, StopAsyncIteration))
    ):
        cls = type(type_name, (CandidateError, base), {})
        return cls(msg)
    return CandidateError(f"{type_name}: {msg}")


def _text(x, n):
    """A string field of a candidate message, cut to ``n`` characters (anything else: "?")."""
    return x[:n] if isinstance(x, str) else "?"


def _client(w_job, lines):
    """The supervisor's side of the remote protocol (remote.py) over the candidate's pipes."""
    import remote  # deferred: a run of probes alone never needs it

    def send(text):
        data = text.encode()
        try:
            while data:
                data = data[os.write(w_job, data) :]
        except OSError:
            raise CandidateGone("closed") from None

    def recv():
        try:
            msg = json.loads(lines.readline())
        except Exception:  # ValueError, RecursionError (deeply nested), MemoryError, ...
            raise CandidateGone("protocol") from None
        if not isinstance(msg, dict):
            raise CandidateGone("protocol")
        return msg

    return remote, remote.Client(send, recv, CandidateGone, _remote_exception, CandidateError)


def _run_checks(job, cand, w_job, lines):
    remote, client = _client(w_job, lines)
    ns = {"__name__": "__rlvr_check__", "__builtins__": builtins}
    # The trusted prompt (its helpers, e.g. HumanEval/32's ``poly``, and its imports) runs here,
    # in the supervisor, before the checks: what it defines is never taken from the program.
    prelude_error = None
    if job.get("check_prelude"):
        try:
            exec(compile(job["check_prelude"], "<prompt>", "exec"), ns)
        except BaseException as e:
            prelude_error = f"prompt failed: {type(e).__name__}: {_safe_str(e)}"[:300]
    trusted = set(ns)
    entry = job.get("entry_point")
    wanted = set(job.get("names") or ())
    names = cand.get("names")
    for name, info in (names.items() if isinstance(names, dict) else ()):
        # Only the entry point and names neither builtin nor defined by the trusted prompt come
        # from the program: a program's ``abs``, ``range`` or ``poly`` must not change what the
        # check computes (they would, e.g. ``def abs(x): return 0`` passes any tolerance test).
        if name not in wanted or (name != entry and (name in trusted or hasattr(builtins, name))):
            continue
        kind = info.get("k") if isinstance(info, dict) else None
        if kind == "func":
            ns[name] = remote.Function(client, name)
        elif kind == "module":
            mod = str(info.get("m", ""))
            if mod.partition(".")[0] in sys.stdlib_module_names:  # never import program files
                try:
                    # deferred: the fresh interpreter of every run has not loaded importlib;
                    # only a check that names a module needs it
                    import importlib

                    ns[name] = importlib.import_module(mod)
                except BaseException:
                    pass
        elif kind == "value":
            try:
                ns[name] = codec.decode(json.dumps(info["v"]), client.ref_in)
            except Exception:  # KeyError, RecursionError, ValueError: the name stays unbound
                pass
    results = []
    gone = False
    for chk in job.get("checks", []):
        if gone:
            results.append({"ok": False, "err": "CandidateGone"})
            continue
        if prelude_error is not None:
            results.append({"ok": False, "err": prelude_error})
            continue
        try:
            exec(compile(chk["src"], "<check>", "exec"), ns)
            if chk.get("kind") == "check":
                ns["check"](remote.Function(client, job["entry_point"]))
            results.append({"ok": True})
        except CandidateGone:
            gone = True
            results.append({"ok": False, "err": "CandidateGone"})
        except BaseException as e:
            results.append({"ok": False, "err": f"{type(e).__name__}: {_safe_str(e)}"[:300]})
    return results


def _clean_probes(raw):
    """The candidate's probe results as they may enter the record (see :func:`_clean_probe`),
    at most ``MAX_PROBE_BYTES`` of encoded values in all."""
    left = [MAX_PROBE_BYTES]
    return [_clean_probe(p, left) for p in (raw if isinstance(raw, list) else [])]


def _clean_probe(item, left):
    """A probe result of the candidate as it may enter the record: a value only if the codec
    decodes it (bounded depth, size and effort, see ``codec.decode``) and ``left[0]`` bytes
    allow it, else a failed probe, so the host never has to parse anything the program shaped
    beyond those bounds."""
    try:
        if isinstance(item, dict) and "v" in item:
            text = json.dumps(item["v"])
            left[0] -= len(text)
            if left[0] < 0:
                return {"e": "undecodable", "msg": "probe values too large"}
            codec.decode(text)
            return {"v": item["v"]}
        if isinstance(item, dict):
            return {"e": _text(item.get("e"), 100), "msg": _text(item.get("msg"), 300)}
    except Exception as e:  # ValueError from decode, RecursionError from json.dumps, ...
        return {"e": "undecodable", "msg": f"{type(e).__name__}: {_safe_str(e)}"[:300]}
    return {"e": "malformed"}


def _fds_exhausted(pid):
    """Whether the candidate holds so many fds that fewer than ``FD_HEADROOM`` are left under
    RLIMIT_NOFILE (counted here, from ``/proc``, so the program cannot fake it; None when the
    program made its ``/proc/<pid>/fd`` unreadable: its own report then decides)."""
    try:
        n = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft != resource.RLIM_INFINITY and n + FD_HEADROOM > soft


def _read_job():
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def _cpu_seconds(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


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


def _sweep_children(pidns=False):
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


def main():
    limits = json.loads(sys.argv[1])
    _apply_limits(limits)
    devnull = os.open("/dev/null", os.O_RDWR)
    r_job, w_job = os.pipe()
    r_res, w_res = os.pipe()
    # Orphans (daemons, children of a dead candidate) are re-parented to us, not to an init we
    # cannot see: they can be found, killed, and reaped into our CPU accounting.
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if limits.get("pdeathsig"):  # no bwrap --die-with-parent around us
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the host process died: so do we
    # Fork before reading the job, so the candidate's memory never holds the nonce or tests.
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w_job)
            os.close(r_res)
            os.close(1)
            _candidate(r_job, w_res, devnull)
        finally:
            os._exit(70)
    os.close(r_job)
    os.close(w_res)
    os.close(devnull)
    record = {"phase": "driver_error"}
    cpu_at_ready = None
    # As the pid namespace's init (bwrap --as-pid-1) only signals we handle reach us from the
    # program: Python's SIGINT handler would let it raise KeyboardInterrupt here at will.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _prctl(PR_SET_DUMPABLE, 0)
        cpu_at_ready = _cpu_seconds(resource.RUSAGE_SELF)
        os.write(1, b"READY\n")
        job = _read_job()
        record["nonce"] = job["nonce"]
        cand_job = {k: job.get(k) for k in ("program", "setup", "probes", "names", "entry_point")}
        data = (json.dumps(cand_job) + "\n").encode()
        lines = _Lines(r_res, pid)
        # From here on the program runs: what goes wrong with its message (a broken pipe,
        # malformed or deeply nested JSON: RecursionError, MemoryError) is its failure.
        record["handed"] = True
        try:
            while data:
                data = data[os.write(w_job, data) :]
            cand = json.loads(lines.readline())
            if not isinstance(cand, dict):
                raise CandidateGone("protocol")
        except (CandidateGone, Exception) as e:
            for _ in range(100):  # EOF can come just before the exit status is reapable
                if lines._child_exited():
                    break
                select.select([], [], [], 0.005)
            record.update(phase="program_exit", why=str(e)[:100], exit=_exit_info(lines.status, lines.cpu))
            cand = None
        if cand is not None:
            phase = cand.get("phase")
            if phase == "done":
                record.update(
                    phase="done",
                    probes=_clean_probes(cand.get("probes")),
                    fds_ok=cand.get("fds_ok") is True and not _fds_exhausted(pid),
                    checks=_run_checks(job, cand, w_job, lines) if job.get("checks") else [],
                )
            elif phase in ("program_error", "setup_error"):
                err = cand.get("error")
                err = err if isinstance(err, dict) else {}
                err = {"type": _text(err.get("type"), 60), "msg": _text(err.get("msg"), 300)}
                record.update(phase=phase, error=err)
            else:
                record.update(phase="program_exit", why="protocol")
    except BaseException as e:  # a bug, broken infrastructure, or memory the program took
        record.update(phase="driver_error", error={"type": type(e).__name__, "msg": _safe_str(e)})
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    # Everything is reaped before the record leaves: the host's final CPU reading then finds no
    # process dying half-way through its parent's accounting.
    if _sweep_children(bool(limits.get("pidns"))) and record.get("phase") == "done":
        # Something of the program outlived every kill: it could still act on the channels.
        record.update(phase="program_exit", why="processes survived the sweep", exit=None)
    if cpu_at_ready is not None:
        total = _cpu_seconds(resource.RUSAGE_SELF) + _cpu_seconds(resource.RUSAGE_CHILDREN)
        record["cpu"] = round(total - cpu_at_ready, 4)
    nonce = record.pop("nonce", None)
    try:
        line = json.dumps(record)
    except BaseException as e:  # pragma: no cover - every field was checked or made here
        keep = {k: record[k] for k in ("cpu", "handed") if k in record}
        err = {"type": type(e).__name__, "msg": ""}
        line = json.dumps(keep | {"phase": "driver_error", "error": err})
    # Should the program reach this channel (it could read it through /proc/1/fd/1 while bwrap's
    # dumpable reaper was pid 1), the nonce must not travel on it: the record is authenticated
    # by an HMAC keyed with it.
    # The leading newline ends any partial line the program left on the channel.
    if isinstance(nonce, str):
        import hmac  # deferred: only the record needs it, after the program is gone

        body = line.encode()
        mac = hmac.new(nonce.encode(), body, "sha256").hexdigest().encode()
        os.write(1, b"\n" + mac + b" " + body + b"\n")
    os._exit(0)


if __name__ == "__main__":
    main()

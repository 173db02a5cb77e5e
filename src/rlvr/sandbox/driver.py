"""The driver that runs INSIDE the sandbox (standalone: standard library + its sibling files:
``procs.py``, ``codec.py``, ``candidate.py``, and ``checks.py``, ``remote.py`` and
``remote_client.py`` when a test runs in the supervisor).

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
- the **candidate** process (``candidate.py``) drops fds 0 and 1 (its stdout goes to fd 2),
  receives only the program, the setup code, the probe expressions and a list of names, runs
  the program as ``__main__``, evaluates the probes, and then answers remote calls from the
  supervisor.

The remote protocol (``remote.py``, which describes it in full) carries plain codec data plus
references: a callable or iterator a check passes as an argument stays in the supervisor (a
*callback*: the candidate's calls of it come back as requests, and the supervisor runs the
trusted object on plain-data arguments); an object of the program the codec cannot encode stays
in the candidate (a *handle*: the supervisor's proxy forwards attribute reads, calls, ``len``,
``str``, truth value, iteration, and operators only between two handles; ``==`` with plain data
is False, ordering a TypeError); mutable arguments a call changed are sent back and written
into the check's own objects. Both wait loops serve nested requests, bounded in depth.

So nothing the program does (exit early, patch ``json``, print fake records, return objects with
a lying ``__eq__``, walk frames, replace ``math`` in ``sys.modules`` or ``builtins``, install
trace or profile hooks) can produce a passing record: probe values are compared by the host on
decoded plain data, in-sandbox tests run in the supervisor (``checks.py``) in a namespace of its
own (its own builtins, modules, prompt helpers and setup code; program functions only as remote
calls) on plain data (or proxies that never let a program object meet plain data in a
comparison) returned by remote calls, the supervisor decodes nothing but codec data and runs no
code the program chose, and only the supervisor knows the nonce and the expected values.

Time: the driver keeps no timers (a per-test timer would be wall time, which load stretches).
It writes ``READY`` once it is up; the host takes the run's CPU baseline then, sends the job,
and enforces the CPU budget (summed over all processes) and the wall backstop from outside;
RLIMIT_CPU, set here, is the kernel's per-process kill behind both. The supervisor is a child
subreaper, so every orphan of the run becomes its child; before it writes the record it kills
and reaps all of them, so the record's ``cpu`` (its own CPU since ``READY`` plus that of every
reaped descendant) is the run's complete CPU time; the host keeps the larger of it and its own
reading.
"""

import json
import os
import resource
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The sibling files, bound read-only next to this one.
import candidate
import codec
import procs
from procs import CandidateGone, safe_str, text

# Encoded bytes of probe values, all probes together, passed on to the host (which decodes them
# outside every sandbox limit); later values fail their probes. Far above what a test compares.
MAX_PROBE_BYTES = 4 << 20


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
            enc = json.dumps(item["v"])
            left[0] -= len(enc)
            if left[0] < 0:
                return {"e": "undecodable", "msg": "probe values too large"}
            codec.decode(enc)
            return {"v": item["v"]}
        if isinstance(item, dict):
            return {"e": text(item.get("e"), 100), "msg": text(item.get("msg"), 300)}
    except Exception as e:  # ValueError from decode, RecursionError from json.dumps, ...
        return {"e": "undecodable", "msg": f"{type(e).__name__}: {safe_str(e)}"[:300]}
    return {"e": "malformed"}


def _fds_exhausted(pid):
    """Whether the candidate holds so many fds that fewer than ``candidate.FD_HEADROOM`` are
    left under RLIMIT_NOFILE (counted here, from ``/proc``, so the program cannot fake it; None
    when the program made its ``/proc/<pid>/fd`` unreadable: its own report then decides)."""
    try:
        n = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft != resource.RLIM_INFINITY and n + candidate.FD_HEADROOM > soft


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


def _run_checks(job, cand, w_job, lines):
    """The checks' results (``checks.py``, imported only when the job has checks)."""
    if not job.get("checks"):
        return []
    import checks  # deferred: a run of probes alone never needs it

    return checks.run_checks(job, cand, w_job, lines)


def main():
    limits = json.loads(sys.argv[1])
    procs.apply_limits(limits)
    devnull = os.open("/dev/null", os.O_RDWR)
    r_job, w_job = os.pipe()
    r_res, w_res = os.pipe()
    # Orphans (daemons, children of a dead candidate) are re-parented to us, not to an init we
    # cannot see: they can be found, killed, and reaped into our CPU accounting.
    procs.prctl(procs.PR_SET_CHILD_SUBREAPER, 1)
    if limits.get("pdeathsig"):  # no bwrap --die-with-parent around us
        procs.prctl(procs.PR_SET_PDEATHSIG, signal.SIGKILL)  # the host process died: so do we
    # Fork before reading the job, so the candidate's memory never holds the nonce or tests.
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w_job)
            os.close(r_res)
            os.close(1)
            try:
                procs.prctl(procs.PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor died
            except OSError:
                pass
            candidate.run(r_job, w_res, devnull)
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
        procs.prctl(procs.PR_SET_DUMPABLE, 0)
        cpu_at_ready = _cpu_seconds(resource.RUSAGE_SELF)
        os.write(1, b"READY\n")
        job = _read_job()
        record["nonce"] = job["nonce"]
        cand_job = {k: job.get(k) for k in ("program", "setup", "probes", "names", "entry_point")}
        data = (json.dumps(cand_job) + "\n").encode()
        lines = procs.Lines(r_res, pid)
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
                if lines.child_exited():
                    break
                select.select([], [], [], 0.005)
            exit_ = procs.exit_info(lines.status, lines.cpu)
            record.update(phase="program_exit", why=str(e)[:100], exit=exit_)
            cand = None
        if cand is not None:
            phase = cand.get("phase")
            if phase == "done":
                record.update(
                    phase="done",
                    probes=_clean_probes(cand.get("probes")),
                    fds_ok=cand.get("fds_ok") is True and not _fds_exhausted(pid),
                    checks=_run_checks(job, cand, w_job, lines),
                )
            elif phase in ("program_error", "setup_error"):
                err = cand.get("error")
                err = err if isinstance(err, dict) else {}
                err = {"type": text(err.get("type"), 60), "msg": text(err.get("msg"), 300)}
                record.update(phase=phase, error=err)
            else:
                record.update(phase="program_exit", why="protocol")
    except BaseException as e:  # a bug, broken infrastructure, or memory the program took
        record.update(phase="driver_error", error={"type": type(e).__name__, "msg": safe_str(e)})
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    # Everything is reaped before the record leaves: the host's final CPU reading then finds no
    # process dying half-way through its parent's accounting.
    if procs.sweep_children(bool(limits.get("pidns"))) and record.get("phase") == "done":
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

"""The supervisor's in-sandbox checks (standalone: standard library + the driver's sibling files;
loaded only when a test runs in the supervisor).

A check (an assert the host could not turn into a probe, a HumanEval ``check`` function)
evaluates here, in the trusted supervisor process, in a namespace that holds nothing the program
can change:

- builtins, and the trusted prompt (``check_prelude``: a HumanEval prompt's imports and helpers
  such as ``poly``), run here first;
- the program's functions and classes (the entry point, and other names the checks read that
  the program binds to callables) as ``remote_client.Function`` objects: a call is a remote
  call whose arguments and result are plain data or references (``remote.py``); a Function has
  no attribute of the program;
- standard-library modules the checks read (``math``, ``sys``), imported here by the name the
  check uses: whatever the program put in its ``sys.modules``, its globals, ``builtins`` or a
  trace / profile hook stays in the candidate process;
- the setup code (MBPP ``test_setup_code`` / ``test_imports``), run here after the above, so
  what it imports and defines (``import math``, ``root = Node(1)``) is the supervisor's own.

Builtins and the prompt's names are never taken from the program (a program's ``abs``,
``range`` or ``poly`` must not change what the check computes), and neither are modules or
values: the candidate's report says only which names are program functions. The expected
values are in the check source, which never leaves this process.
"""

import builtins
import json
import os
import sys

try:  # in the sandbox: the sibling file, as driver.py loads it
    from procs import CandidateGone, safe_str
except ImportError:  # imported on the host (unit tests): the package's copy
    from rlvr.sandbox.procs import CandidateGone, safe_str

# Standard-library names never imported for a check: their import has effects of its own
# (printing on the result channel, starting a web browser).
_NOT_IMPORTED = frozenset({"this", "antigravity"})


class CandidateError(Exception):
    """A remote call into the candidate's code raised (the remote type name is the message)."""


def remote_exception(type_name, msg):
    """The exception a remote error raises in the check: a builtin exception type is mirrored by
    name (a test may expect e.g. ValueError from the candidate; no object of the candidate is
    ever rebuilt), anything else is a plain :class:`CandidateError`."""
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


def _client(w_job, lines):
    """The supervisor's side of the remote protocol over the candidate's pipes."""
    import remote_client  # deferred: a run of probes alone never needs it

    def send(line):
        data = line.encode()
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

    client = remote_client.Client(send, recv, CandidateGone, remote_exception, CandidateError)
    return remote_client, client


def _stdlib_module(name):
    """The supervisor's own standard-library module ``name`` (top-level), or None."""
    if name.startswith("_") or name in _NOT_IMPORTED or name not in sys.stdlib_module_names:
        return None
    try:
        return __import__(name)
    except BaseException:  # not built into this interpreter (tkinter, ...): stays unbound
        return None


def _exec_trusted(source, filename, ns, what):
    """Run trusted ``source`` in ``ns``; the error line for the checks if it raised, else None.

    Raises:
        CandidateGone: the source called the program, and the candidate died or broke the
            protocol.
    """
    try:
        exec(compile(source, filename, "exec"), ns)
    except CandidateGone:
        raise
    except BaseException as e:
        return f"{what} failed: {type(e).__name__}: {safe_str(e)}"[:300]
    return None


def namespace(job, cand, remote_client, client):
    """The checks' namespace and the error every check fails with (None when all is well).

    ``job``: the supervisor's job (``check_prelude``, ``setup``, ``names``, ``entry_point``);
    ``cand``: the candidate's ``done`` message (only its ``names`` field is read, and only for
    which names are program functions).

    Raises:
        CandidateGone: the setup code called the program, and the candidate died or broke the
            protocol.
    """
    ns = {"__name__": "__rlvr_check__", "__builtins__": builtins}
    # The trusted prompt (its helpers, e.g. HumanEval/32's ``poly``, and its imports) runs
    # first: what it defines is never taken from the program.
    if job.get("check_prelude"):
        error = _exec_trusted(job["check_prelude"], "<prompt>", ns, "prompt")
        if error is not None:
            return ns, error
    trusted = set(ns)
    entry = job.get("entry_point")
    wanted = [n for n in (job.get("names") or ()) if isinstance(n, str)]
    reported = cand.get("names")
    reported = reported if isinstance(reported, dict) else {}
    for name in wanted:
        info = reported.get(name)
        if not (isinstance(info, dict) and info.get("k") == "func"):
            continue
        # Only the entry point may stand for a builtin (an MBPP task's own ``sum``).
        if name != entry and (name in trusted or hasattr(builtins, name)):
            continue
        ns[name] = remote_client.Function(client, name)
    for name in wanted:
        if name not in ns and not hasattr(builtins, name):
            module = _stdlib_module(name)
            if module is not None:
                ns[name] = module
    # The setup code last, as it ran after the program in the original harnesses: its imports
    # and definitions win, and it may build test inputs with the program's classes (remote).
    if job.get("setup"):
        error = _exec_trusted(job["setup"], "<setup>", ns, "setup")
        if error is not None:
            return ns, error
    return ns, None


def run_checks(job, cand, w_job, lines):
    """Run the job's checks against the candidate; one ``{"ok", "err"?}`` per check.

    ``w_job``: the pipe to the candidate; ``lines``: the candidate's message channel
    (``procs.Lines``). A dead candidate (or one that broke the protocol) fails the check that
    was running and every later one.
    """
    remote_client, client = _client(w_job, lines)
    checks = job.get("checks", [])
    try:
        ns, error = namespace(job, cand, remote_client, client)
    except CandidateGone:
        return [{"ok": False, "err": "CandidateGone"} for _ in checks]
    results = []
    gone = False
    for chk in checks:
        if gone:
            results.append({"ok": False, "err": "CandidateGone"})
            continue
        if error is not None:
            results.append({"ok": False, "err": error})
            continue
        try:
            exec(compile(chk["src"], "<check>", "exec"), ns)
            if chk.get("kind") == "check":
                ns["check"](remote_client.Function(client, job["entry_point"]))
            results.append({"ok": True})
        except CandidateGone:
            gone = True
            results.append({"ok": False, "err": "CandidateGone"})
        except BaseException as e:
            results.append({"ok": False, "err": f"{type(e).__name__}: {safe_str(e)}"[:300]})
    return results


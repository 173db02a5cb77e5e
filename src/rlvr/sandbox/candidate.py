"""The candidate process of the in-sandbox driver (standalone: standard library + ``codec.py``
and ``procs.py``; ``remote.py`` once a test runs in the supervisor).

The driver's supervisor forks this process before it reads the job. It drops fds 0 and 1 (its
stdout goes to fd 2), receives only the program, the setup code, the probe expressions, the
entry point and the names the checks read, runs the program as ``__main__`` (then the setup
code, in the program's namespace), evaluates the probes, reports which of the names are
program functions, and then answers the supervisor's remote calls (``remote.Server``).

Everything here is untrusted once the program has run: the program can change any object of
this process. Nothing it sends is believed beyond what it is: probe values are data the host
compares, a function name is only ever called through the protocol, and the supervisor never
takes a module, a helper or a value for its checks from this process.
"""

import builtins
import json
import os
import sys
import types

try:  # in the sandbox: the sibling files, as driver.py loads them
    import codec
    from procs import safe_str
except ImportError:  # imported on the host (unit tests): the package's copies
    from rlvr.sandbox import codec
    from rlvr.sandbox.procs import safe_str

# Free fds the candidate must have left after the program for its run to count as not having
# exhausted RLIMIT_NOFILE: one would not do (os.pipe() takes fds in pairs and leaves one free).
FD_HEADROOM = 8


def run(r_job, w_res, devnull):
    """Run the untrusted program, report probes and program functions, serve remote calls.

    ``r_job``: the supervisor's pipe (the job, then requests); ``w_res``: the pipe back to it;
    ``devnull``: an fd open on /dev/null. Never returns (the process exits).
    """
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the program's stdout joins the capped output channel, never fd 1
    os.close(devnull)
    rfile = os.fdopen(r_job, "rb")
    job = json.loads(rfile.readline())
    path = os.path.join(os.getcwd(), "prog.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(job["program"])
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = [path]
    g = module.__dict__

    def send(line):
        _flush_std()
        data = line.encode("utf-8", "replace") + b"\n"
        while data:
            data = data[os.write(w_res, data) :]

    def fail(phase, e):
        send(json.dumps({"phase": phase, "error": {"type": type(e).__name__, "msg": safe_str(e)}}))
        os._exit(0)

    try:
        exec(compile_program(job["program"], path), g)
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
            items.append(json.dumps({"e": type(e).__name__, "msg": safe_str(e)}))
    # Only which names are program functions: the supervisor calls them through the protocol
    # and takes nothing else (no module, value or object) from this process.
    names = {}
    for name in job.get("names", []):
        if callable(g.get(name)):
            names[name] = {"k": "func"}
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
    import remote  # deferred: a run of probes alone never needs it

    remote.Server(pg, send, lambda: _read_message(rfile)).serve(first)


def _read_message(rfile):
    """The supervisor's next message (a dict), or None at EOF."""
    line = rfile.readline()
    return json.loads(line) if line else None


# Wraps a top-level ``if __name__ == "__main__":`` block (see ``compile_program``).
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


def compile_program(source, path):
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


def _flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass

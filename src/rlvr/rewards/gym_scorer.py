"""The scoring program that runs INSIDE the sandbox for untrusted reasoning-gym datasets
(standard library only; :mod:`rlvr.rewards.gym_sandbox` sends this file's source as the
sandbox program, followed by one line that calls :func:`main` with the batch).

Importing this module runs nothing. :func:`main` imports only the dataset's own module of
reasoning-gym (its parent packages are stand-ins with the right ``__path__``, so the
package's ``__init__`` files, which import all 106 datasets and matplotlib, never run; the
few modules that need them get the whole package), builds
the dataset once, and scores every answer of the batch in a fresh child process of its own:

- the child's stdin, stdout and stderr are ``/dev/null`` and every other descriptor but its
  result pipe is closed (it cannot reach the sandbox's result channel or the other answers);
- it gets its own CPU-time and address-space limits (RLIMIT_CPU, RLIMIT_AS);
- an audit hook (PEP 578) ends it the moment the evaluated text does something no scorer
  does: run a command, fork, signal, open a socket, write / create / remove a file, read a
  file outside the interpreter's and the packages' directories, load native code, walk
  frames or the garbage collector, or import a module that serves such things.
  The answer then scores 0 (``trip``); the hook is a tripwire for the reward, the sandbox
  around it is the boundary that protects the host;
- it reports ``<nonce> ok <score>`` on its pipe; the nonce is a local of the parent's and the
  child's frames, reachable only through the audited frame and memory accessors, so evaluated
  text cannot forge its own score line.

One answer therefore cannot change the score of another, nor the state the next answer is
scored in. :func:`main` returns one ``[kind, value]`` pair per answer: ``["ok", score]``,
``["trip", event]``, ``["timeout", None]``, ``["memory", None]``, ``["error", type name]`` or
``["crash", exit status]``.
"""

import importlib
import os
import resource
import select
import signal
import sys
import time
import types

# audit events that end the scoring child (exact names, then prefixes)
_DENY_EXACT = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "sys.unraisablehook", "sys.excepthook",
    "builtins.input", "builtins.breakpoint", "code.__new__", "function.__new__",
    "pickle.find_class", "resource.setrlimit", "resource.prlimit",
    "os.chdir", "os.fchdir", "os.putenv", "os.unsetenv", "setopencodehook",
    "cpython.PyInterpreterState_Clear", "cpython.run_command", "cpython.run_file",
})
_DENY_PREFIX = (
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.kill", "os.setuid",
    "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.chown", "os.chflags",
    "os.link", "os.symlink", "os.truncate", "os.utime", "os.mkfifo", "os.mknod",
    "os.startfile", "os.add_dll_directory", "subprocess.", "socket.", "ctypes.", "gc.",
    "shutil.", "pty.", "mmap.", "signal.", "urllib.", "http.", "ftplib.", "smtplib.",
    "webbrowser.", "sqlite3.", "glob.", "tempfile.", "msvcrt.", "winreg.", "_winapi.",
)
_DENY_MODULES = frozenset({
    "subprocess", "_posixsubprocess", "socket", "_socket", "ssl", "_ssl", "ctypes", "_ctypes",
    "pty", "multiprocessing", "_multiprocessing", "mmap", "fcntl", "shutil", "urllib", "http",
    "ftplib", "smtplib", "asyncio", "_asyncio", "selectors", "tempfile", "webbrowser",
    "pickle", "_pickle", "inspect", "traceback", "threading", "_thread", "signal", "gc",
    "code", "codeop", "pdb", "bdb", "importlib", "runpy", "zipimport", "rlvr",
})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
TRIP_EXIT = 86


def _guard(read_roots, pipe_fd):
    """The audit hook of a scoring child: ``os._exit(TRIP_EXIT)`` on a denied event, after
    writing ``trip <event>`` (no nonce) on the child's pipe."""
    write, exit_, deny_exact, deny_prefix = os.write, os._exit, _DENY_EXACT, _DENY_PREFIX

    def trip(event):
        try:
            write(pipe_fd, b"trip " + event.encode("ascii", "replace")[:80])
        finally:
            exit_(TRIP_EXIT)

    def hook(event, args):
        if event in ("exec", "compile", "os.listdir", "os.scandir"):
            return
        if event == "import":
            if str(args[0]).partition(".")[0] in _DENY_MODULES:
                trip(f"import {args[0]}")
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes or not isinstance(path, str):
                trip("open")
            real = os.path.realpath(path)
            if not any(real == root or real.startswith(root + os.sep) for root in read_roots):
                trip("open")
            return
        if event == "object.__getattr__":  # sympy reads __code__; frames are what is denied
            name = str(args[1]) if len(args) > 1 else ""
            if name.startswith("f_") or name.endswith("_frame"):
                trip("frame access")
            return
        if event in deny_exact or event.startswith(deny_prefix):
            trip(event)

    return hook


def _guard_wrote(text):
    """Whether ``text`` is an event name :func:`_guard` reports."""
    if text in ("open", "frame access") or text in _DENY_EXACT:
        return True
    if text.startswith("import "):
        module = text[len("import "):]
        return module.replace(".", "").replace("_", "").isalnum() and \
            module.partition(".")[0] in _DENY_MODULES and len(module) <= 60
    return text.startswith(_DENY_PREFIX) and len(text) <= 60 and \
        text.replace(".", "").replace("_", "").isalnum()


def _stand_in_packages(module, site_dirs):
    """Make the parent packages of ``module`` importable without running their ``__init__``."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name in sys.modules:
            continue
        for site in site_dirs:
            path = os.path.join(site, *parts[:i])
            if os.path.isdir(path):
                package = types.ModuleType(name)
                package.__path__ = [path]
                sys.modules[name] = package
                break


def _child(dataset, answer, entry, pipe_fd, nonce, limits):
    """Score one answer in this (forked) process; never returns."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.closerange(3, pipe_fd)
        os.closerange(pipe_fd + 1, 1 << 16)
        cpu = int(limits["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        with open("/proc/self/statm") as f:
            vsize = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        memory = vsize + int(limits["memory_bytes"])
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        if hard != resource.RLIM_INFINITY:
            memory = min(memory, hard)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        sys.addaudithook(_guard(tuple(limits["read_roots"]), pipe_fd))
        message = f"{nonce} ok {float(dataset.score_answer(answer, entry))!r}"
    except MemoryError:
        message = f"{nonce} memory"
    except BaseException as e:  # the scorer's failure on this answer, reported by type only
        message = f"{nonce} error {type(e).__name__}"
    try:
        os.write(pipe_fd, message.encode())
    finally:
        os._exit(0)


def _read_until(fd, deadline):
    """Everything written on ``fd`` until EOF or ``deadline`` (None: EOF not seen)."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                return data
            data = (data + chunk)[:4096]


def _reap(pid, deadline):
    """``(wait status, killed)`` of child ``pid``, SIGKILLed if alive at ``deadline``."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1], True
        time.sleep(0.002)


def score_one(dataset, answer, entry, limits):
    """``[kind, value]`` for one answer, scored in a child process (module docs)."""
    nonce = os.urandom(16).hex()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(dataset, answer, entry, write_fd, nonce, limits)
    os.close(write_fd)
    deadline = time.monotonic() + float(limits["wall_s"])
    try:
        data = _read_until(read_fd, deadline)
    finally:
        os.close(read_fd)
    # the child may close its pipe and linger: it is killed at the same deadline
    status, killed = _reap(pid, deadline if data is not None else 0.0)
    if data is None:
        return ["timeout", None]
    text = data.decode("ascii", "replace")
    head, _, rest = text.partition(" ")
    if head == nonce:
        kind, _, value = rest.partition(" ")
        if kind == "ok":
            return ["ok", float(value)]
        if kind == "memory":
            return ["memory", None]
        if kind == "error":
            return ["error", value[:60]]
    if killed or (os.WIFSIGNALED(status) and
                  os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL)):
        return ["timeout", None]
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == TRIP_EXIT:
        # the event name is the guard's, but the child could have written anything there:
        # only a name the guard can write is passed on
        return ["trip", rest if head == "trip" and _guard_wrote(rest) else "?"]
    return ["crash", os.waitstatus_to_exitcode(status)]


def main(batch):
    """Score ``batch["items"]`` (``[answer, entry]`` pairs) with dataset ``batch["dataset"]``
    (options ``batch["config"]``, defined in module ``batch["module"]``). Returns one
    ``[kind, value]`` per item (module docs)."""
    site_dirs = list(batch["site_dirs"])
    sys.path[:0] = site_dirs
    _stand_in_packages(batch["module"], site_dirs)
    try:
        importlib.import_module(batch["module"])
    except ImportError:  # a module that needs its packages' __init__ (e.g. a circular import)
        for name in [m for m in sys.modules if m.partition(".")[0] == "reasoning_gym"]:
            del sys.modules[name]
        importlib.import_module("reasoning_gym")
        importlib.import_module(batch["module"])
    factory = importlib.import_module("reasoning_gym.factory")
    dataset = factory.create_dataset(batch["dataset"], **batch["config"], seed=0, size=1)
    limits = dict(batch["limits"])
    limits["read_roots"] = [os.path.realpath(p) for p in
                            site_dirs + [sys.prefix, sys.base_prefix, sys.exec_prefix]]
    return [score_one(dataset, answer, entry, limits) for answer, entry in batch["items"]]

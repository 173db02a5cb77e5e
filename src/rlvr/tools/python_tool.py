"""The ``python`` tool: run the model's code in the sandbox and show what it printed.

The code runs in :mod:`rlvr.sandbox` (never in this process): no network, its own namespaces,
a CPU-time budget, a wall-clock backstop, memory, process and output limits (docs/guides/
code-sandbox.md). Each call is a fresh program (nothing carries over between calls: define what you
use in the same call). Like a notebook cell, the value of a last line that is an expression
is printed (``123 * 456`` shows ``56088``) unless it is None. A fenced block inside the call
(```` ```python ... ``` ````) is unwrapped first.

The observation is the program's output (stdout and stderr, in order), then on an exception
the traceback restricted to the model's own code, its last line ``Type: message``; cut to
the call's ``output_bytes`` keeping the head of the output and the tail of the traceback, with
a marker naming the bytes cut. A program that prints nothing shows ``(no output)``.

Limits from the call's bound (:func:`rlvr.tools.current_limits`): the sandbox's CPU budget and
wall backstop are both ``timeout_s`` (so the sandbox stops the program about when the runner
stops waiting), captured output at most 16 times ``output_bytes`` (past it the program is
stopped); memory and the rest are the sandbox defaults (:class:`rlvr.sandbox.SandboxLimits`).
"""

from __future__ import annotations

import secrets

from rlvr.rewards.code_extract import extract_code
from rlvr.sandbox import SandboxJob, SandboxLimits, SandboxResult, SandboxStatus, default_pool
from rlvr.tools.output import bound_text
from rlvr.tools.registry import register_tool
from rlvr.tools.runner import current_limits
from rlvr.tools.types import MIN_OUTPUT_BYTES, ToolError, ToolTimeout

#: How much more output than ``output_bytes`` the sandbox captures before it stops a program.
CAPTURE_FACTOR = 16
_MIN_CAPTURE = 16 << 10

# Runs inside the sandbox as the program. The model's code is a string literal in it; the
# nonce marks where its output ends and the traceback begins.
_WRAPPER = '''\
import ast as _ast, linecache as _lc, sys as _sys, traceback as _tb
def _rlvr_run(src, marker):
    _lc.cache["<tool>"] = (len(src), None, src.splitlines(True), "<tool>")
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        tree = compile(src, "<tool>", "exec", _ast.PyCF_ONLY_AST)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], _ast.Expr) else None
        exec(compile(tree, "<tool>", "exec"), scope)
        if last is not None:
            value = eval(compile(_ast.Expression(last.value), "<tool>", "eval"), scope)
            if value is not None:
                print(repr(value))
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _sys.stdout.flush()
            print(marker + "SystemExit: " + str(exc.code), flush=True)
    except BaseException as exc:
        te = _tb.TracebackException.from_exception(exc)
        te.stack = _tb.StackSummary.from_list([f for f in te.stack if f.filename == "<tool>"])
        _sys.stdout.flush()
        _sys.stderr.flush()
        print(marker + "".join(te.format()), end="", flush=True)
_rlvr_run(%r, %r)
'''


def program(code: str, marker: str) -> str:
    """The sandbox program that runs ``code`` (see the module doc) and prints ``marker``
    before its traceback, if any."""
    return _WRAPPER % (code, marker)


def _code(text: str) -> str:
    found = extract_code(text)
    return found.code if found.method in ("fenced", "fenced_untagged") else text


def observation(result: SandboxResult, marker: str, output_bytes: int) -> tuple[str, bool]:
    """The observation of one sandbox run of :func:`program`: ``(text, failed)``, the text at
    most ``output_bytes`` bytes; ``failed`` when the program raised or a limit stopped it."""
    out, _, error = result.output.partition(marker)
    status = result.status
    if status is not SandboxStatus.ok:
        error = error or _limit_message(result)
    if not error:
        out = out.rstrip("\n")
        return bound_text(out if out.strip() else "(no output)", output_bytes)[0], False
    budget = output_bytes // 2 if out.strip() else output_bytes
    tail = bound_text(error.rstrip("\n"), max(budget, MIN_OUTPUT_BYTES), keep="tail")[0]
    out = out.rstrip("\n")
    room = output_bytes - len(tail.encode()) - 1
    head = bound_text(out, room)[0] if out.strip() and room >= MIN_OUTPUT_BYTES else ""
    return (f"{head}\n{tail}" if head else tail), True


def _limit_message(result: SandboxResult) -> str:
    S = SandboxStatus
    if result.status is S.timeout:
        return "TimeoutError: the program was stopped at its time limit"
    if result.status is S.memory:
        return "MemoryError: the program was stopped at its memory limit"
    if result.status is S.output_limit:
        return (f"Error: the program was stopped: it printed more than "
                f"{len(result.output.encode())} bytes")
    if result.status is S.sandbox_error:
        return f"Error: the sandbox failed ({result.detail})"
    # runtime_error: the program left before the wrapper's end (os._exit, a fatal signal)
    return f"Error: the program exited before it finished (exit code {result.exit_code})"


@register_tool("python", description="runs a Python program in a sandbox and shows what it "
               "prints (the value of a last expression line too), e.g. print(2 ** 100)")
def python(code: str) -> str:
    """The ``python`` tool (see the module doc).

    Raises:
        ToolError: the program raised or was stopped by a limit; the message holds its
            output and the traceback (or the limit).
        ToolTimeout: the sandbox's time limit stopped it.
    """
    if not isinstance(code, str):
        raise ToolError(f"Error: python: code must be text, got {type(code).__name__}")
    limits = current_limits()
    marker = f"\n<rlvr-{secrets.token_hex(8)}>\n"
    bound = limits.timeout_s
    job = SandboxJob(program(_code(code), marker), limits=SandboxLimits(
        timeout_s=bound, wall_timeout_s=bound,
        max_output_bytes=max(CAPTURE_FACTOR * limits.output_bytes, _MIN_CAPTURE)))
    result = default_pool().run(job)
    text, failed = observation(result, marker, limits.output_bytes)
    if result.status is SandboxStatus.timeout:
        raise ToolTimeout(text)
    if failed:
        raise ToolError(text)
    return text

"""Code tasks: extract the program from a completion and grade it in the sandbox.

- Extraction (:func:`~rlvr.rewards.code_extract.extract_code`, in
  :mod:`rlvr.rewards.code_extract`): the last fenced python block by default; nothing found is
  scored ``unparsed``.
- Grading (:func:`grade_code`): tests are planned by :mod:`rlvr.sandbox.grading` (asserts
  become probes judged here on plain data; the rest runs in the sandbox's trusted supervisor)
  and the program runs in :mod:`rlvr.sandbox`. The untrusted code never runs in this process.
- The verifier ``code`` maps the sandbox status to a :class:`~rlvr.rewards.types.Verdict`:
  ``ok`` -> correct; ``wrong_answer`` / ``runtime_error`` / ``memory`` / ``output_limit`` ->
  wrong; ``timeout`` -> timeout; ``sandbox_error`` -> error (not the policy's fault). The
  detail reads ``sandbox=<status> tier=<tier> passed=<i>/<n> ...`` (see :func:`parse_detail`).
- Reward: all tests pass = 1.0 else 0.0 (default); with the option ``partial_credit=True``
  (``RewardConfig(verifier_options={"code": {"partial_credit": True}})``) the verdict's
  ``score`` is the passed fraction of the tests instead (0.0 when nothing ran or the run
  timed out / hit a limit before reporting).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, replace

from rlvr.rewards.code_extract import PYTHON_TAGS, extract_code, fenced_blocks, parse_python, parses
from rlvr.rewards.code_reference import reference_problem
from rlvr.rewards.registry import register_format_rule, register_verifier
from rlvr.rewards.types import Status, Verdict
from rlvr.sandbox import SandboxLimits, SandboxPool, SandboxStatus, default_pool
from rlvr.sandbox.grading import (
    GradeResult,
    TestPlan,
    build_job,
    grade,
    plan_assert_tests,
    plan_check_function,
)


@register_format_rule("code_block")
def code_block_format(completion: str, **options) -> float:
    """1.0 if the completion holds a closed, non-empty, parsable ```` ```python ```` block."""
    for b in fenced_blocks(completion):
        if b.closed and b.lang in PYTHON_TAGS and b.code.strip() and parses(b.code):
            return 1.0
    return 0.0


# ------------------------------------------------------------------------------------ grading


def _plan(reference: dict) -> TestPlan:
    entry = reference.get("entry_point")
    entry = entry if isinstance(entry, str) else None
    if reference.get("tests") is not None:
        tests = reference["tests"]
        if isinstance(tests, str):
            tests = [tests]
        return plan_assert_tests(list(tests), setup_code=reference.get("setup_code") or "",
                                 entry_point=entry)
    if reference.get("test") is not None:
        return plan_check_function(str(reference["test"]), prelude=reference.get("prompt") or "",
                                   entry_point=entry)
    raise ValueError("code reference needs 'tests' (list of asserts) or 'test' (check source)")


def _hoist_future(program: str) -> str:
    """``program`` with its ``from __future__`` imports moved to the top when some of them
    are not there (the prompt put before a completion that starts with one, or blocks joined):
    Python accepts them only before any other statement but the module docstring."""
    if "__future__" not in program:
        return program
    try:
        tree = parse_python(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return program
    futures = [
        n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"
    ]
    head = tree.body
    if head and isinstance(head[0], ast.Expr) and isinstance(head[0].value, ast.Constant):
        if isinstance(head[0].value.value, str):
            head = head[1:]  # the module docstring may come first
    leading = 0
    while leading < len(head) and head[leading] in futures:
        leading += 1
    if len(futures) == leading:
        return program
    # Each import becomes ``pass`` where it was (the statement may share its line), and the
    # imports go first. Offsets are in UTF-8 bytes, as ast gives them.
    lines = [line.encode("utf-8") for line in program.splitlines(keepends=True)]
    for n in reversed(futures):
        a, b = n.lineno - 1, n.end_lineno - 1
        lines[a : b + 1] = [lines[a][: n.col_offset] + b"pass" + lines[b][n.end_col_offset :]]
    hoisted = "".join(ast.unparse(n) + "\n" for n in futures)
    return hoisted + b"".join(lines).decode("utf-8")


def _program(code: str, reference: dict) -> str:
    prompt = reference.get("prompt")
    if prompt:
        # The prompt's stubs and helpers come first; a full definition in the completion then
        # replaces the stub, and a bare body completes the prompt's last function.
        sep = "" if prompt.endswith("\n") else "\n"
        return _hoist_future(prompt + sep + code)
    if not parses(code) and parses(textwrap.dedent(code)):
        return _hoist_future(textwrap.dedent(code))
    return _hoist_future(code)


def _limits(options: dict) -> SandboxLimits:
    lim = options.get("limits")
    if lim is None:
        lim = SandboxLimits()
    kw = {}
    for key in ("timeout_s", "memory_bytes", "max_output_bytes", "wall_factor", "wall_timeout_s"):
        if key in options and options[key] is not None:
            kw[key] = options[key]
    if "timeout" in options and options["timeout"] is not None:
        kw["timeout_s"] = float(options["timeout"])
    if kw:
        lim = replace(lim, **kw)
    return lim


@dataclass(frozen=True)
class CodeGrade:
    """Outcome of :func:`grade_code`: the verdict plus the full grading record.

    Attributes:
        verdict: what the ``code`` verifier returns.
        grade: the :class:`~rlvr.sandbox.grading.GradeResult` (``None`` when no program was
            run: unparsed completion or unusable reference).
    """

    verdict: Verdict
    grade: GradeResult | None = None

    @property
    def fraction(self) -> float:
        """Passed fraction of the tests (the optional partial-credit reward)."""
        return self.grade.fraction if self.grade is not None else 0.0


_STATUS_MAP = {
    SandboxStatus.ok: Status.correct,
    SandboxStatus.wrong_answer: Status.wrong,
    SandboxStatus.runtime_error: Status.wrong,
    SandboxStatus.memory: Status.wrong,
    SandboxStatus.output_limit: Status.wrong,
    SandboxStatus.timeout: Status.timeout,
    SandboxStatus.sandbox_error: Status.error,
}


def grade_code(completion: str, reference: dict, **options) -> CodeGrade:
    """Extract, run and grade a completion.

    Args:
        completion: the model output.
        reference: ``{"entry_point", "tests": [...], "setup_code"?}`` (MBPP style) or
            ``{"entry_point", "test": "<check source>", "prompt"?}`` (HumanEval style).
        **options: ``partial_credit`` (bool, default False: when True the verdict's ``score``
            is the passed fraction of the tests), ``block`` ("last"/"first"),
            ``timeout`` / ``timeout_s`` (CPU seconds: the sandbox's CPU-time budget),
            ``wall_factor`` / ``wall_timeout_s`` (wall backstop of a program using no CPU:
            x budget, default 2, or seconds), ``memory_bytes``, ``max_output_bytes``, ``limits``
            (a :class:`~rlvr.sandbox.SandboxLimits`), ``env`` (extra environment variables for
            the program), ``pool`` (a :class:`~rlvr.sandbox.SandboxPool`, default: the process's).

    Never raises for anything the completion does; a malformed reference gives an ``error``
    verdict.
    """
    partial = bool(options.get("partial_credit", False))
    ref = reference if isinstance(reference, dict) else {}  # a bad reference is reported below
    ext = extract_code(completion, options.get("block", "last"),
                       entry_point=ref.get("entry_point"), prompt=ref.get("prompt"))
    if ext.code is None:
        return CodeGrade(Verdict(Status.unparsed, None, ext.method, ext.detail,
                                 score=0.0 if partial else None))
    problem = reference_problem(reference)
    if problem is not None:
        field, message = problem
        where = f"field '{field}': " if field else ""
        return CodeGrade(Verdict(Status.error, ext.code, ext.method,
                                 f"bad reference: {where}{message}"))
    try:
        plan = _plan(reference)
        if plan.total == 0:
            raise ValueError("code reference has no tests")
    except ValueError as e:
        return CodeGrade(Verdict(Status.error, ext.code, ext.method, f"bad reference: {e}"))
    job = build_job(
        _program(ext.code, reference),
        plan,
        entry_point=reference.get("entry_point"),
        setup_code=reference.get("setup_code") or "",
        limits=_limits(options),
        env=options.get("env"),
        check_prelude=reference.get("prompt") or "",
    )
    pool: SandboxPool = options.get("pool") or default_pool()
    try:
        g = grade(pool.run(job), plan)
    except Exception as e:  # pragma: no cover - a bug of ours: the sandbox layer never raises
        # Nothing the program sends may raise here (decoding and judging are total); should
        # something still escape, report it instead of crashing the caller's batch.
        return CodeGrade(Verdict(Status.error, ext.code, ext.method,
                                 f"grader error: {type(e).__name__}: {e}"[:300]))
    reason = g.run.detail if g.status is not SandboxStatus.wrong_answer else "tests failed"
    detail = (
        f"sandbox={g.status.value} tier={g.tier.value} passed={g.passed}/{g.total} "
        f"cpu={g.run.cpu_s:.2f}s wall={g.run.wall_s:.2f}s reason={reason}"
    )
    status = _STATUS_MAP[g.status]
    # Partial credit never applies to infrastructure failures (``error``): those samples are
    # excluded from the group statistics, so their score must not look like a policy outcome.
    score = g.fraction if partial and status is not Status.error else None
    return CodeGrade(Verdict(status, ext.code, ext.method, detail, score=score), g)


@register_verifier("code", format_rule="code_block")
def verify_code(completion: str, reference: dict, **options) -> Verdict:
    """The ``code`` verifier: see :func:`grade_code` for arguments. Thread- and fork-safe."""
    return grade_code(completion, reference, **options).verdict


def parse_detail(detail: str) -> dict[str, str]:
    """The ``key=value`` fields of a code verdict's detail (``sandbox``, ``tier``,
    ``passed``...)."""
    out = {}
    for part in detail.split(" "):
        key, eq, value = part.partition("=")
        if eq and key in ("sandbox", "tier", "passed", "wall"):
            out[key] = value
    return out

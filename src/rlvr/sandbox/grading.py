"""The grading protocol for function-call tests (MBPP asserts, HumanEval ``check``).

Tests are planned on the host before anything runs:

- An assert of the form ``assert <expr> == <literal>`` (also ``!=``, ``is True/False/None``,
  ``assert f(x)``, ``assert not f(x)``) becomes a **probe**: only ``<expr>`` is sent into the
  sandbox, its value comes back as plain data (:mod:`rlvr.sandbox.codec`) and is compared here,
  in the grader. The expected value never enters the sandbox, and a value whose ``__eq__``
  lies cannot come back (only builtin data types are ever decoded). ``assert f(x)`` and
  ``assert not f(x)`` send the same ``not not (f(x))``: its truth value, whatever the type.
- Anything else (``abs(f(x) - y) < 1e-6``, loops, HumanEval checks with helpers) becomes an
  **in-sandbox check** run by the sandbox's trusted supervisor process, which reaches the
  program only through remote calls that exchange plain data and references (see
  ``remote.py``): a callable or iterator the check passes is a callback the candidate calls
  back; an object of the program (an instance of its class, a closure) stays in the candidate
  as a handle whose attributes, methods and dunders are remote calls, and which never equals
  plain data (a lying ``__eq__`` is never reached); arguments the call changed in place are
  written back into the check's objects.

A run passes only if the supervisor's record (authenticated with the run's secret nonce) says the
program ran to the end and every test passed: exiting early, crashing after a correct
definition, patching the harness or printing fake result lines all score 0.
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass, field
from typing import Any

from rlvr.sandbox.types import (
    InSandboxCheck,
    SandboxJob,
    SandboxLimits,
    SandboxResult,
    SandboxStatus,
)

_MISSING = object()


@dataclass(frozen=True)
class PlannedTest:
    """One test, as planned.

    Attributes:
        source: the original test text.
        mode: ``probe`` (compared here), ``check`` (runs in the sandbox supervisor) or
            ``const`` (no program involved; ``expected`` holds the outcome).
        index: position in the job's probes or checks.
        op: for probes: ``eq``, ``ne``, ``is``, ``is_not``, ``truthy`` or ``falsy``.
        expected: the hidden expected value (probes) or the constant outcome (``const``).
    """

    source: str
    mode: str
    index: int = -1
    op: str = "eq"
    expected: Any = None


@dataclass(frozen=True)
class TestPlan:
    """How a test suite will be run: probes and in-sandbox checks, plus the bookkeeping."""

    tests: tuple[PlannedTest, ...]
    probes: tuple[str, ...] = ()
    checks: tuple[InSandboxCheck, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Number of tests (a HumanEval ``check`` that cannot be split counts as one)."""
        return len(self.tests)


@dataclass(frozen=True)
class GradeResult:
    """Graded outcome of one program.

    Attributes:
        status: final status (``ok`` iff every test passed).
        tier: isolation tier of the run.
        passed: tests passed; total: tests in the plan.
        run: the raw :class:`SandboxResult`.
        failures: one short line per failed test (for reports; may show expected values, so
            never feed it back to a policy).
    """

    status: SandboxStatus
    passed: int
    total: int
    run: SandboxResult
    failures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tier(self):
        return self.run.tier

    @property
    def fraction(self) -> float:
        """Passed fraction in [0, 1] (0 when the tests did not run)."""
        return self.passed / self.total if self.total else 0.0


# ------------------------------------------------------------------------------------ planning


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


class _ProgramNames:
    """Which names a probe may call in the candidate: the program's own functions.

    Not a builtin (unless it is the entry point, e.g. an MBPP task's own ``sum``), not a name
    the trusted setup code or prompt binds, not a standard-library module: those are trusted
    code, and trusted code never runs in the candidate, where the program can replace it
    (a fake ``math`` in ``sys.modules``, a patched ``builtins``, a trace hook rebinding names).
    """

    def __init__(self, trusted_source: str = "", entry_point: str | None = None) -> None:
        self.entry_point = entry_point
        self.trusted = _bound_names(trusted_source)

    def __call__(self, name: str) -> bool:
        if name == self.entry_point:
            return True
        return not (
            hasattr(builtins, name) or name in self.trusted or name in sys.stdlib_module_names
        )


def _bound_names(source: str) -> frozenset[str]:
    """Every name ``source`` binds anywhere (assignments, definitions, imports, arguments);
    unparsable source binds nothing (its tests then fail on their own)."""
    if not source.strip():
        return frozenset()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return frozenset()
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).partition(".")[0] for a in n.names}
        elif isinstance(n, ast.arg):
            out.add(n.arg)
    return frozenset(out)


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


def _pure(node: ast.AST, prog: _ProgramNames) -> bool:
    """Whether evaluating ``node`` in the candidate runs no trusted code on the program's
    output: the only calls are of program functions, and values the program returned meet no
    operator, comparison or trusted function there (an operand such as ``f(x) - 3.14`` would
    hand test data to the program's ``__sub__``). Arguments, indices and operators on test
    data alone (``f(3 * 19)``, ``f(root)``) are inputs: the program may see them."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and prog(node.func.id)
            and all(_pure(a, prog) for a in node.args)
            and all(_pure(k.value, prog) for k in node.keywords)
        )
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return not _calls(node)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_pure(e, prog) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_pure(x, prog) for x in node.keys + node.values if x is not None)
    if isinstance(node, ast.Starred):
        return _pure(node.value, prog)
    if isinstance(node, ast.Attribute):
        return _pure(node.value, prog)
    if isinstance(node, ast.Subscript):
        return _pure(node.value, prog) and not _calls(node.slice) and _pure(node.slice, prog)
    if isinstance(node, ast.Slice):
        return all(x is None or not _calls(x) for x in (node.lower, node.upper, node.step))
    return False


def _direct_call(node: ast.AST, prog: _ProgramNames) -> bool:
    # A direct call of a program function: its value is exactly what the program returns, so
    # judging its truthiness here gives the program no extra power.
    return isinstance(node, ast.Call) and _pure(node, prog)


def _convert(stmt: ast.Assert, src: str, prog: _ProgramNames) -> tuple[str, str, Any] | None:
    """(op, probe source, expected) for a convertible assert, else None.

    Convertible: one side a literal (the hidden expected value), the other a pure expression
    (:func:`_pure`) whose value the candidate computes; or a truth test of a program call.
    """
    t = stmt.test

    def seg(node):
        return ast.get_source_segment(src, node) or ast.unparse(node)

    if isinstance(t, ast.Compare) and len(t.ops) == 1:
        left, right, op = t.left, t.comparators[0], t.ops[0]
        lv, rv = _literal(left), _literal(right)
        if isinstance(op, (ast.Eq, ast.NotEq)):
            name = "eq" if isinstance(op, ast.Eq) else "ne"
            if rv is not _MISSING and lv is _MISSING and _pure(left, prog):
                return name, seg(left), rv
            if lv is not _MISSING and rv is _MISSING and _pure(right, prog):
                return name, seg(right), lv
        if isinstance(op, (ast.Is, ast.IsNot)) and rv is not _MISSING and lv is _MISSING:
            if (rv is None or rv is True or rv is False) and _pure(left, prog):
                return ("is" if isinstance(op, ast.Is) else "is_not"), seg(left), rv
        return None
    # Truthiness tests probe the truth value, not the value: ``re.search`` and friends return
    # objects the codec cannot carry. ``not not`` is an operator (no name the program could
    # shadow) and always yields a real bool. Both ops send the same probe, so the sandbox cannot
    # tell whether a truthy or a falsy answer is expected; there is no expected value to hide.
    if _direct_call(t, prog):
        return "truthy", f"not not ({seg(t)})", None
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and _direct_call(t.operand, prog):
        return "falsy", f"not not ({seg(t.operand)})", None
    return None


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


class _Planner:
    def __init__(self) -> None:
        self.tests: list[PlannedTest] = []
        self.probes: list[str] = []
        self.checks: list[InSandboxCheck] = []
        self.names: set[str] = set()

    def probe(self, source, op, probe_src, expected):
        self.tests.append(PlannedTest(source, "probe", len(self.probes), op, expected))
        self.probes.append(probe_src)

    def check(self, source, kind="stmt", tree=None):
        self.tests.append(PlannedTest(source, "check", len(self.checks)))
        self.checks.append(InSandboxCheck(source, kind))
        if tree is not None:
            self.names |= _names(tree)

    def plan(self) -> TestPlan:
        return TestPlan(
            tuple(self.tests), tuple(self.probes), tuple(self.checks), tuple(sorted(self.names))
        )


def plan_assert_tests(
    tests: list[str], *, setup_code: str = "", entry_point: str | None = None
) -> TestPlan:
    """Plan MBPP-style tests: one ``assert ...`` statement per string.

    ``setup_code``: the trusted code the tests run after (its names are never called in the
    candidate, see :class:`_ProgramNames`); ``entry_point``: the function under test.
    Unparsable test text becomes an in-sandbox check (which then fails with SyntaxError).
    """
    p = _Planner()
    prog = _ProgramNames(setup_code, entry_point)
    for text in tests:
        src = text.strip()
        try:
            tree = ast.parse(src)
        except SyntaxError:
            p.check(src)
            continue
        body = tree.body
        conv = None
        if len(body) == 1 and isinstance(body[0], ast.Assert):
            if _literal(body[0].test) is not _MISSING:
                p.tests.append(PlannedTest(src, "const", expected=bool(_literal(body[0].test))))
                continue
            conv = _convert(body[0], src, prog)
        if conv is not None:
            p.probe(src, conv[0], conv[1], conv[2])
        else:
            p.check(src, "stmt", tree)
    return p.plan()


def plan_check_function(
    test_source: str, *, prelude: str = "", entry_point: str | None = None
) -> TestPlan:
    """Plan a HumanEval-style test: source defining ``check(candidate)``.

    When ``check`` is only convertible asserts (plus docstrings / ``pass``) and the rest of the
    source is only literal assignments (``METADATA = {...}``), each assert becomes a probe with
    ``candidate`` bound to the entry point. Otherwise the whole source runs as one in-sandbox
    check. ``prelude``: the trusted prompt (its helpers are never called in the candidate);
    ``entry_point``: the function under test.
    """
    p = _Planner()
    prog = _ProgramNames(prelude, entry_point)
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        p.check(test_source, "check")
        return p.plan()
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    others = [n for n in tree.body if not (fn and n is fn[0])]
    simple_module = bool(fn) and all(
        isinstance(n, ast.Assign) and _literal(n.value) is not _MISSING
        or isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        for n in others
    )
    converted: list[tuple] = []
    if simple_module:
        for stmt in fn[0].body:
            if isinstance(stmt, ast.Pass) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            ):
                continue
            if not isinstance(stmt, ast.Assert):
                converted = []
                break
            text = ast.get_source_segment(test_source, stmt) or ast.unparse(stmt)
            if _literal(stmt.test) is not _MISSING:
                converted.append(("const", text, bool(_literal(stmt.test))))
                continue
            conv = _convert(stmt, test_source, prog)
            if conv is None:
                converted = []
                break
            converted.append(("probe", text, conv))
    if not converted:
        p.check(test_source, "check", tree)
        return p.plan()
    for kind, text, conv in converted:
        if kind == "const":
            p.tests.append(PlannedTest(text, "const", expected=conv))
        else:
            p.probe(text, conv[0], conv[1], conv[2])
    return p.plan()


def build_job(
    program: str,
    plan: TestPlan,
    *,
    entry_point: str | None,
    setup_code: str = "",
    limits: SandboxLimits | None = None,
    env: dict[str, str] | None = None,
    check_prelude: str = "",
) -> SandboxJob:
    """The :class:`SandboxJob` that runs ``program`` against ``plan`` (no expected values in it).

    ``check_prelude``: trusted source (a HumanEval prompt) whose definitions the in-sandbox
    checks use instead of the program's (see :class:`SandboxJob`). ``setup_code`` runs in the
    candidate (for the probes) and, with checks, in the supervisor too (for them).
    """
    names = set(plan.names)
    if entry_point:
        names.add(entry_point)
    if plan.checks and setup_code:
        try:
            names |= _names(ast.parse(setup_code))  # e.g. a program class the setup uses
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            pass  # the setup then fails in both processes
    return SandboxJob(
        program=program,
        entry_point=entry_point,
        setup_code=setup_code or "",
        probes=plan.probes,
        checks=plan.checks,
        names=tuple(sorted(names)) if plan.checks else (),
        check_prelude=(check_prelude or "") if plan.checks else "",
        env=dict(env or {}),
        limits=limits or SandboxLimits(),
    )


# ------------------------------------------------------------------------------------- judging


def _judge_probe(test: PlannedTest, value: Any) -> bool:
    # ``value`` was built by codec.decode from builtin types only, so these comparisons run
    # no code chosen by the program.
    try:
        if test.op == "eq":
            return bool(value == test.expected)
        if test.op == "ne":
            return bool(value != test.expected)
        if test.op == "is":
            return value is test.expected
        if test.op == "is_not":
            return value is not test.expected
        if test.op == "truthy":
            return bool(value)
        if test.op == "falsy":
            return not value
    except Exception:  # RecursionError, decimal.InvalidOperation, ...: the test fails
        return False
    return False


def _short(x: Any, n: int = 80) -> str:
    try:
        r = repr(x)  # may raise: e.g. ValueError for an int of more than 4300 digits
    except Exception:
        r = f"<{type(x).__name__}>"
    return r if len(r) <= n else r[: n - 3] + "..."


def grade(run: SandboxResult, plan: TestPlan) -> GradeResult:
    """Judge a finished run against the plan's hidden expectations.

    The status is ``ok`` only if the run itself completed (``ok`` / ``wrong_answer`` from the
    sandbox) and every planned test passed; otherwise the run's own status is kept (timeout,
    memory, ...), or ``wrong_answer`` when some test failed.
    """
    if run.status not in (SandboxStatus.ok, SandboxStatus.wrong_answer):
        return GradeResult(run.status, 0, plan.total, run, (run.detail,))
    if len(run.probes) != len(plan.probes) or len(run.checks) != len(plan.checks):
        return GradeResult(SandboxStatus.wrong_answer, 0, plan.total, run, ("malformed results",))
    passed = 0
    failures = []
    for i, t in enumerate(plan.tests):
        if t.mode == "const":
            ok, why = bool(t.expected), "constant assert is false"
        elif t.mode == "probe":
            out = run.probes[t.index]
            if not out.ok:
                ok, why = False, f"raised {out.error}"
            else:
                ok = _judge_probe(t, out.value)
                why = f"got {_short(out.value)}, {t.op} {_short(t.expected)}"
        else:
            out = run.checks[t.index]
            ok, why = out.ok, out.error
        if ok:
            passed += 1
        else:
            failures.append(f"test {i}: {why}")
    status = SandboxStatus.ok if passed == plan.total else SandboxStatus.wrong_answer
    return GradeResult(status, passed, plan.total, run, tuple(failures))

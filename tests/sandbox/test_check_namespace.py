"""Checks read nothing the program can change, on the sanitized-MBPP tasks whose tests compare
through a module: the 13 whose asserts call ``math.isclose`` (``test_imports``: ``import math``)
and mbpp/596 (``tuple_size(t) == sys.getsizeof(t)``, ``sys`` imported by the program only).

Each task's reference solution scores 1; a function returning a constant scores 0, also when
the program first replaces what the check reads: a fake ``math`` / ``sys`` in ``sys.modules``,
a namespace object bound under those names, ``math.isclose`` / ``sys.getsizeof`` patched,
``builtins.__import__`` patched, names rebound by a profile or trace hook or by walking
``gc.get_objects()`` and the stack at call time, a float subclass whose ``__eq__`` is always
True. None of these reaches the supervisor, where the checks run.
"""

from __future__ import annotations

import re

import pytest
from sandbox_test_helpers import shared_path

from rlvr.rewards.code import grade_code
from rlvr.sandbox import SandboxPool
from rlvr.tasks.code import load_mbpp

SANITIZED = shared_path("data", "mbpp", "sanitized-mbpp.json")
# Found by the rule in _tasks(), listed here so that a change of the data or the rule shows.
TASK_IDS = [82, 85, 98, 124, 137, 139, 163, 233, 246, 248, 276, 300, 312, 596]

_FAKES = """\
import sys, types
_true = lambda *a, **k: True
_zero = lambda *a, **k: 0
"""

# Program templates: ``{f}`` is the entry point; every function returns a wrong constant.
TAMPER = {
    "constant": "def {f}(*args, **kwargs):\n    return 0\n",
    "fake_sys_modules": _FAKES + """\
_m = types.ModuleType("math")
_m.isclose = _true
_m.pi = 3.0
_s = types.ModuleType("sys")
_s.getsizeof = _zero
sys.modules["math"] = _m
sys.modules["sys"] = _s
math = _m
def {f}(*args, **kwargs):
    return 0
""",
    "namespace_object": _FAKES + """\
_ns = types.SimpleNamespace(isclose=_true, getsizeof=_zero)
sys.modules["math"] = _ns
sys.modules["sys"] = _ns
math = sys = _ns
def {f}(*args, **kwargs):
    return 0
""",
    "patched_functions": _FAKES + """\
import math
math.isclose = _true
sys.getsizeof = _zero
def {f}(*args, **kwargs):
    return 0
""",
    "builtins_import": _FAKES + """\
import builtins
_ns = types.SimpleNamespace(isclose=_true, getsizeof=_zero)
_real = builtins.__import__
def _import(name, *a, **k):
    return _ns if name in ("math", "sys") else _real(name, *a, **k)
builtins.__import__ = _import
builtins.math = builtins.sys = builtins.isclose = _ns
def {f}(*args, **kwargs):
    return 0
""",
    "profile_hook": _FAKES + """\
_ns = types.SimpleNamespace(isclose=_true, getsizeof=_zero)
def _hook(frame, event, arg):
    for name in ("math", "sys", "isclose", "expected"):
        if name in frame.f_globals and frame.f_globals[name] is not _ns:
            frame.f_globals[name] = _ns
sys.setprofile(_hook)
def {f}(*args, **kwargs):
    return 0
""",
    "trace_hook": _FAKES + """\
import threading
_ns = types.SimpleNamespace(isclose=_true, getsizeof=_zero)
def _trace(frame, event, arg):
    for name in ("math", "sys", "isclose"):
        if name in frame.f_globals:
            frame.f_globals[name] = _ns
    return _trace
sys.settrace(_trace)
threading.settrace(_trace)
def {f}(*args, **kwargs):
    return 0
""",
    "gc_and_frames": _FAKES + """\
import gc
def {f}(*args, **kwargs):
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for name, fake in (("isclose", _true), ("getsizeof", _zero)):
                if name in obj:
                    obj[name] = fake
    frame = sys._getframe()
    while frame is not None:
        frame.f_globals["math"] = types.SimpleNamespace(isclose=_true)
        frame = frame.f_back
    return 0
""",
    "lying_float": """\
class _Liar(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__
    def __sub__(self, other):
        return _Liar(0)
    __rsub__ = __sub__
    def __abs__(self):
        return _Liar(0)
    @property
    def __class__(self):
        return type(None)
def {f}(*args, **kwargs):
    return _Liar(0)
""",
}


def _tasks():
    if not SANITIZED.exists():
        pytest.skip(f"{SANITIZED} not found (shared data absent)")
    found = []
    for task in load_mbpp(SANITIZED):
        tests = task.reference["tests"]
        if any("math.isclose" in t for t in tests) or task.metadata["task_id"] == 596:
            found.append(task)
    return found


@pytest.fixture(scope="module")
def tasks():
    found = _tasks()
    assert [t.metadata["task_id"] for t in found] == TASK_IDS
    return {t.metadata["task_id"]: t for t in found}


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=1) as p:
        yield p


def _fenced(code: str) -> str:
    return f"```python\n{code}```\n"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_reference_passes_and_tampering_fails(task_id, tasks, pool):
    task = tasks[task_id]
    ref = task.reference
    g = grade_code(task.solution, ref, pool=pool)
    assert g.verdict.outcome == 1.0, g.verdict.detail
    assert g.grade.total == len(ref["tests"]) == g.grade.passed
    # every test runs as a supervisor check (each compares through a module)
    assert len(g.grade.run.checks) == len(ref["tests"]) and not g.grade.run.probes
    # A constant may be right for a test or two (mbpp/137 expects 0.0 twice): tampering must not
    # pass one test more than the plain constant does (it may pass fewer: a hook that breaks
    # the candidate's own code ends the run before the tests).
    const_passed = None
    for kind, template in TAMPER.items():
        program = template.replace("{f}", ref["entry_point"])
        g = grade_code(_fenced(program), ref, pool=pool)
        assert g.verdict.outcome == 0.0, (kind, g.verdict.detail)
        assert g.grade is not None and g.grade.passed < g.grade.total, (kind, g.grade.failures)
        if const_passed is None:
            const_passed = g.grade.passed
        assert g.grade.passed <= const_passed, (kind, g.grade.failures)


def test_expected_values_never_reach_the_candidate(tasks, pool):
    # mbpp/312 expects 314.159265..., 1570.796326... and 6426.651371...: a program
    # searching its whole process at call time (the repr of every object the collector tracks,
    # the globals and locals of every frame) finds none of them. As a control, the same search
    # finds the setup code ("import math"), which the candidate does receive.
    task = tasks[312]
    expected = re.findall(r"(\d+)\.(\d{7})\d*", " ".join(task.reference["tests"]))
    assert len(expected) == 3
    parts = tuple((int(a), int(b)) for a, b in expected)  # no dotted number in the source
    program = _fenced("""\
import gc, sys
PARTS = %r
def volume_cone(r, h):
    needles = ["%%d.%%07d" %% p for p in PARTS] + ["import" + " math"]
    hits = []
    mine = (needles, hits)
    for obj in gc.get_objects():
        if obj is mine or any(obj is m for m in mine):
            continue
        try:
            text = repr(obj)
        except Exception:
            continue
        hits.extend(n for n in needles if n in text)
    frame = sys._getframe().f_back
    while frame is not None:
        text = repr(frame.f_locals) + repr(frame.f_globals)
        hits.extend(n for n in needles if n in text)
        frame = frame.f_back
    found = sorted(set(hits))
    print("EXPECTED", [n for n in found if n != needles[-1]], "CONTROL", needles[-1] in found,
          flush=True)
    return 0.0
""" % (parts,))
    g = grade_code(program, task.reference, pool=pool)
    assert g.verdict.outcome == 0.0
    assert "EXPECTED [] CONTROL True" in g.grade.run.output, g.grade.run.output[-500:]


def test_namespace_takes_only_program_functions_from_the_candidate():
    # The supervisor's namespace, built without a sandbox: the candidate's report ("names")
    # is whatever the program made it, and only its "func" entries for names the checks read
    # (and that no trusted source binds) are used, as remote functions.
    import math
    import sys

    from rlvr.sandbox import checks, remote_client

    client = object()  # no call is made while the namespace is built
    job = {
        "names": ["area", "math", "sys", "abs", "K", "helper", "poly", "this", "json"],
        "entry_point": "area",
        "check_prelude": "def poly(x):\n    return x + 1\n",
        "setup": "import math\nK = 2\ndef helper():\n    return 7\n",
    }
    report = {
        "area": {"k": "func"}, "math": {"k": "func"}, "sys": {"k": "module", "m": "os"},
        "abs": {"k": "func"}, "K": {"k": "value", "v": 5}, "helper": {"k": "func"},
        "poly": {"k": "func"}, "json": {"k": "value", "v": {"#": "h", "v": 1}},
    }
    ns, error = checks.namespace(job, {"names": report}, remote_client, client)
    assert error is None
    assert type(ns["area"]) is remote_client.Function and ns["area"]._name == "area"
    assert ns["math"] is math and ns["sys"] is sys  # the supervisor's own modules
    assert "abs" not in ns and ns["poly"](1) == 2 and ns["helper"]() == 7 and ns["K"] == 2
    assert "this" not in ns  # never imported (its import prints)
    assert ns["json"] is sys.modules["json"]  # a stdlib name read by a check: our own module
    # Without the setup's import, a program callable named math is a remote function, which
    # has no isclose: the check fails instead of using the program's.
    job = {"names": ["math", "area"], "entry_point": "area"}
    ns, error = checks.namespace(job, {"names": report}, remote_client, client)
    assert error is None and type(ns["math"]) is remote_client.Function
    with pytest.raises(AttributeError):
        ns["math"].isclose  # noqa: B018
    # A broken setup fails every check with its error.
    job = {"names": ["area"], "entry_point": "area", "setup": "x = undefined_name"}
    _, error = checks.namespace(job, {"names": report}, remote_client, client)
    assert error == "setup failed: NameError: name 'undefined_name' is not defined"

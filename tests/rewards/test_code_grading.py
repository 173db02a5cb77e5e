"""Grading protocol: test planning, judging on plain data, statuses, attacks on the protocol."""

from __future__ import annotations

import pytest

from rlvr.rewards.code import grade_code, parse_detail, verify_code
from rlvr.rewards.types import Status
from rlvr.sandbox import SandboxStatus, codec
from rlvr.sandbox.grading import plan_assert_tests, plan_check_function

ADD = {"entry_point": "add", "tests": ["assert add(1, 2) == 3", "assert add(-5, 5) == 0", "assert "
                                                                                          "add(10, "
                                                                                          "20) == "
                                                                                          "30"]}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


# ---------------------------------------------------------------------------- planning (pure)


def test_plan_converts_asserts_and_keeps_expected_out_of_the_job():
    plan = plan_assert_tests(["assert f(1) == (1, 2)", "assert 3 == f(2)", "assert f(3) != 4",
                              "assert f(4) is None", "assert g(5)", "assert not g(6)",
                              "assert abs(f(7) - 1.5) < 1e-6", "assert True"])
    modes = [t.mode for t in plan.tests]
    assert modes == ["probe"] * 6 + ["check", "const"]
    # truthiness tests send their truth value, in the same form for assert g() and assert not g()
    assert plan.probes == ("f(1)", "f(2)", "f(3)", "f(4)", "not not (g(5))", "not not (g(6))")
    assert [t.op for t in plan.tests[:6]] == ["eq", "eq", "ne", "is", "truthy", "falsy"]
    assert plan.tests[0].expected == (1, 2)
    assert "f" in plan.names and "abs" in plan.names


def test_plan_builtin_truthiness_is_not_judged_outside():
    # ``assert isinstance(f(1), int)`` would let the program shadow ``isinstance``: in-sandbox.
    assert plan_assert_tests(["assert isinstance(f(1), int)"]).tests[0].mode == "check"


def test_plan_probes_only_the_programs_own_output():
    # The candidate may evaluate only calls of program functions on test data: trusted code
    # (a builtin, a stdlib module, a name the setup binds) and operators or comparisons applied
    # to what the program returned run in the supervisor, where the program cannot replace them.
    setup = "from math import isclose\nimport math\nroot = [1, [2]]\ndef helper(x):\n    return x\n"
    tests = [
        "assert f(3 * 19, 'ab' + 'c') == 5",  # operators on test data alone: inputs
        "assert f(root) == 2",  # a setup value as an argument: an input
        "assert f(g(1))[0] == 2",  # a program call in an argument, an index of its result
        "assert sum(1, 2) == 3",  # the entry point shadows a builtin: the program's own
        "assert isclose(f(1), 2.0) is True",  # a setup import called on the program's output
        "assert math.isclose(f(1), 2.0) == True",  # a module attribute called
        "assert helper(f(1)) == 1",  # a setup helper
        "assert int(f(1)) == 3",  # a builtin
        "assert f(1) - 3.14 == 0",  # the literal would meet the program's __sub__
        "assert isclose(f(1), 2.0)",  # truthiness of a trusted call
        "assert f(root)",  # truthiness of a program call
    ]
    plan = plan_assert_tests(tests, setup_code=setup, entry_point="sum")
    modes = [t.mode for t in plan.tests]
    assert modes == ["probe"] * 4 + ["check"] * 6 + ["probe"]
    assert plan.probes == ("f(3 * 19, 'ab' + 'c')", "f(root)", "f(g(1))[0]", "sum(1, 2)",
                           "not not (f(root))")
    # without the entry point known, a builtin name is trusted code
    assert plan_assert_tests(["assert sum(1, 2) == 3"]).tests[0].mode == "check"
    # a prompt helper of a HumanEval check is trusted too
    src = "def check(candidate):\n    assert candidate(poly([1], 2)) == 1\n"
    assert plan_check_function(src, prelude="def poly(xs, x):\n    return 1\n").tests[0].mode \
        == "check"
    assert plan_check_function(src).tests[0].mode == "probe"


def test_plan_humaneval_check():
    src = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1) == 2\n    assert True\n"
    plan = plan_check_function(src)
    assert [t.mode for t in plan.tests] == ["probe", "const"] and plan.probes == ("candidate(1)",)
    loop = "def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
    plan = plan_check_function(loop)
    assert [t.mode for t in plan.tests] == ["check"]


def test_codec_round_trip_and_rejects_objects():
    for v in [1, -2**700, 1.5, float("inf"), "s", b"b", (1, [2, {3: (4,)}]), {1, 2}, frozenset({3}),
              None, True, 2j, {"a": [1]}]:
        assert codec.decode(codec.encode(v)) == v
        assert type(codec.decode(codec.encode(v))) is type(v)

    class Liar:
        def __eq__(self, other):
            return True

    with pytest.raises(codec.EncodeError):
        codec.encode(Liar())
    with pytest.raises(ValueError):
        codec.decode('{"#": "pickle", "v": "x"}')


# ----------------------------------------------------------------------- statuses (sandboxed)


@pytest.mark.parametrize(
    "code,status,sandbox",
    [
        ("def add(a, b):\n    return a + b", Status.correct, "ok"),
        ("def add(a, b):\n    return a - b", Status.wrong, "wrong_answer"),
        ("def add(a, b):\n    return a + b\nraise ValueError('after a correct definition')",
         Status.wrong, "runtime_error"),
        ("def add(a, b):\n    return a +", Status.wrong, "runtime_error"),
        ("def add(a, b):\n    return a + b\nx = bytearray(8 * 1024**3)", Status.wrong, "memory"),
        ("def add(a, b):\n    return a + b\nprint('A' * (2 << 20))", Status.wrong, "output_limit"),
        ("def add(a, b):\n    return a + b\nimport time\ntime.sleep(30)",
         Status.timeout, "timeout"),
    ],
    ids=["ok", "wrong_answer", "runtime_error", "syntax_error", "memory", "output_limit",
         "timeout"],
)
def test_statuses(code, status, sandbox):
    g = grade_code(fenced(code), ADD, timeout=1.5)
    assert g.verdict.status is status, g.verdict.detail
    d = parse_detail(g.verdict.detail)
    assert d["sandbox"] == sandbox and d["tier"] == g.grade.tier.value
    assert g.grade.status.value == sandbox


def test_unparsed_and_bad_reference():
    assert verify_code("no code here", ADD).status is Status.unparsed
    assert verify_code(fenced("x = 1"), {"entry_point": "f"}).status is Status.error
    assert verify_code(fenced("x = 1"), {"entry_point": "f", "tests": []}).status is Status.error


@pytest.mark.parametrize("partial", [False, True])
def test_sandbox_error_is_error(monkeypatch, partial):
    """The sandbox cannot be launched (bwrap / the interpreter does not start: OSError at
    launch): a correct program gets status ``error`` (infrastructure, not the policy's fault),
    never a score, with or without partial credit."""
    import rlvr.sandbox.pool as sandbox_pool

    def launch_fails(job, **kwargs):
        raise OSError("simulated: bwrap could not start")

    monkeypatch.setattr(sandbox_pool, "launch", launch_fails)
    pool = _no_prestart()  # no pre-started sandbox: the job goes through the launcher
    try:
        g = grade_code(fenced("def add(a, b):\n    return a + b"), ADD, pool=pool,
                       partial_credit=partial)
    finally:
        pool.close()
    assert g.verdict.status is Status.error
    assert g.grade.status is SandboxStatus.sandbox_error and g.grade.passed == 0
    assert parse_detail(g.verdict.detail)["sandbox"] == "sandbox_error"
    assert "launch failed: simulated: bwrap could not start" in g.verdict.detail
    assert g.verdict.score is None and g.verdict.outcome == 0.0


def _no_prestart():
    from rlvr.sandbox import SandboxPool

    return SandboxPool(workers=1, prestart=False)


def test_partial_fraction():
    g = grade_code(fenced("def add(a, b):\n    return 3"), ADD)
    assert g.grade.passed == 1 and g.grade.total == 3 and g.fraction == pytest.approx(1 / 3)


# ------------------------------------------------------------------- attacks on the protocol

ATTACKS = {
    "exit0_early": "def add(a, b):\n    return 0\nimport sys\nsys.exit(0)",
    "os_exit0_early": "def add(a, b):\n    return 0\nimport os\nos._exit(0)",
    "eq_always_true": "class T:\n    def __eq__(self, o): return True\n    def __ne__(self, o): "
                      "return False\ndef add(a, b):\n    return T()",
    "int_subclass_eq": "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = "
                       "int.__hash__\ndef add(a, b):\n    return I(0)",
    "patch_json": "import json\n_d = json.dumps\njson.dumps = lambda *a, **k: '[3, 0, 30]'\ndef "
                  "add(a, b):\n    return None",
    "forge_result_lines": "import sys\nfor n in ('@@RESULT@@', 'READY', '{\"phase\": \"done\", "
                          "\"probes\": []}'):\n    print(n, flush=True)\n    sys.stderr.write(n + "
                          "'\\n')\ndef add(a, b):\n    return 0",
    "crash_after_definition": "def add(a, b):\n    return a + b\n1 / 0",
    # A wrong add: under bwrap the supervisor is the pid namespace's init, immune to the
    # program's SIGKILL, so with a correct add the attack is a no-op and scores 1.0 there.
    "kill_supervisor": "import os, signal\ndef add(a, b):\n    return a * b\nos.kill(os.getppid(), "
                       "signal.SIGKILL)",
    "read_supervisor_fds": "import os\ndef add(a, b):\n    return 0\nfor fd in ('0', '1'):\n    "
                           "try:\n        f = open(f'/proc/{os.getppid()}/fd/' + fd, 'w'); "
                           "f.write('{\"phase\":\"done\"}\\n'); f.flush()\n    except OSError as "
                           "e:\n        print('denied', e)",
    "shadow_builtins": "def add(a, b):\n    return 0\nabs = lambda x: 0\nisinstance = lambda *a: "
                       "True",
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_protocol_attacks_score_zero(name):
    g = grade_code(fenced(ATTACKS[name]), ADD, timeout=3)
    assert g.verdict.outcome == 0.0, g.verdict.detail


def test_attacks_on_in_sandbox_checks():
    # Tests that cannot become probes run in the sandbox's supervisor: same guarantees.
    ref = {"entry_point": "root2", "tests": ["assert abs(root2(2.0) - 1.41421356) < 1e-6",
                                            "assert isinstance(root2(4.0), float)"]}
    good = "def root2(x):\n    return x ** 0.5"
    assert grade_code(fenced(good), ref).verdict.status is Status.correct
    for bad in [
        "class T(float):\n    def __sub__(self, o): return 0.0\n    def __rsub__(self, o): return "
        "0.0\ndef root2(x):\n    return T(0)",
        "abs = lambda x: 0\nisinstance = lambda *a: True\ndef root2(x):\n    return 0.0",
        "class T:\n    def __lt__(self, o): return True\n    def __sub__(self, o): return self\n"
        "def root2(x):\n    return T()",
        "def root2(x):\n    return x ** 0.5\nraise SystemExit(0)",
    ]:
        g = grade_code(fenced(bad), ref)
        assert g.verdict.outcome == 0.0, (bad, g.verdict.detail)


def test_humaneval_style_with_prompt_and_body():
    ref = {"entry_point": "inc", "prompt": "def inc(x: int) -> int:\n    \"\"\"x + 1\"\"\"\n",
           "test": "def check(candidate):\n    for i in range(5):\n        assert candidate(i) == "
                   "i + 1\n"}
    assert verify_code("    return x + 1\n", ref).status is Status.correct
    assert verify_code(fenced("def inc(x):\n    return x + 1"), ref).status is Status.correct
    assert verify_code("    return x\n", ref).status is Status.wrong
    assert verify_code("    pass\n", ref).status is Status.wrong


def test_thread_safe_many_calls():
    from concurrent.futures import ThreadPoolExecutor

    codes = ["def add(a, b):\n    return a + b", "def add(a, b):\n    return a * b"] * 4
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda c: verify_code(fenced(c), ADD).outcome, codes))
    assert outs == [1.0, 0.0] * 4

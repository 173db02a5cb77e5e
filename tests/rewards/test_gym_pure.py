"""The allow-list of reasoning-gym scorers that run in the verifier process
(rlvr.rewards.gym_sandbox.PURE_SCORERS): each one, given adversarial answers, reaches no
``eval`` / ``exec`` / ``compile`` of a string (audit hook) and no sympy parsing (patched), and
runs none of the answers; the same detector does catch countdown's. An entry whose pinned
source changes, or a dataset off the list, is not pure."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("reasoning_gym")

from rlvr.rewards import gym_sandbox

DETECTOR = textwrap.dedent("""
    import builtins, json, sys
    import reasoning_gym as rg
    import sympy
    import sympy.parsing.sympy_parser as parser

    core_sympify = sys.modules["sympy.core.sympify"]

    reached = []

    def hook(event, args):
        filename = getattr(args[0], "co_filename", "")
        if event == "compile" or (event == "exec" and filename.startswith("<")
                                  and not filename.startswith("<frozen")):
            reached.append(event)

    def spy(name, fn):
        def wrapper(*a, **k):
            reached.append(name)
            return fn(*a, **k)
        return wrapper

    name, answers = sys.argv[1], json.loads(sys.stdin.read())
    ds = rg.create_dataset(name, seed=5, size=3)
    entries = [ds[i] for i in range(3)]  # generating may evaluate: only scoring is watched
    builtins.eval, builtins.exec = spy("eval", eval), spy("exec", exec)
    parser.parse_expr = sympy.parse_expr = spy("parse_expr", parser.parse_expr)
    core_sympify.sympify = sympy.sympify = spy("sympify", core_sympify.sympify)
    for module in [m for n, m in sys.modules.items() if n.startswith("reasoning_gym")]:
        for attr in ("parse_expr", "sympify"):  # names a scorer module bound at import
            if hasattr(module, attr):
                setattr(module, attr, spy(attr, getattr(module, attr)))
    sys.addaudithook(hook)
    for entry in entries:
        for answer in answers + [str(entry["answer"])]:
            ds.score_answer(answer, entry)
    print(json.dumps(sorted(set(reached))))
""")


def _reached(dataset: str, answers: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", DETECTOR, dataset], input=json.dumps(answers),
                         text=True, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _adversarial(marker) -> list[str]:
    return [f"__import__('pathlib').Path({str(marker)!r}).touch()",
            f"(open)({str(marker)!r}, 'w').write('x')",
            "[[1, 2], [3, 4]]", "x**2 + C", "1/0", "(lambda: 1)()", "1e999999", "+01,000.00",
            "Alice is a knight and Bob is a knave", "'a' * 10", ""]


@pytest.mark.parametrize("dataset", sorted(gym_sandbox.PURE_SCORERS))
def test_an_allow_listed_scorer_evaluates_no_answer(dataset, tmp_path):
    marker = tmp_path / "ran"
    assert _reached(dataset, _adversarial(marker)) == []
    assert not marker.exists()
    assert gym_sandbox.pure_scorer(dataset)


@pytest.mark.parametrize("dataset, reaches", [("n_queens", {"compile", "eval", "exec"}),
                                              ("countdown", {"compile", "exec", "parse_expr"})])
def test_the_detector_catches_an_evaluating_scorer(tmp_path, dataset, reaches):
    marker = tmp_path / "ran"
    assert reaches <= set(_reached(dataset, _adversarial(marker)[:2]))
    assert marker.exists()  # the scorer ran the answer: that is what the sandbox is for


def test_a_changed_or_unlisted_scorer_is_not_pure(monkeypatch):
    assert not gym_sandbox.pure_scorer("countdown")
    assert not gym_sandbox.pure_scorer("n_queens")
    functions, _ = gym_sandbox.PURE_SCORERS["chain_sum"]
    monkeypatch.setitem(gym_sandbox.PURE_SCORERS, "chain_sum", (functions, "0" * 64))
    gym_sandbox.pure_scorer.cache_clear()
    try:
        assert not gym_sandbox.pure_scorer("chain_sum")
    finally:
        monkeypatch.undo()
        gym_sandbox.pure_scorer.cache_clear()
    assert gym_sandbox.pure_scorer("chain_sum")

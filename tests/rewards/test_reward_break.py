"""Adversarial probe of the non-math rewards (tests/rewards/data/reward_break.jsonl): the logic
verifier, the format rules, the process reward, the reward pipeline and the arithmetic tasks'
answer check, written as a policy under RL would game them (reward hacking) and as a correct
model in another style would answer them (false rejects).

One case per line: ``id`` (``R-<kind>-NNN``), ``reward`` (what is called, below),
``completion`` (a string, or ``[[piece, repeats], ...]`` for a long one), ``reference`` /
``options``, ``expected``, ``kind``, ``note`` and optionally ``max_ms`` (a wall-time bound,
generous for a loaded machine). Kinds: C countdown, K knights and knaves, E where a logic
answer is (turn, ``<think>``, retractions), T time and size bombs, F format rules, P process
reward, A arithmetic answers (math verifier with ``accept_unevaluated: false``, as the
arithmetic presets set), W the pipeline (statuses, errors, timeouts, weights).

``reward``:

- ``logic``: :func:`rlvr.rewards.logic.verify_logic`; ``expected`` is the status, ``error``
  meaning the verifier raises (the pipeline's ``error`` row);
- ``format:<rule>``: the format rule with ``options``; ``expected`` is the score;
- ``process``: :func:`rlvr.rewards.process.process_score`; ``expected`` the score or null;
- ``math_arith``: the math verifier with ``accept_unevaluated=False``; ``expected`` the status;
- ``pipeline:<task type>``: a :class:`RewardPipeline` (test plugin task types; ``options``:
  ``format_rule``, ``workers``, ``timeout_s``, verifier ``seconds``); ``expected`` the status
  and reward;
- ``weights``: :class:`RewardConfig` with ``options.weights``; ``accepted`` or ``rejected``.

Cases the code still gets wrong are in ``KNOWN_FAILURES`` (strict xfail, so a fix is noticed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rlvr.rewards import RewardConfig, RewardPipeline
from rlvr.rewards.logic import verify_logic
from rlvr.rewards.math_task import math_outcome
from rlvr.rewards.process import process_score
from rlvr.rewards.registry import FORMAT_RULES

DATA = Path(__file__).with_name("data") / "reward_break.jsonl"
PLUGIN = ["rlvr_test_plugin"]


def _load() -> list[dict]:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


CASES = _load()

# id -> why it still fails
KNOWN_FAILURES = {
    # P: whether a right calculation belongs to the solution needs the question (or a
    # derivation graph), which the process score never sees; documented in
    # rlvr.rewards.process ("Limits"); keep the process weight small.
    "R-P-007": "P: right but irrelevant arithmetic earns the process reward",
    # W: a verifiers-environment rubric may score a row its parser reads nothing from;
    # forcing unparsed to 0 changes that environment's rewards: its owner's decision.
    "R-W-004": "W: an unparsed verdict carrying a score keeps it",
}


def _completion(case: dict) -> str:
    text = case["completion"]
    return text if isinstance(text, str) else "".join(piece * n for piece, n in text)


def _logic(case: dict, completion: str) -> str:
    try:
        return verify_logic(completion, case["reference"]).status.value
    except ValueError:
        return "error"


def _pipeline(case: dict, completion: str) -> dict:
    task_type = case["reward"].split(":", 1)[1]
    options = case.get("options", {})
    rules = {task_type: options["format_rule"]} if "format_rule" in options else {}
    config = RewardConfig(plugins=PLUGIN, workers=options.get("workers", 0), format_rule=rules,
                          timeout_s=options.get("timeout_s", 2.0),
                          verifier_options={task_type: {"seconds": options["seconds"]}}
                          if "seconds" in options else {})
    with RewardPipeline(config) as pipeline:
        result = pipeline.score(completion, case.get("reference"), task_type)
    return {"status": result.status.value, "reward": round(result.reward, 6)}


def _weights(case: dict) -> str:
    try:
        RewardConfig(weights=case["options"]["weights"])
    except ValueError:
        return "rejected"
    return "accepted"


def score(case: dict):
    """What the case's reward function gives its completion (see the module docstring)."""
    completion, reward = _completion(case), case["reward"]
    if reward == "logic":
        return _logic(case, completion)
    if reward.startswith("format:"):
        rule = FORMAT_RULES.get(reward.split(":", 1)[1])
        return rule(completion, **case.get("options", {}))
    if reward == "process":
        return process_score(completion)
    if reward == "math_arith":
        return math_outcome(completion, case["reference"], accept_unevaluated=False).status.value
    if reward.startswith("pipeline:"):
        return _pipeline(case, completion)
    if reward == "weights":
        return _weights(case)
    raise AssertionError(f"unknown reward {reward!r}")


def _param(case: dict):
    marks = ()
    if case["id"] in KNOWN_FAILURES:
        marks = pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[case["id"]])
    return pytest.param(case, id=case["id"], marks=marks)


def test_ids_are_unique_and_known_failures_exist():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    assert set(KNOWN_FAILURES) <= set(ids)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_reward_break_case(case: dict, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the test plugin's task types
    start = time.perf_counter()
    got = score(case)
    elapsed_ms = (time.perf_counter() - start) * 1000
    expected = case["expected"]
    if isinstance(expected, float) and isinstance(got, float):
        assert got == pytest.approx(expected), case["note"]
    else:
        assert got == expected, case["note"]
    if "max_ms" in case:
        assert elapsed_ms <= case["max_ms"], f"{elapsed_ms:.0f} ms: {case['note']}"

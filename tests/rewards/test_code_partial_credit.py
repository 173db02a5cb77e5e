"""Partial credit for code: ``Verdict.score`` and the ``partial_credit`` option of ``code``."""

from __future__ import annotations

import pytest

from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.types import Status, Verdict

ADD = {"entry_point": "add", "tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4",
                                       "assert add(0, 0) == 1"]}
TWO_OF_THREE = "```python\ndef add(a, b):\n    return a + b\n```"  # fails only the last test
ALL_THREE = ("```python\ndef add(a, b):\n    return 1 if (a, b) == (0, 0) else a + b\n```")
NONE_OF_THREE = "```python\ndef add(a, b):\n    return -1\n```"


def test_verdict_outcome_uses_score_when_set():
    assert Verdict(Status.wrong).outcome == 0.0
    assert Verdict(Status.correct).outcome == 1.0
    assert Verdict(Status.wrong, score=0.25).outcome == 0.25
    assert Verdict(Status.correct, score=1.0).outcome == 1.0
    assert Verdict(Status.wrong, score=0.0).outcome == 0.0


def _score(config: RewardConfig, completions: list[str]):
    with RewardPipeline(config) as pipeline:
        return [pipeline.score(c, ADD, "code") for c in completions]


def test_default_is_all_or_nothing():
    two, full, none = _score(RewardConfig(), [TWO_OF_THREE, ALL_THREE, NONE_OF_THREE])
    assert two.status is Status.wrong and two.components == {"outcome": 0.0, "format": 1.0}
    assert two.reward == pytest.approx(0.1)
    assert "passed=2/3" in two.detail
    assert full.status is Status.correct and full.reward == pytest.approx(1.1)
    assert none.components["outcome"] == 0.0 and "passed=0/3" in none.detail


def test_partial_credit_scores_the_passed_fraction():
    config = RewardConfig(verifier_options={"code": {"partial_credit": True}})
    two, full, none, prose = _score(
        config, [TWO_OF_THREE, ALL_THREE, NONE_OF_THREE, "I would add the two numbers."])
    assert two.status is Status.wrong  # status still says not all tests passed
    assert two.components["outcome"] == pytest.approx(2 / 3)
    assert two.reward == pytest.approx(2 / 3 + 0.1)
    assert full.status is Status.correct and full.components["outcome"] == 1.0
    assert full.reward == pytest.approx(1.1)
    assert none.components["outcome"] == 0.0 and none.reward == pytest.approx(0.1)
    assert prose.status is Status.unparsed and prose.reward == 0.0


def test_partial_credit_leaves_math_and_bad_references_alone():
    config = RewardConfig(verifier_options={"code": {"partial_credit": True}})
    with RewardPipeline(config) as pipeline:
        math = pipeline.score("1 + 1 = 2\n#### 2", "2", "math")
        bad = pipeline.score(TWO_OF_THREE, {"entry_point": "add"}, "code")  # no tests
    assert math.status is Status.correct and math.components["outcome"] == 1.0
    assert bad.status is Status.error and bad.components["outcome"] == 0.0
    assert "bad reference" in bad.detail

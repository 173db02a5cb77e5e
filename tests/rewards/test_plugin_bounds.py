"""A plugin's format rule and verdict are held to the verifiers' contract: run in a verifier
worker under the time bound, values checked in [0, 1] before weighting; whatever breaks it is
an ``error`` row (reward 0, counted), never a crash, a hang or an inflated reward."""

import pytest

from rlvr.rewards import RewardConfig, RewardPipeline, ScoreRequest, Status

PLUGIN = ["rlvr_test_plugin"]


def _pipeline(rule: str, workers: int = 1, **fields) -> RewardPipeline:
    return RewardPipeline(RewardConfig(plugins=PLUGIN, workers=workers, timeout_s=1.0,
                                       format_rule={"test_exact": rule}, **fields))


def test_a_raising_format_rule_is_an_error_row_not_a_crash():
    with _pipeline("test_fmt_raises") as p:
        raised, = p.score_batch([ScoreRequest("7", "7", "test_exact")])
    assert raised.status is Status.error and raised.reward == 0.0
    assert "format rule 'test_fmt_raises' raised RuntimeError: format bug" in raised.detail
    assert raised.components == {"outcome": 0.0, "format": 0.0}  # an error scores nothing


def test_a_sleeping_format_rule_times_out_under_the_verifier_bound():
    # the rule sleeps 60 s; the call's 1 s bound kills it (a hang before)
    with _pipeline("test_fmt_sleeps") as p:
        slept = p.score("7", "7", "test_exact")
        assert slept.status is Status.timeout and slept.reward == 0.0
        assert p.pool.timeouts == 1


@pytest.mark.parametrize("value", ["1e9", "-0.5", "nan"])
def test_a_format_value_outside_0_1_is_an_error_row(value):
    p = _pipeline("test_fmt_value", workers=0)
    result = p.score(f"{value}\nx", f"{value}\nx", "test_exact")
    assert result.status is Status.error and result.reward == 0.0
    assert "format rule 'test_fmt_value' returned" in result.detail
    with pytest.raises(ValueError, match="expected a number in \\[0, 1\\]"):
        p.format_score(f"{value}\nx", "test_exact")


def test_a_format_value_inside_0_1_is_weighed():
    p = _pipeline("test_fmt_value", workers=0)
    result = p.score("0.5\nx", "0.5\nx", "test_exact")
    # outcome 1.0 * 1.0 + format 0.5 * 0.1
    assert result.status is Status.correct and result.reward == pytest.approx(1.05)


def test_an_overridden_outcome_of_a_wrong_answer_earns_nothing():
    result = _pipeline("none", workers=0).score("outcome", "x", "test_inflated")
    assert result.status is Status.error and result.reward == 0.0
    assert "outcome is 1000000000.0" in result.detail


def test_a_huge_component_under_a_weight_earns_nothing():
    config = dict(weights={"outcome": 1.0, "format": 0.1, "bonus": 0.5})
    result = _pipeline("none", workers=0, **config).score("part", "x", "test_inflated")
    assert result.status is Status.error and result.reward == 0.0
    assert "'bonus' is 1000000000.0, expected a finite number in [0, 1]" in result.detail
    # logged only (no weight): finite is enough, the wrong answer scores 0 as usual
    plain = _pipeline("none", workers=0).score("part", "x", "test_inflated")
    assert plain.status is Status.wrong and plain.reward == 0.0

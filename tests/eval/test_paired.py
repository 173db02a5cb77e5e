"""The paired pass@1 gain (rlvr.eval.paired): hand-worked intervals, McNemar's exact p-values
from the binomial table, and the verdict strings a validation row carries."""

import math

import pytest

from rlvr.eval.paired import (
    PairedGain,
    gain_summary,
    mcnemar_exact_p,
    paired_gain,
    parse_verdicts,
    verdict_string,
)


def test_hand_worked_five_problems():
    # d = [0, +1, +1, -1, 0]: gain 1/5; mean(d^2) = 3/5, var = 0.6 - 0.04 = 0.56
    g = paired_gain([True, False, False, True, False], [True, True, True, False, False])
    assert (g.fixed, g.broken, g.n) == (2, 1, 5)
    assert g.gain == pytest.approx(0.2)
    half = 1.96 * math.sqrt(0.56 / 5)  # 0.6559...
    assert g.low == pytest.approx(0.2 - half) and g.high == pytest.approx(0.2 + half)
    # 3 discordant pairs, min 1: 2 * (C(3,0) + C(3,1)) / 8 = 1.0
    assert g.p_value == 1.0


def test_interval_matches_the_normal_interval_of_the_differences():
    """200 problems, 54 fixed and 12 broken (a seed-0 run of an earlier default preset):
    the Wald interval equals mean(d) -/+ 1.96 * sqrt(var_pop(d) / n) of the d_i themselves."""
    before = [False] * 54 + [True] * 12 + [True] * 80 + [False] * 54
    after = [True] * 54 + [False] * 12 + [True] * 80 + [False] * 54
    g = paired_gain(before, after)
    d = [int(a) - int(b) for b, a in zip(before, after)]
    mean = sum(d) / 200
    var = sum((x - mean) ** 2 for x in d) / 200
    assert g.gain == pytest.approx(0.21)
    assert g.low == pytest.approx(mean - 1.96 * math.sqrt(var / 200))
    assert g.high == pytest.approx(mean + 1.96 * math.sqrt(var / 200))
    assert round(g.low * 100, 1) == 13.6 and round(g.high * 100, 1) == 28.4
    assert g.summary().startswith("95% CI +13.6 to +28.4; 54 fixed, 12 broken of 200")


@pytest.mark.parametrize("fixed, broken, expected", [
    (0, 0, 1.0),
    (5, 0, 2 / 32),                # 2 * C(5,0) / 2^5
    (8, 2, 2 * (1 + 10 + 45) / 1024),
    (2, 8, 2 * (1 + 10 + 45) / 1024),  # symmetric
    (3, 3, 1.0),                   # 2 * P(X <= 3 | m = 6) = 2 * 42/64 > 1 -> 1
])
def test_mcnemar_exact_p_from_the_binomial_table(fixed, broken, expected):
    assert mcnemar_exact_p(fixed, broken) == pytest.approx(expected)


def test_mcnemar_survives_thousands_of_flips():
    p = mcnemar_exact_p(1200, 800)
    assert 0.0 < p < 1e-15  # tiny but not underflowed to an exception or NaN


def test_no_change_and_extremes():
    g = paired_gain([True, False] * 3, [True, False] * 3)
    assert (g.gain, g.low, g.high, g.p_value) == (0.0, 0.0, 0.0, 1.0)
    g = paired_gain([False] * 4, [True] * 4)  # every problem fixed: var 0, interval clipped
    assert (g.gain, g.low, g.high) == (1.0, 1.0, 1.0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_gain([True], [True, False])
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_gain([], [])
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_exact_p(-1, 2)
    with pytest.raises(ValueError, match=r"\['x'\]"):
        parse_verdicts("01x1")


def test_verdict_strings_round_trip_and_summaries_of_saved_rows():
    correct = [True, False, False, True]
    assert verdict_string(correct) == "1001"
    assert parse_verdicts("1001") == correct
    saved = paired_gain(correct, [True] * 4).as_dict()
    assert gain_summary(saved) == PairedGain(**saved).summary()
    assert gain_summary(None) == gain_summary({"gain": 0.1}) == gain_summary("x") == ""

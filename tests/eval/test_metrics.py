"""pass@k, maj@k, best-of-k, the aggregator registry and saturation against hand-worked values."""

import math
from fractions import Fraction

import pytest

from rlvr.eval.metrics import (
    DEFAULT_AGGREGATORS,
    SAMPLE_AGGREGATORS,
    ProblemView,
    aggregator_for,
    best_of_k,
    maj_at_k,
    majority_index,
    mean_ci95,
    normalize_answer,
    pass_at_k,
    register_sample_aggregator,
    saturation,
)

# -- pass@k (Chen et al. 2021 eq. 1) ----------------------------------------------------------

@pytest.mark.parametrize("n, c, k, expected", [
    (2, 1, 1, 0.5),                      # one of two
    (4, 2, 2, 1 - 1 / 6),                # 1 - C(2,2)/C(4,2)
    (4, 1, 2, 0.5),                      # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 3, 1 - 1 / 10),               # 1 - C(3,3)/C(5,3)
    (10, 3, 1, 0.3),                     # pass@1 = c/n
    (16, 0, 8, 0.0),                     # c = 0
    (16, 16, 1, 1.0),                    # c = n
    (8, 8, 8, 1.0),                      # n = k, c = n
    (8, 1, 8, 1.0),                      # n = k: any correct sample is drawn
    (8, 0, 8, 0.0),                      # n = k, c = 0
    (6, 4, 3, 1.0),                      # n - c < k: always a correct one
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_binomial_form_for_large_n():
    # the product form must equal 1 - C(n-c,k)/C(n,k) without overflow
    n, c, k = 200, 7, 50
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5), (0, 0, 1)])
def test_pass_at_k_rejects_out_of_range(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# -- answers and the vote ---------------------------------------------------------------------

@pytest.mark.parametrize("a, b", [("72", "72.0"), ("72", "$72$"), ("1/2", "\\frac{1}{2}"),
                                  ("0.5", "1/2"), ("1,234", "1234"), ("x + 1", "x+1"),
                                  # words the verifier ignores, a label naming the value
                                  ("5", "5 pencils"), ("5 apples", "5 pencils"),
                                  ("72 dollars", "\\$72"), ("x = 5", "5"),
                                  ("5 \\text{ cm}", "5cm")])
def test_equal_answers_share_a_key(a, b):
    assert normalize_answer(a) == normalize_answer(b) is not None


def test_different_answers_and_missing_ones():
    assert normalize_answer("25%") != normalize_answer("25")
    assert normalize_answer("12") != normalize_answer("13")
    assert normalize_answer("5 cm") != normalize_answer("5 m")  # units of measurement stay
    assert normalize_answer("5 cm") != normalize_answer("5")
    assert normalize_answer(None) is None and normalize_answer("  ") is None


def test_majority_index_ties_go_to_the_answer_seen_first():
    assert majority_index(["a", "b", "b", "a"]) == 0          # 2-2 tie: "a" first
    assert majority_index(["b", "a", "a", "b"]) == 0          # 2-2 tie: "b" first
    assert majority_index(["a", "b", "b"]) == 1               # "b" wins, its first vote
    assert majority_index([None, "c", None]) == 1             # no-answer samples do not vote
    assert majority_index([None, None]) is None


# -- maj@k ------------------------------------------------------------------------------------

KEYS = ["12", "13", "13", "12"]          # answers of 4 samples, reference 12
CORRECT = [True, False, False, True]


def test_maj_at_k_exact_over_all_subsets():
    # k=1: 2 of 4 samples are right. k=2: the 6 pairs {12,13} {12,13} {12,12} {13,13} {13,12}
    # {13,12} -> ties go to the first sample: right, right, right, wrong, wrong, wrong = 3/6.
    # k=4: 2-2 tie, first sample says 12 -> right.
    assert maj_at_k(KEYS, CORRECT, 1) == 0.5
    assert maj_at_k(KEYS, CORRECT, 2) == 0.5
    assert maj_at_k(KEYS, CORRECT, 4) == 1.0


def test_maj_at_k_with_unanswered_samples():
    keys, correct = ["5", "5", "7", None], [False, False, True, False]
    # pairs: only {7, None} has the right majority -> 1/6; all four: 5 wins (2 votes to 1)
    assert maj_at_k(keys, correct, 2) == pytest.approx(1 / 6)
    assert maj_at_k(keys, correct, 4) == 0.0
    assert maj_at_k([None, None], [False, False], 1) == 0.0


def test_maj_at_k_random_subsets_estimate_a_known_answer():
    # 16 samples: 9 say "4" (right), 7 say "5". Every 15-subset keeps >= 8 "4"s against
    # <= 7 "5"s, so maj@15 is exactly 1.0 (C(16,15) = 16 > 10 subsets: estimated, still 1.0).
    keys = ["4"] * 9 + ["5"] * 7
    correct = [True] * 9 + [False] * 7
    assert maj_at_k(keys, correct, 15, subsets=10) == 1.0
    # maj@3 exactly: P(at least 2 of 3 drawn are "4") = [C(9,2)C(7,1) + C(9,3)] / C(16,3)
    exact = (math.comb(9, 2) * 7 + math.comb(9, 3)) / math.comb(16, 3)     # = 336/560 = 0.6
    assert exact == pytest.approx(0.6)
    estimate = maj_at_k(keys, correct, 3, subsets=400, seed=1)          # 560 > 400: sampled
    assert estimate == pytest.approx(0.6, abs=0.07)
    assert maj_at_k(keys, correct, 3, subsets=400, seed=1) == estimate  # seeded: same draws
    assert maj_at_k(keys, correct, 3, subsets=1000) == pytest.approx(0.6)  # 560 <= 1000: exact


# -- best-of-k --------------------------------------------------------------------------------

def test_best_of_k_hand_values():
    scores, correct = [0.9, 0.5, 0.1], [False, True, True]
    # pairs {0,1} {0,2} pick sample 0 (wrong); {1,2} picks sample 1 (right) -> 1/3
    assert best_of_k(scores, correct, 2) == pytest.approx(1 / 3)
    assert best_of_k(scores, correct, 1) == pytest.approx(2 / 3)
    assert best_of_k(scores, correct, 3) == 0.0
    # ties go to the earlier sample: both score 1.0, the first is right
    assert best_of_k([1.0, 1.0], [True, False], 2) == 1.0
    assert best_of_k([1.0, 1.0], [False, True], 2) == 0.0
    # NaN ranks last
    assert best_of_k([float("nan"), 0.0], [True, False], 2) == 0.0


def test_best_of_k_needs_every_score():
    with pytest.raises(ValueError, match="no score"):
        best_of_k([0.1, None], [True, False], 1)


# -- aggregators ------------------------------------------------------------------------------

def test_default_aggregators_per_task_type_and_overrides():
    assert DEFAULT_AGGREGATORS == {"math": "majority", "code": "any_passes"}
    assert aggregator_for("math") == "majority"
    assert aggregator_for("code") == "any_passes"
    assert aggregator_for("open_text") == "best_of_logprob"
    assert aggregator_for("math", {"math": "best_of_oracle"}) == "best_of_oracle"
    assert aggregator_for("code", {"*": "majority"}) == "majority"


def test_aggregators_on_one_problem():
    view = ProblemView(correct=(True, False, False, True), keys=("a", "b", "b", "a"),
                       scores={"oracle": (1.0, 0.0, 0.0, 1.0), "logprob": (-1, -0.5, -2, -0.7)})
    assert SAMPLE_AGGREGATORS.get("any_passes")(view, 2) == pytest.approx(5 / 6)
    assert SAMPLE_AGGREGATORS.get("majority")(view, 4) == 1.0
    assert SAMPLE_AGGREGATORS.get("best_of_oracle")(view, 2) == pytest.approx(5 / 6)
    # log-prob order: sample 1 (-0.5, wrong), 3 (-0.7, right), 0 (-1, right), 2 (wrong):
    # k=2 -> rank 1 weight C(2,1)/6 + rank 2 weight C(1,1)/6 = 3/6
    assert SAMPLE_AGGREGATORS.get("best_of_logprob")(view, 2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="reranker"):
        SAMPLE_AGGREGATORS.get("best_of_reranker")(view, 1)
    with pytest.raises(KeyError, match="unknown sample aggregator 'mode'; registered: "
                                       "any_passes, best_of_logprob"):
        SAMPLE_AGGREGATORS.get("mode")
    assert SAMPLE_AGGREGATORS.meta("best_of_logprob").scorer == "logprob"
    assert SAMPLE_AGGREGATORS.meta("majority").scorer is None


def test_register_sample_aggregator_refuses_duplicates():
    with pytest.raises(ValueError, match="already registered"):
        register_sample_aggregator("majority")(lambda view, k: 0.0)


# -- curves -----------------------------------------------------------------------------------

def test_saturation_finds_the_first_small_doubling():
    result = saturation({1: 0.5, 2: 0.6, 4: 0.605, 8: 0.61}, threshold=0.01)
    assert result["saturated_at"] == 2
    assert result["gains"] == pytest.approx({"1->2": 0.1, "2->4": 0.005, "4->8": 0.005})
    assert saturation({1: 0.2, 2: 0.4, 4: 0.6}, 0.01)["saturated_at"] is None
    # A small first gain followed by a rise is not saturation (GSM8K at 135M: 0.8% -> 6%).
    assert saturation({1: 0.008, 2: 0.015, 4: 0.03, 8: 0.06}, 0.01)["saturated_at"] is None
    assert saturation({1: 0.5, 2: 0.505, 4: 0.6, 8: 0.602}, 0.01)["saturated_at"] == 4
    # k values without a doubling partner have no gain: 1 -> 4 is not a doubling
    assert saturation({1: 0.2, 4: 0.5, 8: 0.5}, 0.01) == {
        "threshold": 0.01, "gains": {"4->8": 0.0}, "saturated_at": 4}


def test_mean_ci95_by_hand():
    mean, lo, hi = mean_ci95([0.2, 0.4, 0.6, 0.8])
    # s = sqrt((0.09 + 0.01 + 0.01 + 0.09) / 3) = 0.258199; half = 1.96 * s / 2 = 0.253035
    assert mean == pytest.approx(0.5)
    assert (lo, hi) == pytest.approx((0.246965, 0.753035), abs=1e-6)
    # [0, 1, 1, 0]: half = 1.96 * 0.57735 / 2 = 0.5658 -> clipped to [0, 1]
    assert mean_ci95([0.0, 1.0, 1.0, 0.0]) == (0.5, 0.0, 1.0)
    assert mean_ci95([0.3]) == (0.3, 0.3, 0.3)

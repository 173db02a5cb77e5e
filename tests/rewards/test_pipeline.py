"""The reward pipeline around the verifiers: aggregation, config, time bounds, failures."""

import time

import pytest
from pydantic import ValidationError

from rlvr.rewards import RewardConfig, RewardPipeline, ScoreRequest, Status, VerifierPool, VerifyJob

PLUGIN = ["rlvr_test_plugin"]


@pytest.fixture(scope="module")
def pipeline():
    with RewardPipeline(RewardConfig(plugins=PLUGIN, workers=2)) as p:
        yield p


def test_weighted_sum_of_outcome_and_format(pipeline):
    right_tagged = pipeline.score("<answer>7</answer>", "<answer>7</answer>", "test_exact")
    assert right_tagged.components == {"outcome": 1.0, "format": 1.0}
    assert right_tagged.reward == pytest.approx(1.1)
    wrong_tagged = pipeline.score("<answer>8</answer>", "<answer>7</answer>", "test_exact")
    assert wrong_tagged.components == {"outcome": 0.0, "format": 1.0}
    assert wrong_tagged.reward == pytest.approx(0.1)
    right_untagged = pipeline.score("7", "7", "test_exact")
    assert right_untagged.reward == pytest.approx(1.0)
    # Outcome dominates (R2): a right answer in no format beats a wrong one in perfect format.
    assert right_untagged.reward > wrong_tagged.reward


def test_outcome_gated_aggregator_gives_wrong_answers_nothing():
    config = RewardConfig(plugins=PLUGIN, workers=0, aggregator="outcome_gated")
    wrong = RewardPipeline(config).score("<answer>8</answer>", "<answer>7</answer>", "test_exact")
    assert wrong.reward == 0.0 and wrong.components["format"] == 1.0


def test_batch_keeps_input_order(pipeline):
    requests = [ScoreRequest(str(i), str(i if i % 3 else -1), "test_exact") for i in range(20)]
    results = pipeline.score_batch(requests)
    assert [r.extracted for r in results] == [str(i) for i in range(20)]
    assert [r.status for r in results] == [
        Status.wrong if i % 3 == 0 else Status.correct for i in range(20)
    ]


def test_hanging_verifier_times_out_and_pool_recovers():
    config = RewardConfig(plugins=PLUGIN, workers=1, timeout_s=0.5,
                          verifier_options={"test_sleepy": {"seconds": 60}})
    with RewardPipeline(config) as p:
        # start the worker first, so that only the timeout path is timed below
        assert p.score("w", "w", "test_exact").status is Status.correct
        start = time.monotonic()
        result = p.score("x", "x", "test_sleepy")
        elapsed = time.monotonic() - start
        assert result.status is Status.timeout and result.reward == 0.0
        assert p.pool.timeouts == 1 and p.pool.restarts == 1
        # cut off by the 0.5 s limit (plus killing and replacing the worker), not the 60 s
        # sleep: a generous margin, so that a slow, loaded machine does not fail it
        assert elapsed < 15.0
        # the killed worker was replaced: the next call works
        assert p.score("y", "y", "test_exact").status is Status.correct


def test_a_slow_worker_start_does_not_count_against_the_first_jobs_deadline(monkeypatch):
    import rlvr_test_plugin

    import rlvr.rewards.pool as pool_module

    monkeypatch.setattr(pool_module, "_worker_main", rlvr_test_plugin.slow_starting_worker)
    config = RewardConfig(plugins=PLUGIN, workers=2, timeout_s=0.5)
    with RewardPipeline(config) as p:
        # each worker takes 1.5 s to come up, three times the 0.5 s limit of a job
        results = p.score_batch([ScoreRequest(s, s, "test_exact") for s in "abc"])
        assert [r.status for r in results] == [Status.correct] * 3
        assert p.pool.timeouts == 0 and p.pool.restarts == 0


def test_a_worker_that_dies_before_it_is_ready_is_a_clear_error(monkeypatch):
    import rlvr_test_plugin

    import rlvr.rewards.pool as pool_module

    monkeypatch.setattr(pool_module, "_worker_main", rlvr_test_plugin.worker_that_dies_at_start)
    with VerifierPool(workers=1) as pool:
        with pytest.raises(RuntimeError, match=r"did not start within .* \(exit code 4\)"):
            pool.verify_many([VerifyJob("math", "a", "a", timeout_s=1.0)])


def test_crashing_and_raising_verifiers_are_errors_not_crashes(pipeline):
    crashed, raised, fine = pipeline.score_batch([
        ScoreRequest("a", "a", "test_crashy"),
        ScoreRequest("a", "a", "test_raising"),
        ScoreRequest("a", "a", "test_exact"),
    ])
    assert crashed.status is Status.error and "died" in crashed.detail
    assert raised.status is Status.error and "RuntimeError: boom" in raised.detail
    assert fine.status is Status.correct
    assert crashed.reward == raised.reward == 0.0


def test_pool_usable_from_threads():
    from concurrent.futures import ThreadPoolExecutor

    with VerifierPool(workers=1) as pool:
        job = VerifyJob("test_exact", "5", "5", plugins=tuple(PLUGIN))
        with ThreadPoolExecutor(4) as ex:
            outs = list(ex.map(lambda _: pool.verify_many([job])[0][0].status, range(8)))
    assert outs == [Status.correct] * 8


def test_unknown_task_type_names_the_known_ones(pipeline):
    with pytest.raises(KeyError, match="task_type: unknown verifier 'nope'; registered: .*math"):
        pipeline.score("1", "1", "nope")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"weights": {"outcome": 1.0, "format": 1.0}}, "tie or beat"),
        ({"weights": {"format": 0.1}}, "outcome must be > 0"),
        ({"aggregator": "mean"}, "aggregator: unknown reward aggregator 'mean'; registered: "
                                 "outcome_gated, weighted_sum"),
        ({"format_rule": {"math": "boxd"}},
         "format_rule.math: unknown format rule 'boxd'; did you mean 'boxed'?"),
        ({"plugins": ["no_such_module_xyz"]}, "plugins: cannot import"),
        ({"timeout_s": 0}, "greater than 0"),
        ({"wieghts": {}}, "Extra inputs are not permitted"),
        # these loaded, then every call (or the format reward) silently failed
        ({"weights": {"outcome": 1.0, "formatt": 0.1}},
         "weights.formatt: not a reward component; did you mean 'format'"),
        ({"verifier_options": {"math": {"allow_last_numbr": True}}},
         "verifier_options.math.allow_last_numbr: not an option of the math verifier; did you "
         "mean 'allow_last_number'"),
        ({"verifier_options": {"math": {"allow_last_number": "yes"}}},
         "verifier_options.math.allow_last_number: expected bool, got 'yes'"),
        ({"verifier_options": {"math": {"exact_sig_digits": 7.5}}}, "expected int, got 7.5"),
        ({"verifier_options": {"mathz": {}}},
         "verifier_options.mathz: unknown verifier 'mathz'; did you mean 'math'"),
    ],
)
def test_bad_config_is_rejected_with_the_field(fields, message):
    with pytest.raises(ValidationError, match=message):
        RewardConfig(**fields)


def test_good_options_and_a_verifiers_own_components_load():
    config = RewardConfig(weights={"outcome": 1.0, "format": 0.1, "rubric_length": 0.2},
                          verifier_options={"math": {"allow_last_number": True,
                                                     "exact_sig_digits": 7,
                                                     "rounded_reference_tolerance": False},
                                            "code": {"partial_credit": True}})
    assert config.verifier_options["math"]["exact_sig_digits"] == 7


def test_same_input_same_result_across_processes_and_runs():
    """R8: judging is deterministic, in-process and in workers, run after run."""
    requests = [ScoreRequest("so \\boxed{\\frac{2}{3}}", "0.666666667"),
                ScoreRequest("答案约为3.14159", "3.14"),
                ScoreRequest("x = 3 or x = 4, so \\boxed{3}", "3"),
                ScoreRequest("The answer is 3 or 4.", "3")]

    def judge(workers):
        with RewardPipeline(RewardConfig(workers=workers)) as p:
            return [(r.reward, r.status, r.extracted, r.components)
                    for r in p.score_batch(requests)]

    first = judge(0)
    assert judge(0) == first and judge(2) == first
    assert [s for _, s, _, _ in first][3] is Status.multiple_answers


@pytest.mark.parametrize("workers", [0, 2])
def test_a_malformed_verdict_is_an_error_row_naming_the_verifier(workers):
    """None, another type, a non-Status status, or a score that is NaN / inf / outside [0, 1]
    become counted error rows (outcome 0, left out of GRPO's group statistics), in the worker
    pool and in process alike; a well-formed partial score passes through."""
    config = RewardConfig(plugins=PLUGIN, workers=workers)
    kinds = ["none", "bool", "nan", "inf", "big", "status", "bad_parts", "half"]
    with RewardPipeline(config) as pipeline:
        results = pipeline.score_batch([ScoreRequest(k, None, "test_returns") for k in kinds])
    by_kind = dict(zip(kinds, results))
    for kind in kinds[:-1]:
        result = by_kind[kind]
        assert result.status is Status.error, kind
        assert result.components["outcome"] == 0.0 and "'test_returns'" in result.detail
    assert "returned NoneType instead of a Verdict" in by_kind["none"].detail
    assert "score nan" in by_kind["nan"].detail
    assert by_kind["half"].status is Status.wrong and by_kind["half"].components["outcome"] == 0.5
    assert "returned components" in by_kind["bad_parts"].detail


@pytest.mark.parametrize("workers", [0, 1])
def test_a_verifiers_own_components_are_logged_beside_outcome_and_format(workers):
    """Verdict.components (a rubric's per-function scores) reach the result's components and
    weigh nothing in the reward unless reward.weights names them."""
    with RewardPipeline(RewardConfig(plugins=PLUGIN, workers=workers)) as pipeline:
        plain = pipeline.score("parts", None, "test_returns")
    assert plain.components == {"rubric/a": 1.0, "rubric/b": 0.25, "outcome": 1.0,
                                "format": 0.0}
    assert plain.reward == 1.0  # outcome 1.0 x 1.0, format 0 x 0.1, the parts unweighted
    weighted = RewardPipeline(RewardConfig(plugins=PLUGIN, workers=0, weights={
        "outcome": 1.0, "rubric/b": 0.4})).score("parts", None, "test_returns")
    assert weighted.reward == pytest.approx(1.0 + 0.4 * 0.25)

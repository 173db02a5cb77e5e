"""Verifier errors and timeouts in validation, sampled pass@k and `rlvr eval`: counted wrong
and counted; a figure where at least half of the rows are such errors is printed as NOT
MEASURED (not as a pass@1 of 0.0%), and the health monitor alerts on a validation's errors."""

from types import SimpleNamespace

import pytest

from rlvr.eval.records import EvalSample, ProblemResult
from rlvr.eval.report import verifier_error_lines
from rlvr.eval.summary import summarize
from rlvr.monitor.checks import HEALTH_CHECKS, CheckContext
from rlvr.monitor.config import HealthConfig
from rlvr.records import Generated, Task
from rlvr.rewards import RewardConfig, RewardPipeline
from rlvr.rewards.registry import VERIFIERS, register_verifier
from rlvr.rewards.summary import accuracy_text
from rlvr.rewards.types import Status, Verdict
from rlvr.train.validate import validate


def _by_text(completion: str, reference, **options) -> Verdict:
    """Correct for "right", wrong for "wrong"; any other completion makes the verifier raise."""
    if completion not in ("right", "wrong"):
        raise RuntimeError("verifier down")
    return Verdict(Status.correct if completion == "right" else Status.wrong, completion)


if "test_by_text" not in VERIFIERS:
    register_verifier("test_by_text")(_by_text)


class _Engine:
    """Greedy "decoding" that returns each prompt's first token id as the completion."""

    def generate(self, prompts, params):
        return SimpleNamespace(num_rows=len(prompts), completion=lambda row: prompts[row][:1],
                               lengths=[1] * len(prompts), finish_reason=["stop"] * len(prompts))


class _Tokenizer:
    words = {0: "right", 1: "wrong", 2: "down"}

    def decode(self, ids, skip_special_tokens=True):
        return self.words[ids[0]]


def _validate(token_ids):
    tasks = [Task(id=f"t{i}", prompt="q", reference="x", task_type="test_by_text", source="s")
             for i in range(len(token_ids))]
    pipeline = RewardPipeline(RewardConfig(workers=0))
    result, _ = validate(_Engine(), _Tokenizer(), tasks, [[t] for t in token_ids], pipeline,
                         max_new_tokens=4, stop_token_ids=())
    return result


def test_a_validation_of_only_verifier_errors_is_not_a_measured_pass_at_1():
    result = _validate([2, 2, 2, 2])
    assert (result.pass_at_1, result.verifier_errors, result.measured) == (0.0, 4, False)
    assert result.pass_at_1_text() == ("pass@1 NOT MEASURED: 4 of 4 rows are verifier errors "
                                       "or timeouts (0.0% counting them wrong)")


def test_a_few_verifier_errors_are_counted_wrong_and_said():
    # 2 right, 1 wrong, 1 error: pass@1 2/4, the error counted wrong and named
    result = _validate([0, 0, 1, 2])
    assert (result.pass_at_1, result.verifier_errors, result.measured) == (0.5, 1, True)
    assert result.pass_at_1_text() == ("pass@1 50.0% (1 of 4 rows verifier errors or "
                                       "timeouts, counted wrong)")
    assert _validate([0, 1]).pass_at_1_text() == "pass@1 50.0%"


@pytest.mark.parametrize("errors, n, measured", [(1, 2, False), (2, 5, True), (0, 0, False)])
def test_accuracy_text_threshold_is_half_the_rows(errors, n, measured):
    assert ("NOT MEASURED" not in accuracy_text("pass@1", 0.0, errors, n)) == measured


def _problem(pid, statuses):
    samples = [EvalSample(Generated(text="x"), 0.0, s, None) for s in statuses]
    return ProblemResult(id=pid, task_type="math", reference="1", samples=samples,
                         requested=len(samples))


def test_eval_summary_counts_verifier_errors_and_the_report_says_not_measured():
    problems = [_problem("a", ["error", "timeout"]), _problem("b", ["error", "correct"])]
    summary = summarize(problems, [1, 2])
    # pass@1 = mean(0/2, 1/2) = 0.25, 3 of the 4 samples failed to verify
    assert summary["pass@k"]["1"] == pytest.approx(0.25)
    assert (summary["verifier_errors"], summary["measured"]) == (3, False)
    assert verifier_error_lines({"m": summary}) == [
        "**m: NOT MEASURED: 3 of 4 samples are verifier errors or timeouts** (its curves "
        "count them wrong; see status_counts)."]
    fine = summarize([_problem("a", ["correct", "wrong"])], [1])
    assert (fine["verifier_errors"], fine["measured"]) == (0, True)
    assert verifier_error_lines({"m": fine}) == []


def test_the_monitor_alerts_on_a_validation_of_verifier_errors():
    cfg = HealthConfig().check_config("verifier_errors")
    validation = [{"step": 0, "pass_at_1": 0.5, "label": "before_grpo", "n": 8,
                   "verifier_errors": 0},
                  {"step": 2, "pass_at_1": 0.0, "label": "grpo", "n": 8, "verifier_errors": 8}]
    context = CheckContext(2, [{"step": 1}, {"step": 2}], [], validation, 10, 5)
    finding = HEALTH_CHECKS["verifier_errors"](context, cfg)
    assert finding is not None and finding.value == 1.0
    assert "8 of 8 tasks got a verifier error or timeout" in finding.message
    # ... and the collapse check does not read an unmeasured pass@1 as a collapse
    collapse = HealthConfig().check_config("validation_collapse")
    assert HEALTH_CHECKS["validation_collapse"](context, collapse) is None


def test_eval_summary_reports_the_verifiers_threshold_beside_full_score_pass_at_1():
    def sample(status, passed):
        return EvalSample(Generated(text="x"), 0.0, status, None,
                          components={"outcome": 0.5, "rubric_pass": passed})

    problems = [ProblemResult("a", "math", {}, [sample("wrong", 1.0), sample("correct", 1.0)],
                              2),
                ProblemResult("b", "math", {}, [sample("wrong", 1.0), sample("wrong", 0.0)],
                              2)]
    summary = summarize(problems, [1])
    # pass@1 = mean(1/2, 0/2) = 0.25; at the threshold: mean(2/2, 1/2) = 0.75
    assert summary["pass@k"]["1"] == pytest.approx(0.25)
    assert summary["rubric_pass@1"] == pytest.approx(0.75)
    assert verifier_error_lines({"m": summary}) == [
        "m: pass@1 counts a verifiers rubric's full score only; 75.0% of samples reach the "
        "environment's own pass_threshold (rubric_pass@1)."]
    assert "rubric_pass@1" not in summarize([_problem("c", ["correct"])], [1])

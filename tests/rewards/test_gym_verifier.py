"""The reasoning_gym verifier (rlvr.rewards.gym): the answer extraction, and rlvr's outcome
equal to reasoning-gym's own score_answer on generated items for right, wrong and malformed
answers, in process and through the verifier worker pool."""

import pytest

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.gym import extract_gym_answer
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.types import Status


@pytest.mark.parametrize("completion, status, answer, method", [
    ("think...\n<answer> 42 </answer>", Status.wrong, "42", "answer_tag"),
    ("<answer>7</answer> then <answer>7</answer>", Status.wrong, "7", "answer_tag"),
    ("<answer>7</answer> or <answer>8</answer>", Status.multiple_answers, None, "answer_tag"),
    ("<answer>  </answer>", Status.unparsed, None, "answer_tag"),
    ("so\n#### Alice is a knight", Status.wrong, "Alice is a knight", "hash"),
    ("the answer is 5", Status.unparsed, None, "none"),
    ("<answer>5</answer><|im_end|>\n<answer>6</answer>", Status.wrong, "5", "answer_tag"),
])
def test_extraction_reads_answer_tags_then_a_hash_line(completion, status, answer, method):
    found = extract_gym_answer(completion)
    assert (found.status, found.answer, found.method) == (status, answer, method)


rg = pytest.importorskip("reasoning_gym")
from rlvr.tasks.gym import generate_gym, rebuild_entry  # noqa: E402

DATASETS = "countdown(min_numbers=3, max_numbers=4),knights_knaves(n_people=2),basic_arithmetic"


@pytest.fixture(scope="module")
def tasks():
    return generate_gym(DATASETS, 30, seed=0)


def _candidates(task):
    """(completion, the answer reasoning-gym is given) pairs: the reference, wrong answers,
    malformed ones, and the reference in the '####' form."""
    ref = task.reference["entry"]["answer"]
    return [(f"Reasoning.\n<answer>{ref}</answer>", ref),
            (f"<answer>{ref} + 1</answer>", f"{ref} + 1"),
            ("<answer>Alice is a knave, and Bob is a knight.</answer>",
             "Alice is a knave, and Bob is a knight."),
            ("<answer>12</answer>", "12"),
            ("<answer>no idea :(</answer>", "no idea :("),
            (f"Reasoning.\n#### {ref}", ref)]


def test_outcome_equals_score_answer_on_the_original_entries(tasks):
    pipeline = RewardPipeline(RewardConfig(workers=0))
    cases = [(task, completion, answer) for task in tasks
             for completion, answer in _candidates(task)]
    # one batch: countdown's answers go to the sandbox together
    results = pipeline.score_batch([ScoreRequest(c, t.reference, "reasoning_gym")
                                    for t, c, _ in cases])
    seen = set()
    for (task, completion, answer), result in zip(cases, results):
        entry = rebuild_entry(task.metadata)  # the item as reasoning-gym made it, no JSON
        ds = rg.create_dataset(task.metadata["dataset"], **task.metadata["config"])
        expected = ds.score_answer(answer, entry)
        assert result.components["outcome"] == pytest.approx(expected), (completion, task.id)
        assert result.status == (Status.correct if expected >= 1 else Status.wrong)
        seen.add((task.category, expected >= 1, 0 < expected < 1))
    # right and wrong answers on every dataset, and partial credit (countdown 0.05 / 0.01)
    assert {(c, True) for c in ("countdown", "knights_knaves", "basic_arithmetic")} <= \
        {(c, ok) for c, ok, _ in seen}
    assert any(partial for _, _, partial in seen)


def test_unparsed_and_code_answers_score_zero_and_run_nothing(tasks, tmp_path):
    pipeline = RewardPipeline(RewardConfig(workers=0))
    countdown = next(t for t in tasks if t.category == "countdown")
    marker = tmp_path / "ran"
    code = f"<answer>__import__('pathlib').Path({str(marker)!r}).touch()</answer>"
    for completion in ("no tags at all", code, "<answer>1</answer><answer>2</answer>"):
        result = pipeline.score(completion, countdown.reference, "reasoning_gym")
        assert result.components["outcome"] == 0.0 and result.status != Status.correct
    assert not marker.exists()


def test_partial_credit_off_gives_zero_or_one(tasks):
    config = RewardConfig(workers=0, verifier_options={"reasoning_gym": {"partial_credit": False}})
    countdown = next(t for t in tasks if t.category == "countdown")
    pipeline = RewardPipeline(config)
    wrong = pipeline.score("<answer>12</answer>", countdown.reference, "reasoning_gym")
    right = pipeline.score(countdown.solution, countdown.reference, "reasoning_gym")
    assert wrong.components["outcome"] == 0.0 and right.components["outcome"] == 1.0


def test_the_worker_pool_gives_the_same_scores_within_its_time_bound(tasks):
    requests = [ScoreRequest(c, t.reference, "reasoning_gym")
                for t in tasks[:6] for c, _ in _candidates(t)[:3]]
    with RewardPipeline(RewardConfig(workers=0)) as local, \
            RewardPipeline(RewardConfig(workers=1)) as pooled:
        here = local.score_batch(requests)
        there = pooled.score_batch(requests)
    assert [r.components for r in there] == [r.components for r in here]
    assert [r.status for r in there] == [r.status for r in here]
    assert all(r.status is not Status.timeout for r in there)


def test_a_batch_run_that_fails_as_a_whole_is_scored_answer_by_answer(tasks, monkeypatch):
    from dataclasses import replace

    from rlvr.rewards import gym_sandbox

    countdown = [t for t in tasks if t.category == "countdown"][:3]
    real_build = gym_sandbox.build_job
    sizes = []

    def broken_batches(dataset, config, items):
        sizes.append(len(items))
        job = real_build(dataset, config, items)
        return replace(job, program="raise SystemExit(3)") if len(items) > 1 else job

    monkeypatch.setattr(gym_sandbox, "build_job", broken_batches)
    items = [(t.reference["entry"]["answer"], t.reference["entry"]) for t in countdown]
    items.append(("12", countdown[0].reference["entry"]))
    scored = gym_sandbox.score_untrusted([("countdown", countdown[0].reference["config"],
                                           items)])[0]
    ds = rg.create_dataset("countdown", **countdown[0].reference["config"])
    assert sizes == [4, 1, 1, 1, 1]  # the batch, then each answer on its own
    assert [s.kind for s in scored] == ["ok"] * 4
    assert [s.value for s in scored] == [ds.score_answer(a, e) for a, e in items]


def test_a_bad_reference_fails_its_own_item_and_not_its_batch(tasks):
    countdown = next(t for t in tasks if t.category == "countdown")
    unknown = {**countdown.reference, "dataset": "no_such_dataset"}
    bad_option = {**countdown.reference, "config": {"min_numbers": "three"}}
    with RewardPipeline(RewardConfig(workers=0)) as pipeline:
        results = pipeline.score_batch([ScoreRequest(countdown.solution, ref, "reasoning_gym")
                                        for ref in (unknown, countdown.reference, bad_option)])
    assert [r.status for r in results] == [Status.error, Status.correct, Status.error]
    assert "no_such_dataset" in results[0].detail

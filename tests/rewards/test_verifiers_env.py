"""`verifiers` environments in rlvr (rlvr.rewards.verifiers_env, rlvr.tasks.verifiers_source),
with the small environment module tests/rewards/vf_tiny_env.py (no hub download): its rows
become tasks, its rubric's reward equals the one computed directly from its weighted reward
functions (one of them async), per-function scores are logged, multi-turn, tool and group
rubrics are refused (multi-turn and tool ones naming the env: route)."""

import asyncio

import pytest

pytest.importorskip("verifiers")
pytest.importorskip("datasets")

import vf_tiny_env

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.types import Status
from rlvr.rewards.verifiers_env import VerifiersEnvError, load, prompt_text
from rlvr.tasks.config import DataConfig
from rlvr.tasks.sources import load_tasks
from rlvr.tasks.verifiers_source import generate_verifiers

MIX = "vf_tiny_env(n=40)"


def direct_reward(completion: str, answer: str) -> tuple[float, dict]:
    """The rubric's reward computed by hand: its functions called as verifiers calls them
    (parser, completion messages, answer), the async one awaited, weighted 0.8 / 0.2."""
    parser = vf_tiny_env.vf.Parser(extract_fn=vf_tiny_env.final_number)
    messages = [{"role": "assistant", "content": completion}]
    correct = vf_tiny_env.correct_answer(parser=parser, completion=messages, answer=answer)
    brevity = asyncio.run(vf_tiny_env.brevity(completion=messages))
    return 0.8 * correct + 0.2 * brevity, {"correct_answer": correct, "brevity": brevity}


COMPLETIONS = ["#### {answer}", "Adding them.\n#### {answer}", "#### 1", "I am not sure.",
               "x" * 150 + "\n#### {answer}", "#### {answer} or so"]


def test_rows_become_tasks_with_the_system_prompt_and_the_row_as_reference():
    tasks = generate_verifiers(MIX, 5, seed=0)
    task = tasks[0]
    row = task.reference["row"]
    assert task.task_type == "verifiers" and task.source == "verifiers"
    assert task.reference["env"] == "vf_tiny_env" and task.reference["kwargs"] == {"n": 40}
    assert task.prompt == f"{vf_tiny_env.SYSTEM}\n\n{row['question']}"
    assert row["answer"] == str(row["info"]["a"] + row["info"]["b"])
    assert task.category == "vf_tiny_env"


def test_same_seed_same_tasks_and_train_validation_disjoint():
    a, b = generate_verifiers(MIX, 10, seed=1), generate_verifiers(MIX, 10, seed=1)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    train = generate_verifiers(MIX, 100, seed=0, split="train")
    val = generate_verifiers(MIX, 100, seed=0, split="validation")
    assert len(train) + len(val) == 40  # a finite dataset gives at most its rows
    assert {t.prompt for t in train}.isdisjoint({t.prompt for t in val}) and val


def test_an_eval_dataset_is_the_validation_split():
    spec = "vf_tiny_env(n=20, eval_n=6)"
    val = generate_verifiers(spec, 50, seed=0, split="validation")
    train = generate_verifiers(spec, 50, seed=0, split="train")
    assert len(val) == 6 and len(train) == 20
    assert all(t.reference["row"]["info"]["b"] >= 100 for t in val)  # the eval rows


@pytest.mark.parametrize("workers", [0, 1])
def test_the_rubric_gives_the_same_reward_through_rlvr_as_called_directly(workers):
    tasks = generate_verifiers(MIX, 4, seed=0)
    requests, expected = [], []
    for task in tasks:
        answer = task.reference["row"]["answer"]
        for template in COMPLETIONS:
            text = template.format(answer=answer)
            requests.append(ScoreRequest(text, task.reference, "verifiers"))
            expected.append(direct_reward(text, answer))
    with RewardPipeline(RewardConfig(workers=workers)) as pipeline:
        results = pipeline.score_batch(requests)
    for result, (reward, parts) in zip(results, expected):
        assert result.reward == pytest.approx(reward)
        assert result.components["outcome"] == pytest.approx(reward)
        for name, value in parts.items():
            assert result.components[f"rubric/{name}"] == pytest.approx(value)
    statuses = [r.status for r in results[:len(COMPLETIONS)]]
    # correct only at the full score 1.0; the long right answer's 0.9 passes verifiers'
    # threshold (0.5) and says so in `rubric_pass`, but is no pass@1
    assert statuses == [Status.correct, Status.correct, Status.wrong, Status.unparsed,
                        Status.wrong, Status.wrong]
    assert [r.components["rubric_pass"] for r in results[:len(COMPLETIONS)]] == [
        1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert {round(r.reward, 2) for r in results} == {1.0, 0.2, 0.9}


def test_data_config_and_load_tasks():
    data = DataConfig(source="verifiers", mixture=MIX, train_size=10, val_size=5)
    assert data.instruction == ""  # the environment's prompt states its format
    train, val = load_tasks(data, seed=0)
    assert len(train) == 10 and len(val) == 5
    with pytest.raises(ValueError, match="mixture: data.source verifiers has no default"):
        DataConfig(source="verifiers")


@pytest.mark.parametrize("kind, words", [
    ("multi", ["is a _Echo (multi-turn)", "single-turn", "env: {source: verifiers"]),
    ("tool", ["is a ToolEnv (multi-turn)", "env: {source: verifiers"]),
    ("group", ["group reward functions", "scores each completion alone"]),
])
def test_multi_turn_tool_and_group_rubrics_are_refused_with_a_reason(kind, words):
    with pytest.raises(VerifiersEnvError) as info:
        load("vf_tiny_env", {"kind": kind})
    assert all(w in str(info.value) for w in words), str(info.value)
    with pytest.raises(ValueError, match="single-turn|group reward"):
        DataConfig(source="verifiers", mixture=f"vf_tiny_env(kind='{kind}')")


def test_a_reward_outside_zero_one_needs_a_scale():
    task = generate_verifiers("vf_tiny_env(weights=(1.0, 1.0))", 1, seed=0)[0]
    text = f"#### {task.reference['row']['answer']}"
    over = RewardPipeline(RewardConfig(workers=0)).score(text, task.reference, "verifiers")
    assert over.status is Status.error and "outside [0, 1]" in over.detail
    scaled = RewardPipeline(RewardConfig(workers=0, verifier_options={
        "verifiers": {"scale": 0.5}})).score(text, task.reference, "verifiers")
    assert scaled.reward == pytest.approx(1.0) and scaled.components["rubric/brevity"] == 1.0


def test_prompt_text_refuses_few_shot_turns():
    assert prompt_text("plain", "m") == "plain"
    with pytest.raises(VerifiersEnvError, match="role 'assistant'"):
        prompt_text([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                     {"role": "user", "content": "c"}], "m")


def test_rlvr_eval_tasks_verifiers_scores_with_the_rubric(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json

    from typer.testing import CliRunner

    from rlvr.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", "--model", "tiny-random", "--tasks", "verifiers",
                                      "--mixture", MIX, "--limit", "3", "--n", "2",
                                      "--max-new-tokens", "4", "--batch-size", "4",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and {r["task_type"] for r in rows} == {"verifiers"}
    for row in rows:  # a random model's few tokens: no answer, the brevity function's share
        reward, parts = direct_reward(row["completion"], row["reference"]["row"]["answer"])
        assert row["reward"] == pytest.approx(reward)
        assert row["components"]["rubric/brevity"] == pytest.approx(parts["brevity"])


def test_a_partial_rubric_score_is_not_correct_at_the_pass_threshold():
    # one reward function of weight 1.0 giving 0.5 for a part-right answer (an answer that
    # contains the right one, as reasoning-gym's scorer does): verifiers' threshold 0.5 is met
    # and reported as rubric_pass, but the answer is wrong, and pass@1 counts only full scores
    task = generate_verifiers("vf_tiny_env(weights=(0.5, 0.5))", 1, seed=0)[0]
    answer = task.reference["row"]["answer"]
    pipeline = RewardPipeline(RewardConfig(workers=0))
    wrong = pipeline.score("#### 1", task.reference, "verifiers")  # brevity only: 0.5
    assert wrong.reward == pytest.approx(0.5) and wrong.status is Status.wrong
    assert wrong.components["rubric_pass"] == 1.0
    assert "rubric reward 0.5 of 1 (the environment's pass_threshold 0.5: met)" in wrong.detail
    right = pipeline.score(f"#### {answer}", task.reference, "verifiers")
    assert right.reward == pytest.approx(1.0) and right.status is Status.correct


def test_an_environment_module_next_to_the_config_imports(tmp_path, monkeypatch):
    import os
    import sys

    # the `rlvr` console script's sys.path has no working directory: neither has this one
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    (tmp_path / "vf_next_to_config.py").write_text(
        "from vf_tiny_env import load_environment  # noqa: F401\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    env = load("vf_next_to_config", {"n": 3})
    assert len(env.dataset) == 3
    assert generate_verifiers("vf_next_to_config(n=3)", 2, seed=0)[0].category == \
        "vf_next_to_config"


def test_a_missing_environment_module_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(VerifiersEnvError) as info:
        load("no_such_vf_env_xyz", {})
    message = str(info.value)
    assert message.startswith("verifiers environment module 'no_such_vf_env_xyz' not found: "
                              "no no_such_vf_env_xyz.py (or package no_such_vf_env_xyz/) in "
                              f"the working directory {tmp_path}")
    (tmp_path / "vf_broken_env.py").write_text("import no_such_dependency_xyz\n",
                                               encoding="utf-8")
    with pytest.raises(VerifiersEnvError, match="'vf_broken_env' .* failed to import: "
                                                "ModuleNotFoundError: No module named "
                                                "'no_such_dependency_xyz'"):
        load("vf_broken_env", {})

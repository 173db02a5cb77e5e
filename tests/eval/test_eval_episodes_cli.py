"""`rlvr eval --env`: pass@k / maj@k over episodes of an environment on the tiny random model:
each completion row is an episode (its final answer, its trajectory with trained and
environment segments, turns, tool calls), the verdict the environment got is not scored again,
``--env single_turn`` reproduces the plain evaluation, and bad options exit 2 naming them."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app
from rlvr.eval.episode_sampler import EpisodeGenerated
from rlvr.eval.records import score_problems
from rlvr.records import Generated
from rlvr.rewards.types import RewardResult, Status

runner = CliRunner()
COMMON = ["--model", "tiny-random", "--tasks", "arithmetic", "--mixture", "1dop1d", "--limit",
          "3", "--n", "2", "--max-new-tokens", "8", "--batch-size", "3"]


def _run(tmp_path, name, *extra):
    out = tmp_path / name
    result = runner.invoke(app, ["eval", *COMMON, *extra, "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    return json.loads((out / "results.json").read_text()), rows


def test_tool_env_episodes_are_evaluated(tmp_path):
    r, rows = _run(tmp_path, "tool", "--env", "tool", "--tools", "calculator",
                   "--max-turns", "2")
    assert r["settings"]["env"]["name"] == "tool"
    assert r["settings"]["env"]["tools"] == ["calculator"]
    assert r["settings"]["env"]["max_turns"] == 2
    assert len(rows) == 3 * 2
    for row in rows:
        trajectory = row["trajectory"]
        assert trajectory[0]["role"] == "assistant" and trajectory[0]["trained"]
        assert all(s["trained"] == (s["role"] == "assistant") for s in trajectory)
        assert row["turns"] == sum(s["trained"] for s in trajectory) <= 2
        # tokens counts the sampled ones; the completion is the answer the verdict judged
        assert row["tokens"] == sum(s["tokens"] for s in trajectory if s["trained"])
        assert row["completion"] == trajectory[-1]["text"] or row["finish_reason"] != "stop"
        assert row["finish_reason"] in ("stop", "length", "max_turns")
    correct = {}
    for row in rows:
        correct.setdefault(row["id"], []).append(row["status"] == "correct")
    expected = sum(sum(v) / 2 for v in correct.values()) / 3
    assert r["models"]["tiny-random"]["pass@k"]["1"] == pytest.approx(expected)


def test_single_turn_env_reproduces_the_plain_evaluation(tmp_path):
    plain, plain_rows = _run(tmp_path, "plain")
    episodic, rows = _run(tmp_path, "episodes", "--env", "single_turn")
    assert [x["completion"] for x in rows] == [x["completion"] for x in plain_rows]
    assert [x["reward"] for x in rows] == [x["reward"] for x in plain_rows]
    assert [x["tokens"] for x in rows] == [x["tokens"] for x in plain_rows]
    for key in ("pass@k", "maj@k"):
        assert episodic["models"]["tiny-random"][key] == plain["models"]["tiny-random"][key]


def test_a_configs_env_section_is_the_default(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("env:\n  name: tool\n  tools: [calculator]\n  max_turns: 3\n")
    r, rows = _run(tmp_path, "config", "--config", str(config), "--max-turns", "2")
    assert (r["settings"]["env"]["name"], r["settings"]["env"]["tools"],
            r["settings"]["env"]["max_turns"]) == ("tool", ["calculator"], 2)
    assert all("trajectory" in row for row in rows)


@pytest.mark.parametrize("extra, message", [
    (["--env", "tol"], "--env: name: unknown environment 'tol'"),
    (["--env", "tool", "--tools", "calculater"], "--tools: tools: unknown tool 'calculater'"),
    (["--tools", "calculator"], "--tools: needs --env NAME"),
])
def test_bad_env_options_exit_2_naming_them(tmp_path, extra, message):
    result = runner.invoke(app, ["eval", *COMMON, *extra, "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_an_episodes_verdict_is_not_scored_again():
    class Refusing:
        def score_batch(self, requests, progress=None):
            assert [r.completion for r in requests] == ["plain text"]
            return [RewardResult(0.0, {"outcome": 0.0}, Status.wrong, "1")]

    verdict = RewardResult(1.0, {"outcome": 1.0}, Status.correct, "5")
    problem = {"id": "p", "task_type": "math", "reference": "5"}
    gens = [EpisodeGenerated("#### 5", tokens=3, verdict=verdict, episode={"turns": 2}),
            Generated("plain text", tokens=2)]
    (result,) = score_problems(Refusing(), [problem], [gens])
    assert [s.status for s in result.samples] == ["correct", "wrong"]
    assert result.samples[0].extracted == "5"

"""Training on arithmetic or GSM8K sets the math verifier's ``accept_unevaluated: false`` by
itself (RunConfig), so a completion that only repeats the question's arithmetic (``#### 81 *
7`` for 567) earns no reward there, while the verifier's default (``rlvr verify``, a plain
RewardConfig) counts it as equal to its value."""

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.configio import load_config
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.types import Status
from rlvr.train.config import RunConfig

# completion that repeats the question's arithmetic, reference
REPEATS = [("#### 81 * 7", "567"), ("48 + 24 = ?\n#### 48 + 24", "72")]
DONE = ("81 * 7 = 567\n#### 567", "567")  # the arithmetic done: correct everywhere


def _score(reward_config):
    with RewardPipeline(reward_config) as pipeline:
        return pipeline.score_batch([ScoreRequest(c, ref, "math") for c, ref in [*REPEATS, DONE]])


@pytest.mark.parametrize("overrides", [
    [],  # the default data source: arithmetic
    ["data.source=arithmetic"],
    ["data.source=gsm8k", "data.path=../shared/data/gsm8k"],
    ["data.sources=[{source: gsm8k, path: g, weight: 0.5}, {source: jsonl, path: j, weight: 0.5}]"],
], ids=["default", "arithmetic", "gsm8k", "mixture-with-gsm8k"])
def test_training_on_arithmetic_or_gsm8k_rejects_repeated_arithmetic(overrides):
    config = load_config(RunConfig, None, overrides)  # no YAML: the option is not written
    assert config.reward.verifier_options["math"] == {"accept_unevaluated": False}
    *repeats, done = _score(config.reward)
    for result in repeats:
        assert result.status is Status.wrong and "unevaluated arithmetic" in result.detail
        assert result.components["outcome"] == 0.0
        assert result.reward == pytest.approx(0.1 * result.components["format"])  # format only
    assert repeats[0].reward == 0.0  # "#### 81 * 7": no reward at all
    assert done.status is Status.correct and done.components["outcome"] == 1.0


def test_the_verifier_default_accepts_repeated_arithmetic():
    *repeats, done = _score(RewardConfig())
    for result in [*repeats, done]:
        assert result.status is Status.correct and result.components["outcome"] == 1.0
    assert repeats[0].reward == 1.0  # "#### 81 * 7": the whole outcome reward


def test_rlvr_verify_uses_the_default(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"task_type": "math", "completion": c, "reference": r})
                           + "\n" for c, r in REPEATS))
    result = runner_invoke(["verify", str(inp)])
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["status"], r["components"]["outcome"]) for r in rows] == [("correct", 1.0)] * 2


def test_other_sources_and_an_explicit_setting_keep_their_value():
    jsonl = load_config(RunConfig, None, ["data.source=jsonl", "data.path=tasks.jsonl"])
    assert "accept_unevaluated" not in jsonl.reward.verifier_options.get("math", {})
    assert _score(jsonl.reward)[0].status is Status.correct
    explicit = load_config(RunConfig, None, [
        "data.source=arithmetic", "reward.verifier_options={math: {accept_unevaluated: true}}"])
    assert explicit.reward.verifier_options["math"] == {"accept_unevaluated": True}
    assert _score(explicit.reward)[0].status is Status.correct


def runner_invoke(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result

"""`rlvr train` end to end on the smoke preset, and its refusal of bad input before any work."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
runner = CliRunner()


def test_smoke_run_writes_config_metrics_checkpoint_and_results(tmp_path):
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run),
                                 "--set", "grpo.steps=2", "--set", "sft.epochs=1"])
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["grpo"]["steps"] == 2 and saved["model"]["name"] == "tiny-random"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("reward_mean", "accuracy", "zero_variance_fraction", "truncation_rate", "lr",
                "seconds_rollout", "seconds_reward", "seconds_update"):
        assert key in metrics[0]
    results = json.loads((run / "results.json").read_text())
    assert results["trained"]["n"] == 16 and results["baseline"]["label"] == "before_grpo"
    assert (run / "checkpoints" / "step-000002" / "model.safetensors").is_file()
    assert "pass@1 gain" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "grpo.group_size=1"], "grpo.group_size: Input should be greater than or equal to 2"),
        (["--set", "grpo.stpes=3"], "grpo.stpes: unknown key; did you mean 'steps'?"),
        (["--set", "grpo.learning_rate=fast"], "grpo.learning_rate: Input should be a valid number"),
        (["--set", "data.source=gsm8k", "--set", "data.path=/no/such/dir"], "/no/such/dir"),
        (["--set", "algo.loss_agg=dapo2"], "algo.loss_agg: 'dapo2' is unknown"),
        (["--set", "model.name=nonexistent-model"], "model.name: 'nonexistent-model'"),
    ],
)
def test_bad_input_exits_2_before_any_work(tmp_path, args, message):
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(tmp_path / "r"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()


def test_data_that_cannot_be_generated_exits_2(tmp_path):
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(tmp_path / "r"),
                                 "--set", "data.train_size=5000"])
    assert result.exit_code == 2, result.output
    assert "data: level '1dop1d' ran out of distinct train problems" in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()

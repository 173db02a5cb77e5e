"""`rlvr train` on the `code` preset (MBPP, sandboxed unit-test rewards) with a tiny model."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app

ROOT = Path(__file__).resolve().parents[2]
CODE = str(ROOT / "configs" / "code.yaml")
MBPP = ROOT.parent / "shared" / "data" / "mbpp"
runner = CliRunner()


@pytest.mark.skipif(not (MBPP / "mbpp.jsonl").exists(), reason="shared MBPP data absent")
@pytest.mark.timeout(600)  # a hang guard only: speed is benchmarks/' business, never asserted
def test_code_preset_trains_on_mbpp_with_a_tiny_model(tmp_path):
    run = tmp_path / "run"
    result = runner.invoke(app, [
        "train", "--config", CODE, "-o", str(run),
        "--set", "model.name=tiny-random", "--set", "grpo.steps=2",
        "--set", f"data.path={MBPP}", "--set", "data.train_size=16", "--set", "data.val_size=4",
        "--set", "sft.examples=8", "--set", "sft.batch_size=8", "--set", "sft.max_length=256",
        "--set", "grpo.prompts_per_step=2", "--set", "grpo.max_new_tokens=16",
        "--set", "eval.max_new_tokens=16"])
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["source"] == "mbpp" and saved["grpo"]["group_size"] == 8
    assert saved["reward"]["format_rule"] == {"code": "code_block"}
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["verifier_errors"] == 0 for m in metrics)
    results = json.loads((run / "results.json").read_text())
    assert results["trained"]["n"] == 4 and results["baseline"]["label"] == "before_grpo"
    assert results["sft"] is not None  # the MBPP reference solutions verified in the sandbox
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["status"] in ("correct", "wrong", "unparsed", "timeout")
                           for s in samples)
    assert "sft: 8 verified examples, 0 rejected" in result.output

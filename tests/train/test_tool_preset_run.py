"""`rlvr train` with tool-use demonstrations and the no-tool row, end to end on the tiny random
model (the shape of configs/tool_arithmetic.yaml, a few steps): SFT trains on verified
demonstrations played through the run's `tool` env, and results.json / the console table hold
the three rows on the same validation problems."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.eval.paired import gain_summary

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["train", "--config", str(ROOT / "configs" / "smoke.yaml"),
        "--set", "data.source=tool_arithmetic", "--set", "data.mixture=3dx3d,words2",
        "--set", "data.train_size=16", "--set", "data.val_size=4",
        "--set", "sft.demonstrations=tool", "--set", "sft.mixture=3dx3d",
        "--set", "sft.examples=8", "--set", "sft.epochs=1", "--set", "sft.max_length=600",
        "--set", "env.name=tool", "--set", "env.tools=[calculator]", "--set", "env.max_turns=2",
        "--set", "env.system_prompt='Tools - {tools}'",
        "--set", "grpo.steps=1", "--set", "grpo.max_new_tokens=8", "--set", "eval.every=0",
        "--set", "eval.max_new_tokens=8", "--set", "eval.pass_at_k_samples=0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("tool") / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", *ARGS, "-o", str(run_dir)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, proc.stdout + proc.stderr


def test_sft_trained_on_verified_tool_demonstrations(run):
    run_dir, out = run
    results = json.loads((run_dir / "results.json").read_text())
    assert results["sft"]["kept"] == 8 and results["sft"]["rejected"] == 0
    assert "sft: 8 verified tool-use demonstrations, 0 rejected" in out
    config = (run_dir / "config.yaml").read_text()
    assert "demonstrations: tool" in config


def test_results_hold_three_rows_on_the_same_problems(run):
    run_dir, out = run
    results = json.loads((run_dir / "results.json").read_text())
    no_tool, sft, grpo = results["no_tool"], results["baseline"], results["trained"]
    assert (no_tool["label"], sft["label"], grpo["label"]) == ("no_tool", "before_grpo",
                                                               "trained")
    assert no_tool["n"] == sft["n"] == grpo["n"] == 4
    assert results["gain_over_no_tool"] == pytest.approx(grpo["pass_at_1"]
                                                         - no_tool["pass_at_1"])
    saved = json.loads((run_dir / "no_tool_validation.json").read_text())
    # the no-tool samples answer the plain prompt in one turn: no tool observation in them
    assert [s["id"] for s in saved["samples"]] == [
        json.loads(line)["id"] for line in
        (run_dir / "validation_samples.jsonl").read_text().splitlines()][:4]
    for name in ("no tool (before SFT, one turn)", "SFT tool model (entered GRPO)",
                 "GRPO tool model"):
        assert name in out
    paired = gain_summary(results["gain_pass_at_1_ci"])
    assert paired.startswith("95% CI ")
    gains = (f"pass@1 gain: {results['gain_pass_at_1'] * 100:+.1f} points ({paired}) over the "
             f"checkpoint that entered GRPO ({results['gain_over_no_tool'] * 100:+.1f} over the "
             "model without the tool)")
    assert gains in out

"""`rlvr train` with an `env:` section end to end on the tiny random model: every GRPO
rollout, validation and pass@k plays multi-turn episodes (the scripted `test_first_call`
environment: the first turn calls the real calculator, so every episode has a tool
observation), metrics.jsonl has the episode metrics, samples.jsonl / validation_samples.jsonl
the trajectories with their environment spans marked not trained, the HTML report shows them,
and a run killed with SIGKILL mid-GRPO resumes to exactly the uninterrupted run's logs and
weights."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RLVR = [sys.executable, "-m", "rlvr.cli"]
ARGS = ["train", "--config", str(ROOT / "configs" / "smoke.yaml"), "--set", "grpo.steps=4",
        "--set", "sft.enabled=false", "--set", "checkpoint.every=1", "--set", "eval.every=2",
        "--set", "data.val_size=6", "--set", "eval.pass_at_k_samples=2",
        "--set", "env.name=test_first_call", "--set", "env.tools=[calculator]",
        "--set", "env.max_turns=2", "--set", "env.plugins=[rlvr_multiturn_plugin]",
        # rewards that differ within a group (the tiny model scores 0 on arithmetic), so
        # every step updates the policy
        "--set", "reward.plugins=[rlvr_multiturn_plugin]",
        "--set", "reward.verifiers={math: test-chars}",
        "--set", "grpo.max_new_tokens=12", "--set", "eval.max_new_tokens=12"]
TIMING = ("seconds_rollout", "seconds_reward", "seconds_update", "tokens_per_second", "seconds",
          "time", "tool_seconds")


def _env() -> dict:
    # this checkout's rlvr, and tests/train for the plugin environment
    path = [str(ROOT / "src"), str(ROOT / "tests" / "train"), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(p for p in path if p))


def _start(run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([*RLVR, *ARGS, "-o", str(run_dir)], cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _weights(run_dir: Path, step: int = 4) -> dict:
    return load_file(str(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    proc = _start(run_dir)
    assert proc.wait(timeout=600) == 0, proc.stderr.read()
    return run_dir


def test_metrics_samples_and_report_show_episodes(uninterrupted):
    metrics = _rows(uninterrupted / "metrics.jsonl")
    assert len(metrics) == 4
    for m in metrics:
        # the first turn always calls the calculator; the second is the last (a call there is
        # not run)
        assert m["episode_turns_mean"] == 2.0 and m["episode_tool_calls_mean"] == 1.0
        assert m["tool_error_rate"] == 0.0 and m["episodes_tool_use"] == 16.0
        assert m["finish_rate/stop"] + m["finish_rate/length"] + m["finish_rate/max_turns"] == 1
        assert m["length_mean"] <= 2 * 12  # sampled tokens only: two turns of at most 12
        assert m["train_rows"] > 0 and m["zero_variance_fraction"] < 1
    samples = _rows(uninterrupted / "samples.jsonl")
    assert samples
    for row in samples:
        roles = [(s["role"], s["trained"]) for s in row["trajectory"]]
        assert roles == [("assistant", True), ("tool", False), ("assistant", True)]
        assert row["trajectory"][1]["text"] == "5"  # the calculator's answer to 2 + 3
        assert row["turns"] == 2 and row["tool_calls"] == 1
    validation = _rows(uninterrupted / "validation.jsonl")
    assert [v["label"] for v in validation] == ["before_grpo", "grpo", "trained"]
    assert all(v["episode_turns_mean"] == 2.0 for v in validation)
    shown = _rows(uninterrupted / "validation_samples.jsonl")
    assert shown and all(r["trajectory"][1] == {"role": "tool", "text": "5", "trained": False,
                                                "tokens": r["trajectory"][1]["tokens"]}
                         for r in shown)
    start, end = _weights(uninterrupted, 0), _weights(uninterrupted)
    assert any(not torch.equal(start[k], end[k]) for k in start)  # GRPO trained the policy
    results = json.loads((uninterrupted / "results.json").read_text())
    assert results["pass_at_k"]["trained"]["n"] == 2
    report = subprocess.run([*RLVR, "report", str(uninterrupted)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    page = (uninterrupted / "report.html").read_text()
    assert "tool: environment, not trained" in page and 'class="segment env"' in page
    assert "Turns and tool calls per episode" in page


def test_sigkill_mid_grpo_then_resume_equals_the_uninterrupted_run(tmp_path, uninterrupted):
    run_dir = tmp_path / "run"
    proc = _start(run_dir)
    deadline = time.monotonic() + 600
    while _lines(run_dir / "metrics.jsonl") < 2:
        assert proc.poll() is None, f"run ended before the kill point: {proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run([*RLVR, "train", "--resume", str(run_dir)], cwd=ROOT, env=_env(),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr
    for name in ("metrics.jsonl", "validation.jsonl", "samples.jsonl",
                 "validation_samples.jsonl"):
        assert _rows(run_dir / name) == _rows(uninterrupted / name), name
    a, b = _weights(uninterrupted), _weights(run_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

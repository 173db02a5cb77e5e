"""A run killed with SIGKILL at any moment resumes from its last complete checkpoint and then
produces exactly the metrics, validations and alerts of an uninterrupted run (same seed, same
machine)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
RLVR = [sys.executable, "-m", "rlvr.cli"]
ARGS = ["train", "--config", str(ROOT / "configs" / "smoke.yaml"), "--set", "grpo.steps=6",
        "--set", "checkpoint.every=1", "--set", "eval.every=2", "--set", "health.window=3",
        "--set", "health.min_history=2", "--set", "eval.pass_at_k_samples=4"]
TIMING = ("seconds_rollout", "seconds_reward", "seconds_update", "tokens_per_second", "seconds",
          "time")


def _start(run_dir: Path, *extra) -> subprocess.Popen:
    env = dict(os.environ, PYTHONHASHSEED="0")
    return subprocess.Popen([*RLVR, *ARGS, "-o", str(run_dir), *extra], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def _saving(run_dir: Path) -> bool:  # a checkpoint is being written right now
    root = run_dir / "checkpoints"
    return root.is_dir() and any(p.name.startswith(".step-") for p in root.iterdir())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    proc = _start(run_dir)
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    return run_dir


KILL_POINTS = {
    "after step 1": lambda d: _lines(d / "metrics.jsonl") >= 1,
    "while saving a checkpoint": lambda d: _lines(d / "metrics.jsonl") >= 3 and _saving(d),
    "after step 5": lambda d: _lines(d / "metrics.jsonl") >= 5,
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_then_resume_equals_the_uninterrupted_run(tmp_path, uninterrupted, point):
    run_dir = tmp_path / "run"
    proc = _start(run_dir)
    deadline = time.monotonic() + 300
    while not KILL_POINTS[point](run_dir):
        assert proc.poll() is None, f"run ended before the kill point: {proc.stderr.read()}"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run([*RLVR, "train", "--resume", str(run_dir)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, PYTHONHASHSEED="0"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr
    assert not _saving(run_dir)  # a save the kill interrupted left no temp dir behind
    for name in ("metrics.jsonl", "validation.jsonl", "alerts.jsonl", "samples.jsonl"):
        assert _rows(run_dir / name) == _rows(uninterrupted / name), name
    a = json.loads((uninterrupted / "results.json").read_text())
    b = json.loads((run_dir / "results.json").read_text())
    assert b["trained"]["pass_at_1"] == a["trained"]["pass_at_1"]
    assert b["pass_at_k"]["trained"]["pass@k"] == a["pass_at_k"]["trained"]["pass@k"]


def test_a_run_killed_before_its_first_checkpoint_cannot_resume_and_says_so(tmp_path):
    run_dir = tmp_path / "run"
    proc = _start(run_dir)
    while not (run_dir / "config.yaml").is_file():
        assert proc.poll() is None
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run([*RLVR, "train", "--resume", str(run_dir)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 2
    assert "has no complete checkpoint" in " ".join(resumed.stderr.split())  # rich wraps lines

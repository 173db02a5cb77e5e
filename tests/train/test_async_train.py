"""Asynchronous rollouts in ``rlvr train`` (``grpo.max_staleness``), end to end on the tiny
model through the CLI:

- ``grpo.max_staleness: 0`` is the synchronous run, metrics bit for bit (fp32);
- with k = 2 every step trains only on groups sampled at most 2 updates ago and logs the
  staleness histogram, drops and the time split;
- a rollout worker killed with SIGKILL mid-run stops the run within 60 s with an error naming
  it (exit status 1), never a hang;
- a run killed with SIGKILL and resumed trains every step once, never on a group staler than
  k (``staleness_max`` of every row of ``metrics.jsonl``), and its worker process did not
  outlive it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from train_process import RLVR, SMALL, WORKER, Started, metrics_rows, process_gone, wait_rows

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
TIMING = re.compile(r"^seconds|tokens_per_second|^time$")


def _env() -> dict:
    return dict(os.environ, PYTHONHASHSEED="0")


def _run(run_dir: Path, *sets: str, timeout: float = 600) -> subprocess.CompletedProcess:
    args = [*RLVR, *SMALL, *(x for s in sets for x in ("--set", s)), "-o", str(run_dir)]
    return subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def _untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not TIMING.search(k)} for r in rows]


@pytest.mark.parametrize(("sets", "message"), [
    (["rollout.quantization=int8"], "rollout.quantization: int8 runs in this process only"),
    (["rollout.engine=vllm"], "the local rollout worker process runs the torch or hf engine"),
])
def test_configs_async_rollouts_cannot_run_are_refused(sets, message):
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    smoke = ROOT / "configs" / "smoke.yaml"
    assert load_config(RunConfig, smoke, ["grpo.max_staleness=3"]).grpo.max_staleness == 3
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(RunConfig, smoke, ["grpo.max_staleness=1", *sets])
    # the same settings are fine for the synchronous loop
    load_config(RunConfig, smoke, ["grpo.max_staleness=0", *sets])


def test_episodes_are_refused_with_async_rollouts():
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    tool = ROOT / "configs" / "tool_arithmetic.yaml"
    with pytest.raises(ValueError, match="cannot be combined with an env section"):
        load_config(RunConfig, tool, ["grpo.max_staleness=1"])


@pytest.mark.timeout(900)
def test_max_staleness_zero_is_the_synchronous_run_bit_for_bit(tmp_path):
    plain = _run(tmp_path / "plain", "grpo.steps=3")
    assert plain.returncode == 0, plain.stderr
    zero = _run(tmp_path / "zero", "grpo.steps=3", "grpo.max_staleness=0")
    assert zero.returncode == 0, zero.stderr
    a, b = metrics_rows(tmp_path / "plain"), metrics_rows(tmp_path / "zero")
    assert len(a) == 3 and _untimed(a) == _untimed(b)
    assert not any(k.startswith("staleness") for k in a[0])


@pytest.mark.timeout(900)
def test_async_run_trains_within_the_bound_and_logs_staleness_and_idle_time(tmp_path):
    done = _run(tmp_path / "run", "grpo.steps=5", "grpo.max_staleness=2")
    assert done.returncode == 0, done.stderr
    assert WORKER.search(done.stdout + done.stderr)
    rows = metrics_rows(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    for r in rows:
        hist = [r[f"staleness_hist_{s}"] for s in range(3)]
        assert sum(hist) == 4  # prompts_per_step groups, each within the bound
        assert r["staleness_max"] <= 2
        assert r["staleness_mean"] == pytest.approx(sum(s * c for s, c in enumerate(hist)) / 4)
        for key in ("dropped_stale", "seconds_trainer_idle", "seconds_rollout_idle",
                    "seconds_weight_sync"):
            assert r[key] >= 0
    assert rows[0]["staleness_max"] == 0  # nothing existed before the first weights


@pytest.mark.timeout(900)
def test_killing_the_rollout_worker_stops_the_run_with_its_name(tmp_path):
    run_dir = tmp_path / "run"
    run = Started([*RLVR, *SMALL, "--set", "grpo.steps=400", "--set", "grpo.max_staleness=1",
                   "--set", "checkpoint.every=0", "-o", str(run_dir)], _env())
    pid, code = run.kill_worker_after(run_dir, rows=2)
    err = run.stderr()
    assert code == 1, err
    assert re.search(rf"error: rollout worker rlvr-rollout-0 \(pid {pid}\) died \(killed by "
                     rf"SIGKILL\) while", err), err
    assert f"rlvr train --resume {run_dir}" in err
    assert len(metrics_rows(run_dir)) < 400


@pytest.mark.timeout(900)
def test_sigkill_then_resume_never_trains_staler_than_k(tmp_path):
    run_dir, k, steps = tmp_path / "run", 2, 8
    run = Started([*RLVR, *SMALL, "--set", f"grpo.steps={steps}", "--set",
                   f"grpo.max_staleness={k}", "--set", "checkpoint.every=1", "-o",
                   str(run_dir)], _env())
    try:
        pid = run.worker_pid()
        wait_rows(run_dir, 3)
        run.proc.kill()  # SIGKILL: no cleanup runs in the trainer
        run.proc.wait()
    finally:
        run.stop()
    killed_at = len(metrics_rows(run_dir))
    assert 3 <= killed_at < steps
    assert process_gone(pid), f"the rollout worker {pid} outlived its trainer"
    resumed = subprocess.run([*RLVR, "--resume", str(run_dir)], cwd=ROOT, env=_env(),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    rows = metrics_rows(run_dir)
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    for r in rows:
        assert r["staleness_max"] <= k
        assert sum(r[f"staleness_hist_{s}"] for s in range(k + 1)) == 4

"""``rlvr train`` with asynchronous rollouts on Ray actors (``rollout.ray_address: local``
starts a private Ray cluster in the run, ``grpo.max_staleness: 1``), end to end through the
CLI on the tiny model, one rollout and one reward actor. Slow (a Ray cluster's start-up and a
cold start each): ``make test-slow``.

- A 4-step run: every step trains on ``grpo.prompts_per_step`` groups at most 1 update old;
  the staleness histogram, ``dropped_stale`` and the versions it implies (a group of
  staleness s trained at step t was sampled by version ``t - 1 - s``) agree with the
  collector's own totals saved in the final checkpoint (``rollout_source.pt``): groups
  taken per staleness, groups dropped, and every group drawn accounted for as taken,
  dropped, waiting or in flight. The rollout actor's process is gone after the run.
- The rollout actor's process killed with SIGKILL mid-run: the run stops within 60 s with an
  error naming the actor (name, pid, Ray actor id), exit status 1, never a hang.

Each run is a subprocess (niced like its parent), so the Ray cluster it starts ends with it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from train_process import RLVR, SMALL, WORKER, Started, metrics_rows, process_gone

pytest.importorskip("ray")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
GROUPS = 4  # grpo.prompts_per_step of configs/smoke.yaml
K = 1
RAY_RUN = [*SMALL, "--set", "logging.tensorboard=false", "--set", "rollout.ray_address=local",
           "--set", "rollout.ray_rollout_workers=1", "--set", "rollout.ray_reward_workers=1",
           "--set", f"grpo.max_staleness={K}"]


def _env() -> dict:
    return dict(os.environ, PYTHONHASHSEED="0", RAY_USAGE_STATS_ENABLED="0")


def _versions(row: dict) -> list[int]:
    """The policy versions of the groups a step trained, from its histogram: at step t the
    trainer has applied t - 1 updates, so staleness s means version t - 1 - s."""
    return sorted(row["step"] - 1 - s for s in range(K + 1)
                  for _ in range(int(row[f"staleness_hist_{s}"])))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ray_async_run_trains_within_the_bound_and_its_counts_add_up(tmp_path):
    steps, run_dir = 4, tmp_path / "run"
    done = subprocess.run([*RLVR, *RAY_RUN, "--set", f"grpo.steps={steps}", "-o",
                           str(run_dir)], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=800)
    assert done.returncode == 0, done.stderr
    worker = WORKER.search(done.stderr)
    assert worker, done.stderr
    assert process_gone(int(worker.group(1))), "the Ray rollout actor outlived the run"

    rows = metrics_rows(run_dir)
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    for r in rows:
        hist = [r[f"staleness_hist_{s}"] for s in range(K + 1)]
        assert sum(hist) == GROUPS, r  # every group trained is within the bound
        assert r["staleness_max"] <= K
        assert r["staleness_max"] == max(s for s, c in enumerate(hist) if c)
        assert r["staleness_mean"] == pytest.approx(
            sum(s * c for s, c in enumerate(hist)) / GROUPS)
        assert r["dropped_stale"] >= 0 and r["dropped_stale"] == int(r["dropped_stale"])
        assert r["dropped_discarded"] == 0  # no rollback
    # versions: step 1 has only the initial weights; one rollout actor returns its jobs in
    # submission order, so the versions trained never go back from one step to the next;
    # with k = 1, step t trains versions >= t - 2, so they keep up with the trainer
    versions = [_versions(r) for r in rows]
    assert versions[0] == [0] * GROUPS
    for before, after in zip(versions, versions[1:]):
        assert before[-1] <= after[0], versions
    for step, v in enumerate(versions, start=1):
        assert min(v) >= step - 1 - K

    # the collector's own totals, saved with the final checkpoint
    saved = torch.load(run_dir / "checkpoints" / f"step-{steps:06d}" / "rollout_source.pt",
                       weights_only=False)["collector"]
    taken, dropped = saved["buffer"]["taken"], saved["buffer"]["dropped"]
    for s in range(K + 1):
        assert taken.get(s, 0) == sum(r[f"staleness_hist_{s}"] for r in rows)
    assert sum(taken.values()) == steps * GROUPS
    assert sum(dropped.values()) == sum(r["dropped_stale"] for r in rows)
    assert all(s > K for s in dropped)  # only groups staler than the bound are dropped
    waiting = [v for _, v in saved["buffer"]["items"]]
    in_flight = sum(len(job.prompts) for job in saved["in_flight"])
    # every group drawn (whole jobs of GROUPS prompts) is taken, dropped, waiting or in flight
    assert saved["next_job_id"] * GROUPS == (sum(taken.values()) + sum(dropped.values())
                                             + len(waiting) + in_flight)
    # the groups still waiting were sampled no earlier than the last ones trained
    assert all(v >= versions[-1][-1] for v in waiting)
    assert saved["version"] == steps - 1  # the version of the last collection


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_killing_the_ray_rollout_actor_stops_the_run_with_its_name(tmp_path):
    run_dir = tmp_path / "run"
    run = Started([*RLVR, *RAY_RUN, "--set", "grpo.steps=400", "--set", "checkpoint.every=0",
                   "-o", str(run_dir)], _env())
    pid, code = run.kill_worker_after(run_dir, rows=2, name_within=600.0)
    err = run.stderr()
    assert code == 1, err
    assert re.search(rf"error: rollout worker rlvr-rollout-0 \(pid {pid}, Ray actor "
                     rf"[0-9a-f]{{32}}\) died while", err), err
    assert f"rlvr train --resume {run_dir}" in err
    assert len(metrics_rows(run_dir)) < 400

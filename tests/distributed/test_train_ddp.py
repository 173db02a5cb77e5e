"""`rlvr train` with a data-parallel update (grpo.update_processes = 2: rank 0 plus one update
worker, gloo) trains the tiny model like the single-process run: the same rollouts and rewards
step after step, the same gradient norms and final weights up to float summation order."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[2]
ARGS = [sys.executable, "-m", "rlvr.cli", "train",
        "--config", str(ROOT / "configs" / "smoke.yaml"),
        "--set", "grpo.steps=3", "--set", "model.precision=fp32",
        "--set", "eval.pass_at_k_samples=0",
        "--set", "checkpoint.every=3", "--set", "grpo.micro_batch_size=4"]


def _train(run_dir: Path, processes: int) -> list[dict]:
    result = subprocess.run([*ARGS, "--set", f"grpo.update_processes={processes}", "-o",
                             str(run_dir)], cwd=ROOT, env=dict(os.environ, PYTHONHASHSEED="0"),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    if processes > 1:
        assert f"data-parallel over {processes} processes" in result.stderr
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors"))


def test_two_process_update_matches_single_process(tmp_path):
    single = _train(tmp_path / "one", 1)
    parallel = _train(tmp_path / "two", 2)
    assert len(single) == len(parallel) == 3
    for a, b in zip(single, parallel):
        assert a["reward_mean"] == b["reward_mean"] and a["length_mean"] == b["length_mean"]
        assert a["train_rows"] == b["train_rows"] == b["global_rows"] > 0
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-4)
        # means of micro-batch means over both ranks (the shards cut the rows into other
        # micro-batches, so not bit-equal; rank 0's shard alone is off by ~30% here). Not
        # pg_loss: ~0 over whole groups, its per-micro-batch value depends on the partition.
        for key in ("kl", "clip_frac", "entropy"):
            assert b[key] == pytest.approx(a[key], rel=0.25, abs=1e-6), key
    start, ones, twos = (_weights(tmp_path / "one", 0), _weights(tmp_path / "one", 3),
                         _weights(tmp_path / "two", 3))
    assert ones.keys() == twos.keys()
    for name in ones:
        torch.testing.assert_close(twos[name], ones[name], rtol=1e-5, atol=1e-6)
    # the updates did move the weights (two no-op updates would also "match")
    assert max(float((ones[k] - start[k]).abs().max()) for k in ones) > 1e-5


def test_rank_metrics_combine_by_rows():
    from rlvr.distributed.update_group import combine_rank_metrics

    ranks = [({"kl": 0.2, "grad_norm": 1.5, "nonfinite_loss": 1.0, "global_rows": 12.0}, 9),
             ({"kl": 0.5, "grad_norm": 1.5, "nonfinite_loss": 0.0, "global_rows": 12.0}, 3),
             ({"grad_norm": 1.5, "global_rows": 12.0}, 0)]  # an empty shard
    out = combine_rank_metrics(ranks)
    assert out["kl"] == pytest.approx((0.2 * 9 + 0.5 * 3) / 12)
    assert out["grad_norm"] == 1.5 and out["global_rows"] == 12.0
    assert out["nonfinite_loss"] == 1.0


def test_a_rollback_resyncs_the_update_workers(tmp_path, monkeypatch):
    """A health-check rollback reloads rank 0's policy and optimizer from a checkpoint; the
    workers must get the same state, else their gradients (on stale weights) would corrupt
    every later update. Same run with 1 and 2 processes: same final weights."""
    import rlvr.train.grpo as grpo
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig
    from rlvr.train.run import Run

    real = grpo.GRPOStep.run

    def growing(self, state, step):  # completions get longer each step: rollback
        state.stop_ids = ()
        self.config.grpo.max_new_tokens = 3 + 3 * step
        return real(self, state, step)

    monkeypatch.setattr(grpo.GRPOStep, "run", growing)
    overrides = ["grpo.steps=6", "checkpoint.every=1", "checkpoint.keep=10", "health.window=3",
                 "health.min_history=2", "health.length_inflation.action=rollback",
                 "eval.pass_at_k_samples=0", "eval.every=0", "logging.tensorboard=false",
                 "model.precision=fp32", "grpo.micro_batch_size=4"]
    weights = {}
    for processes in (2, 1):
        config = load_config(RunConfig, ROOT / "configs" / "smoke.yaml",
                             [*overrides, f"grpo.update_processes={processes}"])
        run_dir = tmp_path / f"p{processes}"
        Run(config, run_dir).train()
        alerts = [json.loads(x) for x in (run_dir / "alerts.jsonl").read_text().splitlines()]
        assert [a["step"] for a in alerts if a["action"] == "rollback"] == [5]
        weights[processes] = _weights(run_dir, 6)
    for name in weights[1]:
        torch.testing.assert_close(weights[2][name], weights[1][name], rtol=1e-5, atol=1e-6)


def test_a_worker_that_cannot_start_fails_the_run_instead_of_hanging():
    from rlvr.distributed.update_group import UpdateGroup
    from rlvr.models.tiny import tiny_model, tiny_tokenizer
    from rlvr.train.config import RunConfig

    config = RunConfig.model_validate({"model": {"name": "no-such-model-anywhere"},
                                       "grpo": {"update_processes": 2}})
    policy = tiny_model(tiny_tokenizer(), seed=0)
    optimizer = torch.optim.AdamW(policy.parameters())
    with pytest.raises(RuntimeError, match=r"rlvr-update-1 \(exit code 1\)"):
        UpdateGroup(config, policy, optimizer)

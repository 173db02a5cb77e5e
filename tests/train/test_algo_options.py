"""Every algorithm option of the ``algo`` section runs in a real (tiny-model) GRPO run and has
the effect its paper describes: loss types, KL in the reward, the adaptive KL coefficient,
reference refresh, length shaping, truncation masking, entropy."""

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rlvr.configio import load_config
from rlvr.train.config import RunConfig
from rlvr.train.run import Run

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
FAST = ["eval.pass_at_k_samples=0", "eval.every=0", "logging.tensorboard=false",
        "grpo.steps=3"]


def _run(tmp_path, *overrides, name="run", resume=False):
    config = load_config(RunConfig, SMOKE, [*FAST, *overrides])
    run = Run(config, tmp_path / name, resume=resume)
    results = run.train()
    metrics = [json.loads(x) for x in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    return run, results, metrics


@pytest.mark.parametrize("option", [
    "algo.loss_agg=grpo", "algo.loss_agg=bnpo", "algo.loss_agg=dapo", "algo.loss_agg=dr_grpo",
    "algo.policy_loss=clip_higher", "algo.policy_loss=dual_clip", "algo.advantage=dr_grpo",
    "algo.advantage=rloo", "algo.advantage=reinforce_pp_baseline", "algo.std_scale=batch",
    "algo.kl_estimator=k1", "algo.kl_estimator=k2",
])
def test_smoke_run_completes_with_each_variant(tmp_path, option):
    _, results, metrics = _run(tmp_path, option, "grpo.mu=2")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert sum(m["train_rows"] for m in metrics) > 0
    for m in metrics:
        assert m["update_skipped_nonfinite"] == 0.0 if "update_skipped_nonfinite" in m else True
        assert m["entropy"] > 0 if "entropy" in m else m["train_rows"] == 0  # logged always
    assert results["trained"]["n"] == 16


def test_kl_in_the_reward_lowers_the_reward_and_leaves_the_loss_without_kl(tmp_path):
    _, _, metrics = _run(tmp_path, "algo.kl_in=reward", "algo.kl_coef=0.5")
    for m in metrics:
        # k3 per token (>= 0 up to fp32 rounding), measured on all rows before the advantage
        assert m["kl"] >= -1e-6
        assert m["reward_shaped_mean"] <= m["reward_mean"] + 1e-6
    later = metrics[1:]  # the policy has moved off the reference after step 1
    assert any(m["reward_shaped_mean"] < m["reward_mean"] - 1e-6 for m in later)


def test_adaptive_kl_coefficient_follows_ziegler_et_al(tmp_path):
    _, _, metrics = _run(tmp_path, "algo.kl_controller=adaptive", "algo.kl_coef=0.05",
                         "algo.kl_target=0.001", "grpo.steps=4")
    coefs = [m["kl_coef"] for m in metrics]
    assert coefs[0] == pytest.approx(0.05)
    for m, nxt in zip(metrics, coefs[1:]):
        error = max(-0.2, min(0.2, (m["kl"] - 0.001) / 0.001))
        assert nxt == pytest.approx(m["kl_coef"] * (1 + 0.1 * error))


def test_reference_refresh_resets_the_kl_and_resumes_exactly(tmp_path):
    common = ["algo.ref_refresh_every=2", "algo.kl_coef=0.05", "checkpoint.every=2"]
    _, _, whole = _run(tmp_path, *common, "grpo.steps=4", name="whole")
    # step 3 trains against the policy of step 2: the first forward equals the reference
    assert whole[1]["kl"] > 0 and whole[2]["kl"] < whole[1]["kl"] / 10
    assert (tmp_path / "whole" / "references" / "step-000004" / "config.json").is_file()
    _run(tmp_path, *common, "grpo.steps=2", name="part")
    _, _, resumed = _run(tmp_path, *common, "grpo.steps=4", name="part", resume=True)
    assert [m["kl"] for m in resumed] == [m["kl"] for m in whole]
    assert [m["reward_mean"] for m in resumed] == [m["reward_mean"] for m in whole]


def test_overlong_buffer_and_length_penalty_shape_the_reward(tmp_path):
    _, _, metrics = _run(tmp_path, "algo.overlong_buffer=20", "algo.length_penalty=0.5",
                         "algo.kl_coef=0.0")
    for m in metrics:
        # every completion is at most 24 tokens: inside the 20-token soft window from ~4 tokens,
        # plus -0.5 * len / 24 -> the shaped mean is lower by at least the length term
        assert m["reward_shaped_mean"] <= m["reward_mean"] - 0.5 * m["length_mean"] / 24 + 1e-6


def test_masking_truncated_completions_leaves_them_without_gradient(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "monitor"))
    # a reward with variance whatever the length (hash parity), and a 6-token cap: most
    # completions are cut; those must leave the trainable rows
    _, _, metrics = _run(tmp_path, "algo.mask_truncated=true", "grpo.max_new_tokens=6",
                         "algo.kl_coef=0.0", "reward.plugins=[rlvr_health_plugin]",
                         "reward.workers=0", "reward.verifiers={math: test_switchable}",
                         "reward.weights={outcome: 1.0}")
    assert sum(m["masked_truncated"] for m in metrics) > 0
    for m in metrics:
        assert m["train_rows"] <= round((1 - m["truncation_rate"]) * 16)


def test_entropy_bonus_runs_and_entropy_is_logged(tmp_path):
    _, _, metrics = _run(tmp_path, "algo.entropy_coef=0.01")
    assert all(m["entropy"] > 0 for m in metrics if m["train_rows"])

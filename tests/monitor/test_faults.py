"""Fault injection on real (tiny-model) runs: each fault must raise its alert and get its
action (R21, R35, R36, R38, R10). The smoke preset takes ~10 s per run here."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from rlvr.configio import load_config
from rlvr.train.config import RunConfig
from rlvr.train.hooks import RollbackHook
from rlvr.train.run import Run

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "smoke.yaml"
PLUGIN = ["reward.plugins=[rlvr_health_plugin]", "reward.workers=0"]
FAST = ["eval.pass_at_k_samples=0", "eval.every=0", "logging.tensorboard=false"]


def _run(tmp_path, *overrides, name="run") -> tuple[Path, dict]:
    run_dir = tmp_path / name
    config = load_config(RunConfig, SMOKE, [*FAST, *overrides])
    results = Run(config, run_dir).train()
    return run_dir, results


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _steps_of(run_dir: Path, **where) -> list[int]:
    return [a["step"] for a in _jsonl(run_dir / "alerts.jsonl")
            if all(a[k] == v for k, v in where.items())]


@pytest.fixture
def step_hook(monkeypatch):
    """Calls ``hook(grpo_step, state, step)`` at the start of every GRPO step; returns a
    setter."""
    import rlvr.train.grpo as grpo

    hooks = []
    real = grpo.GRPOStep.run

    def run(self, state, step):
        for hook in hooks:
            hook(self, state, step)
        return real(self, state, step)

    monkeypatch.setattr(grpo.GRPOStep, "run", run)
    return hooks.append


def _poison_log_probs(monkeypatch, bad_steps):
    """NaN in the first token of the first sample's log-probs (grad-enabled policy pass)
    at the given steps."""
    import rlvr.train.grpo as grpo
    import rlvr.update.loop as update_loop
    from rlvr.models.step_prefix import StepPrefix

    real, current = update_loop.completion_log_probs, {"step": 0}
    monkeypatch.setattr(grpo.GRPOStep, "_step_for_test", current, raising=False)

    def poisoned(model, seqs, _real=None, **kw):
        out = (_real or real)(model, seqs, **kw)
        logp, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, None)
        if logp.requires_grad and current["step"] in bad_steps:
            logp = logp.clone()
            logp[0, 0] = float("nan")
        return logp if rest is None else (logp, *rest)

    monkeypatch.setattr(update_loop, "completion_log_probs", poisoned)
    # the step-level shared prefix (several micro-batches) computes them here instead
    real_step = StepPrefix.log_probs

    def poisoned_step(self, model, seqs, **kw):
        return poisoned(model, seqs, _real=lambda m, b, **k: real_step(self, m, b, **k), **kw)

    monkeypatch.setattr(StepPrefix, "log_probs", poisoned_step)
    return current


def test_nan_in_one_samples_log_probs_skips_that_update_and_the_run_goes_on(
        tmp_path, monkeypatch, step_hook):
    from safetensors.torch import load_file

    current = _poison_log_probs(monkeypatch, {2})
    step_hook(lambda _, _state, step: current.__setitem__("step", step))
    run_dir, results = _run(tmp_path, "grpo.steps=3", "checkpoint.every=1", "checkpoint.keep=5")

    alerts = _jsonl(run_dir / "alerts.jsonl")
    nan = [a for a in alerts if a["check"] == "nonfinite"]
    assert [(a["step"], a["action"]) for a in nan] == [(2, "warn")]
    assert "log_probs" in nan[0]["message"] and "1 in a row" in nan[0]["message"]
    metrics = {m["step"]: m for m in _jsonl(run_dir / "metrics.jsonl")}
    assert [metrics[s]["update_skipped_nonfinite"] for s in (1, 2, 3)] == [0.0, 1.0, 0.0]
    assert metrics[2]["nonfinite_log_probs"] == 1
    assert results["stopped"] is None and results["trained"]["n"] == 16
    # the skipped step left the policy and the optimizer moments exactly as they were
    ckpt = run_dir / "checkpoints"
    w1, w2, w3 = (load_file(ckpt / f"step-00000{s}" / "model.safetensors") for s in (1, 2, 3))
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert any(not torch.equal(w2[k], w3[k]) for k in w2)
    s1, s2 = (torch.load(ckpt / f"step-00000{s}" / "trainer_state.pt", weights_only=False)
              for s in (1, 2))
    for a, b in zip(s1["optimizer"]["state"].values(), s2["optimizer"]["state"].values()):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and a["step"] == b["step"]


def test_nan_three_steps_in_a_row_stops_the_run_with_exit_code_3(tmp_path, monkeypatch,
                                                                 step_hook):
    from typer.testing import CliRunner

    from rlvr.cli import app

    current = _poison_log_probs(monkeypatch, {2, 3, 4, 5, 6})
    step_hook(lambda _, _state, step: current.__setitem__("step", step))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--config", str(SMOKE), "-o", str(run_dir),
                                      *[x for o in FAST for x in ("--set", o)],
                                      "--set", "grpo.steps=6"])
    assert result.exit_code == 3, result.output
    assert "stopped at step 4 by the nonfinite health check" in result.output
    assert [(a["step"], a["action"]) for a in _jsonl(run_dir / "alerts.jsonl")
            if a["check"] == "nonfinite"] == [(2, "warn"), (3, "warn"), (4, "stop")]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["stopped"]["check"] == "nonfinite" and results["trained"]["step"] == 4
    assert [m["step"] for m in _jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]


def test_reward_that_turns_constant_is_caught_and_stops_the_run(tmp_path, step_hook,
                                                                 monkeypatch):
    import rlvr_health_plugin as plugin

    monkeypatch.setitem(plugin.STATE, "constant", False)
    step_hook(lambda _, _state, step: plugin.STATE.__setitem__("constant", step >= 3))
    run_dir, results = _run(tmp_path, *PLUGIN, "reward.verifiers={math: test_switchable}",
                            "reward.weights={outcome: 1.0}", "grpo.steps=6",
                            "health.zero_variance.action=stop")
    alerts = [a for a in _jsonl(run_dir / "alerts.jsonl") if a["check"] == "zero_variance"]
    assert [(a["step"], a["action"]) for a in alerts] == [(4, "stop")]
    assert "reward function looks constant" in alerts[0]["message"]
    metrics = _jsonl(run_dir / "metrics.jsonl")
    assert [m["reward_std"] > 0 for m in metrics] == [True, True, False, False]
    assert results["stopped"]["check"] == "zero_variance"


def test_completions_that_grow_every_step_trigger_a_rollback_with_a_lower_lr(
        tmp_path, step_hook, monkeypatch):
    from rlvr.train.checkpoint import latest_checkpoint

    def grow(grpo_step, state, step):  # a policy whose completions get longer each step
        state.stop_ids = ()
        grpo_step.config.grpo.max_new_tokens = 3 + 3 * step

    step_hook(grow)
    restored = {}
    real = RollbackHook.rollback

    def rollback(self, step, *args):
        target = latest_checkpoint(self.run_dir, max_step=step - self.config.health.rollback_margin)
        real(self, step, *args)
        restored["target"] = target.name
        from safetensors.torch import load_file
        saved = load_file(target / "model.safetensors")
        live = self.state.models.policy.state_dict()
        restored["equal"] = all(torch.equal(saved[k], live[k]) for k in saved)

    monkeypatch.setattr(RollbackHook, "rollback", rollback)
    run_dir, results = _run(tmp_path, "grpo.steps=6", "checkpoint.every=1", "checkpoint.keep=10",
                            "health.window=3", "health.min_history=2",
                            "health.length_inflation.action=rollback")
    alerts = [a for a in _jsonl(run_dir / "alerts.jsonl") if a["check"] == "length_inflation"]
    assert [(a["step"], a["action"]) for a in alerts] == [(5, "rollback")]
    assert "completions are growing" in alerts[0]["message"]
    assert restored == {"target": "step-000002", "equal": True}
    metrics = {m["step"]: m for m in _jsonl(run_dir / "metrics.jsonl")}
    assert [metrics[s]["length_mean"] for s in range(1, 7)] == [6, 9, 12, 15, 18, 21]
    assert metrics[6]["lr"] == pytest.approx(0.5 * metrics[5]["lr"])
    assert results["stopped"] is None


def _categorised_tasks(path: Path) -> Path:
    """1-digit problems labelled add / mul (from the generator) and sub (b > a, so every
    'sub' answer is negative), with worked solutions."""
    import random

    from rlvr.records import Task
    from rlvr.tasks.arithmetic import generate

    rows = [dataclasses.replace(t, category={"+": "add", "*": "mul"}[op]).to_dict()
            for t in generate("1dop1d", 1200, seed=5, split="train", unique=False)
            if (op := t.metadata["expression"].split()[1]) in "+*"][:500]
    rng = random.Random(5)
    for i in range(250):
        a = rng.randint(0, 8)
        b = rng.randint(a + 1, 9)
        rows.append(Task(f"sub-{i}", f"What is {a} - {b}?", str(a - b), "math", "test",
                         category="sub", solution=f"{a} - {b} = {a - b}\n#### {a - b}").to_dict())
    rng.shuffle(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_verifier_biased_against_one_category_is_flagged_with_examples(tmp_path):
    data = _categorised_tasks(tmp_path / "tasks.jsonl")
    run_dir, _ = _run(tmp_path, *PLUGIN, "data.source=jsonl", f"data.path={data}",
                      "data.train_size=700", "data.val_size=32",
                      "reward.verifiers={math: test_biased_negative}", "grpo.steps=4",
                      "grpo.prompts_per_step=8", "health.window=3",
                      "health.category_bias.min_samples=16")
    alerts = [a for a in _jsonl(run_dir / "alerts.jsonl") if a["check"] == "category_bias"]
    assert len(alerts) == 1 and alerts[0]["action"] == "warn"
    assert "category 'sub': parse-failure rate 100%" in alerts[0]["message"]
    assert alerts[0]["examples"] and all(e.startswith("[unparsed]") for e in alerts[0]["examples"])
    for m in _jsonl(run_dir / "metrics.jsonl"):  # R10: per-category metrics every step
        # The bias is one category's: 'add' keeps the tiny model's own (precision-dependent)
        # failure rate, below the biased category's 100%.
        assert m["parse_failure_rate/sub"] == 1.0 and m["parse_failure_rate/add"] < 1.0

"""An exploding policy: `--set grpo.learning_rate=1e3` on the smoke preset
breaks the policy at its first update. The health checks that need no KL (format collapse,
entropy jump, validation collapse) catch it at step 2, the run rolls back to step-000000 with
the learning rate halved, and when the policy breaks again from that same state the run stops
(exit 3) saying so, instead of cooling down and ending with exit 0. A one-off break is rolled
back once and the run recovers, and says that too."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("transformers")

from rlvr.cli import EXIT_STOPPED, app

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
FAST = ["--set", "eval.pass_at_k_samples=0", "--set", "logging.tensorboard=false",
        "--set", "model.precision=fp32"]
runner = CliRunner()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


def test_learning_rate_1e3_is_rolled_back_at_step_2_then_stops_with_exit_3(tmp_path):
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST,
                                 "--set", "grpo.learning_rate=1e3", "--set", "grpo.steps=8"])
    out = _flat(result.output)
    assert result.exit_code == EXIT_STOPPED, result.output
    metrics = {m["step"]: m for m in _jsonl(run / "metrics.jsonl")}
    assert metrics[2]["train_rows"] == 0 and "kl" not in metrics[2]  # no KL to spike
    alerts = _jsonl(run / "alerts.jsonl")
    first = {a["check"] for a in alerts if a["step"] == 2}
    assert {"format_collapse", "entropy_jump", "validation_collapse"} <= first
    assert all(a["action"] == "rollback" for a in alerts if a["step"] == 2)
    assert ("rollback at step 2 (format_collapse) to step-000000; learning rate now 500 "
            "(grpo.learning_rate 1000 x0.5)") in out
    assert metrics[3]["lr"] == pytest.approx(500.0)
    results = json.loads((run / "results.json").read_text())
    assert results["rollbacks"] == [{"step": 2, "check": "format_collapse", "to": "step-000000",
                                     "to_step": 0, "lr": 500.0}]
    stop = results["stopped"]
    assert stop["action"] == "stop" and 3 <= stop["step"] <= 6
    assert ("the policy broke again after the rollback at step 2 to step-000000 with the "
            "learning rate lowered to 500; a rollback now would restore step-00000"
            ) in stop["message"]
    assert (f"error: training stopped at step {stop['step']} by the {stop['check']} "
            "health check") in out
    assert "lower grpo.learning_rate" in out
    assert max(metrics) == stop["step"]  # stopped there, did not train on to step 8


def test_a_one_off_collapse_is_rolled_back_and_the_run_recovers(tmp_path, monkeypatch):
    import rlvr.train.grpo as grpo

    real = grpo.GRPOStep.run

    def run_step(self, state, step):
        batch = real(self, state, step)
        if step == 2:  # what the exploding policy's step 2 looked like, this step only
            batch.metrics.update(format_error_rate=1.0, rollout_entropy=4.4)
        return batch

    monkeypatch.setattr(grpo.GRPOStep, "run", run_step)
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST,
                                 "--set", "grpo.steps=5", "--set", "eval.every=0"])
    assert result.exit_code == 0, result.output
    results = json.loads((run / "results.json").read_text())
    assert results["stopped"] is None
    assert results["rollbacks"] == [{"step": 2, "check": "format_collapse", "to": "step-000000",
                                     "to_step": 0, "lr": 5e-05}]
    assert ("recovered after 1 rollback(s): step 2 (format_collapse) to step-000000, learning "
            "rate 5e-05; trained to step 5") in _flat(result.output)
    assert [a["step"] for a in _jsonl(run / "alerts.jsonl") if a["action"] != "warn"] == [2, 2]

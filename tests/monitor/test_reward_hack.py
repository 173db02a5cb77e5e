"""R34: a planted reward hack. A deliberately lenient verifier (credits any completion that
contains the reference number anywhere) trains the tiny model; the reward_hacking check must
fire within the run, and the same run with the strict verifier must not."""

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rlvr.configio import load_config
from rlvr.train.config import RunConfig
from rlvr.train.run import Run

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["grpo.steps=8", "eval.every=4", "eval.pass_at_k_samples=0",
          "logging.tensorboard=false", "reward.plugins=[rlvr_health_plugin]", "reward.workers=0"]


def _train(run_dir: Path, *overrides) -> list[dict]:
    config = load_config(RunConfig, ROOT / "configs" / "smoke.yaml", [*COMMON, *overrides])
    Run(config, run_dir).train()
    path = run_dir / "alerts.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def test_lenient_verifier_is_caught_and_strict_one_is_not(tmp_path):
    hacked = _train(tmp_path / "lenient", "reward.verifiers={math: test_lenient_contains}")
    hacking = [a for a in hacked if a["check"] == "reward_hacking"]
    assert hacking, hacked
    first = hacking[0]
    assert first["step"] <= 8 and first["action"] == "warn"
    assert "own verifier rejects" in first["message"] and first["value"] > 0.05
    # the evidence: credited completions the math verifier rejects, and a spot-check dump
    assert first["examples"] and all("own verifier: " in e for e in first["examples"])
    dump = tmp_path / "lenient" / "spot_check" / f"step-{first['step']:06d}.jsonl"
    rows = [json.loads(x) for x in dump.read_text().splitlines()]
    assert 0 < len(rows) <= 8 and rows[0]["reward"] == max(r["reward"] for r in rows)
    metrics = [json.loads(x) for x in (tmp_path / "lenient" / "metrics.jsonl").read_text()
               .splitlines()]
    assert all("audit_rejected_rate" in m for m in metrics if m.get("audit_credited"))

    strict = _train(tmp_path / "strict")
    assert [a for a in strict if a["check"] == "reward_hacking"] == []
    strict_metrics = [json.loads(x) for x in (tmp_path / "strict" / "metrics.jsonl").read_text()
                      .splitlines()]
    assert all("audit_rejected_rate" not in m for m in strict_metrics)  # nothing to audit

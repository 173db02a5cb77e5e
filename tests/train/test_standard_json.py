"""Every JSON file a run writes is standard JSON: a NaN / inf value (a NaN
loss, an infinite KL) is written as null and named under "nonfinite", never as the NaN /
Infinity literals other JSON readers reject."""

import json
import math

import pytest

torch = pytest.importorskip("torch")

from rlvr.monitor.alerts import Alert, AlertLog  # noqa: E402
from rlvr.train.checkpoint import write_json_atomic  # noqa: E402
from rlvr.train.logs import append_log as _append_jsonl  # noqa: E402


def strict(text: str):
    def refuse(name):
        raise AssertionError(f"not standard JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_a_metrics_row_with_a_nan_loss_reads_back_as_null_with_the_flag(tmp_path):
    path = tmp_path / "metrics.jsonl"
    _append_jsonl(path, [{"step": 1, "loss": 0.5, "kl": 0.01}])  # what LoggingHook.log_step calls
    _append_jsonl(path, [{"step": 2, "loss": float("nan"), "kl": torch.tensor(float("inf")),
                          "reward_mean": torch.tensor(0.25)}])
    first, second = [strict(line) for line in path.read_text().splitlines()]
    assert first == {"step": 1, "loss": 0.5, "kl": 0.01}
    assert second == {"step": 2, "loss": None, "kl": None, "reward_mean": 0.25,
                      "nonfinite": ["loss", "kl"]}


def test_alerts_and_results_files_are_standard_json(tmp_path):
    log = AlertLog(tmp_path / "alerts.jsonl", print_fn=lambda *_: None)
    log.emit(Alert(step=4, check="loss_nan", action="stop", message="loss is NaN",
                   value=float("nan"), threshold=math.inf))
    row = strict((tmp_path / "alerts.jsonl").read_text())
    assert row["value"] is None and row["threshold"] is None
    assert row["nonfinite"] == ["value", "threshold"]
    write_json_atomic(tmp_path / "results.json", {"trained": {"pass_at_1": float("nan")},
                                                  "gain_pass_at_1": 0.1})
    results = strict((tmp_path / "results.json").read_text())
    assert results["trained"]["pass_at_1"] is None
    assert results["nonfinite"] == ["trained.pass_at_1"]

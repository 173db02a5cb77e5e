"""Metric sinks: TensorBoard event files read back; W&B and MLflow through recording fakes."""

import math
import sys
import types

import numpy as np
import pydantic
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlvr.monitor.sinks import (
    LoggingConfig,
    MetricSink,
    MLflowSink,
    SinkGroup,
    SinkUnavailable,
    TensorBoardSink,
    WandbSink,
    build_sinks,
    flatten,
    metric_name,
    mlflow_key,
    numeric_metrics,
)

# --- names and values ----------------------------------------------------------------------

def test_metric_name_prefixes_train_unless_sectioned():
    assert metric_name("loss") == "train/loss"
    assert metric_name("reward_mean/2d+2d") == "train/reward_mean/2d+2d"
    assert metric_name("val/accuracy") == "val/accuracy"
    assert metric_name("health/garbled_rate") == "health/garbled_rate"
    assert metric_name("val") == "train/val"                 # a bare word is not a section


def test_numeric_metrics_keeps_numbers_only():
    out = numeric_metrics({"a": 1, "b": 0.5, "c": True, "d": np.float32(0.25),
                           "e": torch.tensor(2.0), "nan": float("nan"), "s": "text",
                           "n": None, "l": [1, 2], "t": torch.tensor([1.0, 2.0])})
    assert {k: v for k, v in out.items() if k != "train/nan"} == {
        "train/a": 1.0, "train/b": 0.5, "train/c": 1.0, "train/d": 0.25, "train/e": 2.0}
    assert math.isnan(out["train/nan"])
    assert all(type(v) is float for v in out.values())


def test_mlflow_key_sanitises():
    assert mlflow_key("train/reward_mean/2d+2d") == "train/reward_mean/2dplus2d"
    assert mlflow_key("train/reward_mean/2d+-2d") == "train/reward_mean/2dplus-2d"
    assert mlflow_key("val/pass@1") == "val/pass_at_1"
    assert mlflow_key("train/clip%") == "train/clippct"
    assert mlflow_key("a//b/./c/../d/") == "a/b/_/c/_/d"       # must equal its normpath
    assert mlflow_key("/x:y (z)") == "x_y _z_"
    assert mlflow_key("ok-name_1.5 x/y") == "ok-name_1.5 x/y"
    assert mlflow_key("") == "_"


def test_flatten():
    assert flatten({"grpo": {"steps": 40, "lr": {"peak": 1e-6}}, "seed": 1}) == {
        "grpo.steps": 40, "grpo.lr.peak": 1e-6, "seed": 1}


# --- TensorBoard ---------------------------------------------------------------------------

def test_tensorboard_scalars_read_back(tmp_path):
    sink = TensorBoardSink(tmp_path / "tb")
    assert isinstance(sink, MetricSink)
    sink.log(3, {"loss": 0.5, "reward_mean/2d+2d": 0.25, "val/accuracy": 0.75,
                 "mixture": "2d+2d", "missing": None})
    sink.log(7, {"loss": 0.125, "reward_mean/2d+2d": 0.375})
    sink.log_text(7, "alerts", "reward collapsed")
    sink.close()
    sink.close()                                              # idempotent

    ea = EventAccumulator(str(tmp_path / "tb"))
    ea.Reload()
    assert set(ea.Tags()["scalars"]) == {"train/loss", "train/reward_mean/2d+2d",
                                         "val/accuracy"}
    assert [(e.step, e.value) for e in ea.Scalars("train/loss")] == [(3, 0.5), (7, 0.125)]
    assert [(e.step, e.value) for e in ea.Scalars("train/reward_mean/2d+2d")] == [
        (3, 0.25), (7, 0.375)]
    assert [(e.step, e.value) for e in ea.Scalars("val/accuracy")] == [(3, 0.75)]
    [text] = ea.Tensors("alerts/text_summary")
    assert text.step == 7 and text.tensor_proto.string_val == [b"reward collapsed"]


# --- W&B -----------------------------------------------------------------------------------

class _FakeWandbRun:
    def __init__(self, calls):
        self.calls = calls

    def log(self, data, step=None):
        self.calls.append(("log", dict(data), step))

    def finish(self):
        self.calls.append(("finish",))


@pytest.fixture
def fake_wandb(monkeypatch):
    calls = []
    module = types.ModuleType("wandb")

    def init(**kwargs):
        calls.append(("init", kwargs))
        return _FakeWandbRun(calls)

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return calls


def test_wandb_sink_calls(fake_wandb, tmp_path):
    sink = WandbSink("rlvr-exp", entity="team", run_name="run1", config={"seed": 1},
                     mode="offline", dir=tmp_path)
    sink.log(5, {"loss": 0.5, "reward_mean/2d+2d": 1, "note": "skip me"})
    sink.log(6, {"note": "nothing numeric"})                  # no empty log call
    sink.log_text(6, "alerts", "entropy collapsed")
    sink.close()
    sink.close()
    assert fake_wandb == [
        ("init", {"project": "rlvr-exp", "entity": "team", "name": "run1",
                  "config": {"seed": 1}, "mode": "offline", "dir": str(tmp_path)}),
        ("log", {"train/loss": 0.5, "train/reward_mean/2d+2d": 1.0}, 5),
        ("log", {"alerts": "entropy collapsed"}, 6),
        ("finish",),
    ]


def test_wandb_missing_raises_sink_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(SinkUnavailable, match="pip install wandb"):
        WandbSink("p")


# --- MLflow --------------------------------------------------------------------------------

@pytest.fixture
def fake_mlflow(monkeypatch):
    calls = []
    module = types.ModuleType("mlflow")
    for name in ("set_tracking_uri", "set_experiment", "log_params", "end_run"):
        setattr(module, name, lambda *a, _n=name, **k: calls.append((_n, a, k)))
    module.start_run = lambda **k: calls.append(("start_run", (), k)) or object()
    module.log_metrics = lambda metrics, step=None: calls.append(
        ("log_metrics", (dict(metrics),), {"step": step}))
    module.log_text = lambda text, artifact_file: calls.append(
        ("log_text", (text, artifact_file), {}))
    monkeypatch.setitem(sys.modules, "mlflow", module)
    return calls


def test_mlflow_sink_calls_and_sanitised_keys(fake_mlflow):
    sink = MLflowSink("file:/tmp/mlruns", experiment="rlvr", run_name="run1",
                      params={"grpo": {"steps": 40}, "data": {"mixture": "2d+-2d"},
                              "note": "x" * 600})
    sink.log(4, {"reward_mean/2d+2d": 0.5, "val/pass@1": 0.25, "loss": np.float64(1.5),
                 "mixture": "2d+2d"})
    sink.log_text(4, "alerts/reward", "reward collapsed")
    sink.close()
    sink.close()
    assert fake_mlflow == [
        ("set_tracking_uri", ("file:/tmp/mlruns",), {}),
        ("set_experiment", ("rlvr",), {}),
        ("start_run", (), {"run_name": "run1"}),
        ("log_params", ({"grpo.steps": "40", "data.mixture": "2d+-2d", "note": "x" * 500},),
         {}),
        ("log_metrics", ({"train/reward_mean/2dplus2d": 0.5, "val/pass_at_1": 0.25,
                          "train/loss": 1.5},), {"step": 4}),
        ("log_text", ("reward collapsed", "alerts/reward/step_0000004.txt"), {}),
        ("end_run", (), {}),
    ]


def test_mlflow_defaults_skip_uri_and_experiment(fake_mlflow):
    MLflowSink().close()
    assert [c[0] for c in fake_mlflow] == ["start_run", "end_run"]


# --- LoggingConfig and build_sinks ---------------------------------------------------------

def test_logging_config_defaults_and_validation():
    config = LoggingConfig()
    assert config.tensorboard is True and config.wandb_project is None
    assert config.mlflow_tracking_uri is None and config.mlflow_experiment == "rlvr"
    with pytest.raises(pydantic.ValidationError):
        LoggingConfig(wandb_projet="typo")
    with pytest.raises(pydantic.ValidationError):
        config.tensorboard = "maybe"
    for name, field in LoggingConfig.model_fields.items():
        assert field.description, name


def test_build_sinks_default_is_tensorboard_only(fake_wandb, fake_mlflow, tmp_path):
    sinks = build_sinks(LoggingConfig(), tmp_path / "run1", {"seed": 1})
    assert [type(s) for s in sinks] == [TensorBoardSink]
    assert sinks[0].log_dir == tmp_path / "run1" / "tensorboard"
    for s in sinks:
        s.close()
    assert fake_wandb == [] and fake_mlflow == []             # never initialised


def test_build_sinks_all_three(fake_wandb, fake_mlflow, tmp_path):
    config = LoggingConfig(wandb_project="proj", wandb_mode="offline",
                           mlflow_tracking_uri="file:/tmp/mlruns")
    run_dir = tmp_path / "run7"
    sinks = build_sinks(config, run_dir, {"seed": 1})
    assert [type(s) for s in sinks] == [TensorBoardSink, WandbSink, MLflowSink]
    assert fake_wandb[0] == ("init", {"project": "proj", "entity": None, "name": "run7",
                                      "config": {"seed": 1}, "mode": "offline",
                                      "dir": str(run_dir)})
    assert ("set_experiment", ("rlvr",), {}) in fake_mlflow
    assert ("start_run", (), {"run_name": "run7"}) in fake_mlflow
    assert ("log_params", ({"seed": "1"},), {}) in fake_mlflow
    for s in sinks:
        s.close()


def test_build_sinks_warns_and_skips_missing_packages(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    config = LoggingConfig(wandb_project="proj", mlflow_tracking_uri="file:/tmp/mlruns")
    with pytest.warns(UserWarning) as record:
        sinks = build_sinks(config, tmp_path, {})
    assert sinks == []
    messages = " | ".join(str(w.message) for w in record)
    assert "tensorboard" in messages and "wandb" in messages and "mlflow" in messages
    assert not (tmp_path / "tensorboard").exists()


# --- SinkGroup -----------------------------------------------------------------------------

class _RecordingSink:
    def __init__(self, calls, name, fail_on=()):
        self.calls, self.name, self.fail_on = calls, name, fail_on

    def log(self, step, metrics):
        if "log" in self.fail_on:
            raise OSError("disk full")
        self.calls.append((self.name, "log", step, dict(metrics)))

    def log_text(self, step, tag, text):
        self.calls.append((self.name, "log_text", step, tag, text))

    def close(self):
        self.calls.append((self.name, "close"))


def test_sink_group_fans_out_and_drops_a_failing_sink():
    calls = []
    group = SinkGroup([_RecordingSink(calls, "a"), _RecordingSink(calls, "b", fail_on=("log",))])
    assert isinstance(group, MetricSink)
    with pytest.warns(UserWarning, match="_RecordingSink.log failed"):
        group.log(1, {"loss": 0.5})
    group.log(2, {"loss": 0.25})                              # b is gone: no second warning
    group.log_text(2, "alerts", "hi")
    group.close()
    group.close()
    assert calls == [("a", "log", 1, {"loss": 0.5}), ("a", "log", 2, {"loss": 0.25}),
                     ("a", "log_text", 2, "alerts", "hi"), ("a", "close")]

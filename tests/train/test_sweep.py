"""`rlvr sweep` (R15): parsing swept overrides, variant names, and a real two-variant sweep of
the smoke preset through the CLI (outputs, resuming a finished or interrupted sweep, and bad
values refused before any run starts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlvr.train.sweep.spec import (
    MAX_VARIANTS,
    SweepError,
    parse_sweep,
    split_top_level,
    variant_name,
)
from rlvr.train.sweep.summary import moving_average

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
runner = CliRunner()
FAST = ["--set", "eval.pass_at_k_samples=0", "--set", "logging.tensorboard=false"]


# -- parse_sweep --------------------------------------------------------------------------------
def test_single_axis_and_fixed_overrides():
    fixed, variants = parse_sweep(["grpo.steps=3", "algo.kl_coef=0.001, 0.003,0.01",
                                   "data.val_size=8"])
    assert fixed == ["grpo.steps=3", "data.val_size=8"]
    assert variants == [{"algo.kl_coef": "0.001"}, {"algo.kl_coef": "0.003"},
                        {"algo.kl_coef": "0.01"}]


def test_two_axes_give_their_product_last_axis_fastest():
    fixed, variants = parse_sweep(["algo.kl_coef=0.0,0.05", "grpo.learning_rate=1e-5,1e-4"])
    assert fixed == []
    assert variants == [
        {"algo.kl_coef": "0.0", "grpo.learning_rate": "1e-5"},
        {"algo.kl_coef": "0.0", "grpo.learning_rate": "1e-4"},
        {"algo.kl_coef": "0.05", "grpo.learning_rate": "1e-5"},
        {"algo.kl_coef": "0.05", "grpo.learning_rate": "1e-4"},
    ]


@pytest.mark.parametrize("text", [
    "reward.plugins=[a,b]",
    "reward.weights={outcome: 1.0, format: 0.1}",
    'data.instruction="Think, then answer"',
    "data.instruction='Think, then answer'",
    "data.sources=[{source: arithmetic, weight: 1}, {source: logic, weight: 2}]",
])
def test_yaml_flow_values_and_quoted_strings_are_not_swept(text):
    assert parse_sweep([text]) == ([text], [{}])


def test_a_list_of_flow_values_is_swept():
    _, variants = parse_sweep(["reward.plugins=[a,b],[c]"])
    assert variants == [{"reward.plugins": "[a,b]"}, {"reward.plugins": "[c]"}]
    assert split_top_level('"a,\\"b,c",d') == ['"a,\\"b,c"', "d"]


def test_too_many_variants_is_an_error():
    values = ",".join(str(i) for i in range(6))
    with pytest.raises(SweepError, match=rf"6 x 6 = 36 variants; a sweep runs at most "
                                         rf"{MAX_VARIANTS}"):
        parse_sweep([f"grpo.steps={values}", f"seed={values}"])
    assert len(parse_sweep([f"seed={','.join(str(i) for i in range(32))}"])[1]) == 32


@pytest.mark.parametrize("overrides, message", [
    (["algo.kl_coef=0.1,,0.2"], "empty value"),
    (["algo.kl_coef=0.1,0.1"], "given more than once"),
    (["algo.kl_coef=0.1,0.2", "algo.kl_coef=0.3,0.4"], "swept twice"),
    (["algo.kl_coef=0.1,0.2", "algo.kl_coef=0.3"], "both swept and fixed"),
    (["algo.kl_coef"], "expected KEY=VALUE"),
    (["data.path=a/b,a_b"], "share the directory name"),
])
def test_malformed_sweeps_are_errors(overrides, message):
    with pytest.raises(SweepError, match=message):
        parse_sweep(overrides)


def test_variant_names_are_filesystem_safe():
    assert variant_name({"algo.kl_coef": "0.001"}) == "algo.kl_coef=0.001"
    assert variant_name({"algo.kl_coef": "0.0", "grpo.learning_rate": "1e-5"}) == \
        "algo.kl_coef=0.0,grpo.learning_rate=1e-5"
    assert variant_name({"data.path": "/data/my set"}) == "data.path=_data_my_set"
    assert variant_name({"reward.plugins": "[a,b]"}) == "reward.plugins=_a,b_"
    assert variant_name({}) == "default"
    long_a, long_b = variant_name({"k": "a" * 300}), variant_name({"k": "a" * 299 + "b"})
    assert len(long_a) <= 120 and long_a != long_b


def test_moving_average_is_trailing():
    assert moving_average([1.0, 3.0, 5.0, 7.0], window=2) == [1.0, 2.0, 4.0, 6.0]


# -- a real sweep through the CLI ---------------------------------------------------------------
def _sweep_args(out: Path, kl: str = "0.0,0.05") -> list[str]:
    return ["sweep", "--config", SMOKE, "--set", f"algo.kl_coef={kl}", "--steps", "3",
            "-o", str(out), *FAST]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rlvr.cli import app

    out = tmp_path_factory.mktemp("sweep") / "kl"
    result = runner.invoke(app, _sweep_args(out))
    assert result.exit_code == 0, result.output
    return app, out, result.output


def test_sweep_runs_every_variant_and_compares_them(swept):
    import numpy as np
    from PIL import Image

    _, out, output = swept
    names = ["algo.kl_coef=0.0", "algo.kl_coef=0.05"]
    for name in names:
        assert (out / name / "results.json").is_file()
        assert (out / name / "config.yaml").is_file()
    data = json.loads((out / "sweep.json").read_text())
    summaries = data["summaries"]
    assert [s["name"] for s in summaries] == names and data["complete"] is True
    assert [s["params"]["algo.kl_coef"] for s in summaries] == [0.0, 0.05]
    assert [s["kl_coef"] for s in summaries] == [0.0, 0.05]
    for s in summaries:
        metrics = _jsonl(out / s["name"] / "metrics.jsonl")
        assert [m["step"] for m in metrics] == [1, 2, 3] and s["steps"] == 3
        # the KL of the last step, as logged (a run without a KL term may log none)
        assert s["final_kl"] == metrics[-1].get("kl")
        if s["final_kl"] is not None:
            assert s["mean_kl"] == pytest.approx(sum(m["kl"] for m in metrics) / 3)
        assert s["final_reward"] == metrics[-1]["reward_mean"]
        results = json.loads((out / s["name"] / "results.json").read_text())
        assert s["final_pass_at_1"] == results["trained"]["pass_at_1"]
        assert s["baseline_pass_at_1"] == results["baseline"]["pass_at_1"]
        assert s["gain_pass_at_1"] == results["gain_pass_at_1"]
        assert s["wall_seconds"] > 0 and s["stopped"] is None and s["reused"] is False
    assert summaries[1]["final_kl"] is not None and summaries[1]["final_kl"] > 0
    assert summaries[0]["final_kl"] in (None, 0.0)  # no KL term, no reference

    image = np.asarray(Image.open(out / "sweep.png").convert("RGB"))
    assert image.shape[1] > 1000 and image.shape[0] > 300
    assert (image < 250).any(axis=2).mean() > 0.02  # lines, axes and text: not blank
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 20  # several colours

    md = (out / "sweep.md").read_text()
    assert all(f"| {name} |" in md for name in names) and "sweep.png" in md
    assert "sweep plot:" in output and str(out / "sweep.png") in " ".join(output.split())


def test_rerun_skips_finished_variants_and_resumes_an_unfinished_one(swept):
    app, out, _ = swept
    first, second = out / "algo.kl_coef=0.0", out / "algo.kl_coef=0.05"
    mtimes = {p: (p / "results.json").stat().st_mtime_ns for p in (first, second)}
    result = runner.invoke(app, _sweep_args(out))
    assert result.exit_code == 0, result.output
    assert " ".join(result.output.split()).count("sweep: skipping") == 2
    assert {p: (p / "results.json").stat().st_mtime_ns for p in (first, second)} == mtimes
    assert all(s["reused"] for s in json.loads((out / "sweep.json").read_text())["summaries"])

    # a variant cut off after its last checkpoint but before results.json: it resumes there
    metrics_before = (second / "metrics.jsonl").read_text()
    (second / "results.json").unlink()
    result = runner.invoke(app, _sweep_args(out))
    assert result.exit_code == 0, result.output
    assert "sweep: resuming 2/2 algo.kl_coef=0.05" in " ".join(result.output.split())
    assert (second / "results.json").is_file()
    assert (second / "metrics.jsonl").read_text() == metrics_before  # no step logged twice
    assert (first / "results.json").stat().st_mtime_ns == mtimes[first]


def test_changed_settings_do_not_reuse_the_sweep_directory(swept):
    app, out, _ = swept
    result = runner.invoke(app, [*_sweep_args(out), "--set", "grpo.learning_rate=0.5"])
    assert result.exit_code == 2, result.output
    assert "holds a run with other settings (grpo.learning_rate" in " ".join(result.output.split())


def test_a_bad_value_in_any_variant_exits_2_before_any_run(tmp_path):
    from rlvr.cli import app

    out = tmp_path / "bad"
    result = runner.invoke(app, _sweep_args(out, kl="0.01,-1"))
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "variant 2/2 (algo.kl_coef=-1)" in text
    assert "algo.kl_coef: Input should be greater than or equal to 0" in text
    assert not out.exists()


def test_sweep_of_a_missing_data_path_exits_2_naming_the_variant(tmp_path):
    from rlvr.cli import app

    out = tmp_path / "bad"
    result = runner.invoke(app, ["sweep", "--config", SMOKE, "-o", str(out), "--set",
                                 "data.source=gsm8k", "--set",
                                 f"data.path={tmp_path},/no/such/dir"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "data.path: /no/such/dir does not exist" in text and "variant 2/2" in text
    assert not out.exists()


def test_steps_cannot_be_combined_with_a_grpo_steps_axis(tmp_path):
    from rlvr.cli import app

    result = runner.invoke(app, ["sweep", "--config", SMOKE, "-o", str(tmp_path / "s"),
                                 "--set", "grpo.steps=2,3", "--steps", "4"])
    assert result.exit_code == 2, result.output
    assert "grpo.steps is swept" in result.output

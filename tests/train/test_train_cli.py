"""`rlvr train` end to end on the smoke preset, and its refusal of bad input before any work."""

import json
import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app
from rlvr.run_manifest import Manifest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
runner = CliRunner()


def test_smoke_run_writes_config_metrics_checkpoint_and_results(tmp_path):
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run),
                                 "--set", "grpo.steps=2"])
    assert result.exit_code == 0, result.output
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["grpo"]["steps"] == 2 and saved["model"]["name"] == "tiny-random"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("reward_mean", "accuracy", "zero_variance_fraction", "truncation_rate", "lr",
                "seconds_rollout", "seconds_reward", "seconds_update"):
        assert key in metrics[0]
    results = json.loads((run / "results.json").read_text())
    assert results["trained"]["n"] == 16 and results["baseline"]["label"] == "before_grpo"
    assert (run / "checkpoints" / "step-000002" / "model.safetensors").is_file()
    assert "pass@1 gain" in result.output
    # the gain problem by problem: each validation row's verdicts, recounted here
    before, after = results["baseline"]["verdicts"], results["trained"]["verdicts"]
    assert len(before) == len(after) == 16 and set(before + after) <= {"0", "1"}
    assert after.count("1") / 16 == results["trained"]["pass_at_1"]
    ci = results["gain_pass_at_1_ci"]
    fixed = sum(b == "0" and a == "1" for b, a in zip(before, after))
    broken = sum(b == "1" and a == "0" for b, a in zip(before, after))
    assert (ci["fixed"], ci["broken"], ci["n"]) == (fixed, broken, 16)
    assert ci["gain"] == pytest.approx(results["gain_pass_at_1"])
    assert ci["low"] <= ci["gain"] <= ci["high"] and "95% CI" in result.output
    # samples.jsonl names each completion's prompt (task id) and its reference
    from rlvr.configio import load_config
    from rlvr.tasks.sources import load_tasks
    from rlvr.train.config import RunConfig

    train_tasks, _ = load_tasks(load_config(RunConfig, SMOKE).data, 0)
    references = {t.id: t.reference for t in train_tasks}
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and all(references[s["id"]] == s["reference"] for s in samples)
    # sampled pass@k / maj@k at k = 1, 4, 8, 16 (n = 16, eval temperature), baseline vs trained
    sampled = results["pass_at_k"]
    assert set(sampled) == {"baseline", "trained"} and "sampled validation" in result.output
    for row in sampled.values():
        assert (row["n"], row["problems"], row["temperature"]) == (16, 16, 0.7)
        assert list(row["pass@k"]) == list(row["maj@k"]) == ["1", "4", "8", "16"]
        assert len(row["correct_counts"]) == 16
        for k in (1, 4, 8, 16):  # Chen et al.'s estimator over the recorded counts
            expected = sum(1 - math.comb(16 - c, k) / math.comb(16, k)
                           for c in row["correct_counts"]) / 16
            assert row["pass@k"][str(k)] == pytest.approx(expected)


def test_console_output_is_a_short_summary_with_progress_and_no_bars(tmp_path):
    """Piped (not a terminal): a config summary of a line per section pointing at
    config.yaml instead of the whole resolved config, no tqdm bars of the checkpoint saves,
    and validation / pass@k progress lines with an ETA while they run."""
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run),
                                 "--set", "sft.examples=64", "--set", "sft.epochs=1",
                                 "--set", "grpo.steps=1", "--set", "eval.batch_size=4",
                                 "--set", "eval.pass_at_k_samples=4",
                                 "--set", "checkpoint.every=1"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rlvr train -> "))
    end = next(i for i, line in enumerate(lines) if line.startswith("precision "))
    summary = lines[start + 1:end]
    assert 5 <= len(summary) < 25, summary
    assert summary[0] == f"config smoke (seed 0); every setting: {run / 'config.yaml'}"
    assert any(line.split()[:1] == ["grpo"] and "1 steps x 4 prompts x 4 completions" in line
               for line in summary)
    assert "tier_weights" not in result.output and "max_audit_rejected" not in result.output
    saved = yaml.safe_load((run / "config.yaml").read_text())  # the file keeps everything
    assert saved["health"]["reward_hacking"]["max_audit_rejected"] == 0.05
    for bar in ("Writing model shards", "Loading weights", "it/s]", "%|"):
        assert bar not in result.output
    assert "FutureWarning" not in result.output
    for label in ("validation before_grpo", "validation trained", "pass@k baseline (n=4)",
                  "pass@k trained (n=4)"):
        assert f"{label}: 4/16 problems (25%), " in result.output
        assert f"{label}: 12/16 problems (75%), " in result.output
    progress = [line for line in lines if line.startswith("validation before_grpo: 8/16")]
    assert len(progress) == 1 and ", ETA " in progress[0]
    assert any(line.startswith("sft step 4/4 loss ") and "elapsed" in line for line in lines)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "grpo.group_size=1"],
         "grpo.group_size: Input should be greater than or equal to 2"),
        (["--set", "grpo.stpes=3"], "grpo.stpes: unknown key; did you mean 'steps'?"),
        (["--set", "grpo.learning_rate=fast"],
         "grpo.learning_rate: Input should be a valid number"),
        (["--set", "data.source=gsm8k", "--set", "data.path=/no/such/dir"],
         "--set 'data.path=/no/such/dir': data.path: /no/such/dir does not exist"),
        (["--set", "algo.loss_agg=dapo2"], "algo.loss_agg: unknown loss aggregation 'dapo2'"),
        (["--set", "model.name=nonexistent-model"],
         "--set 'model.name=nonexistent-model': model.name: 'nonexistent-model'"),
        (["--set", "model.name=/no/such/model"],
         "--set 'model.name=/no/such/model': model.name: model path /no/such/model does not exist"),
    ],
)
def test_bad_input_exits_2_before_any_work(tmp_path, args, message):
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(tmp_path / "r"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()


def test_data_that_cannot_be_generated_exits_2(tmp_path):
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(tmp_path / "r"),
                                 "--set", "data.train_size=5000"])
    assert result.exit_code == 2, result.output
    assert ("data: level '1dop1d' ran out of distinct train problems"
            in " ".join(result.output.split()))
    assert not (tmp_path / "r").exists()


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_resume_continues_with_the_same_step_data_position_and_optimizer_state(tmp_path):
    """A run stopped after step 2 and resumed to step 4 matches an uninterrupted 4-step run:
    same prompts (data position), same rollouts and rewards (RNG), same optimizer moments."""
    import torch
    from safetensors.torch import load_file

    common = ["--config", SMOKE, "--set", "checkpoint.every=2",
              "--set", "eval.every=0"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    for run_dir, steps in ((whole, 4), (part, 2)):
        result = runner.invoke(app, ["train", *common, "-o", str(run_dir),
                                     "--set", f"grpo.steps={steps}"])
        assert result.exit_code == 0
    assert (part / "sft_model" / "model.safetensors").is_file()
    result = runner.invoke(app, ["train", "--resume", str(part), "--set", "grpo.steps=4"])
    assert result.exit_code == 0, result.output
    assert "resumed from" in result.output and "at step 2" in result.output

    a, b = _metrics(whole), _metrics(part)
    assert [m["step"] for m in b] == [1, 2, 3, 4]
    assert all(m["train_rows"] > 0 for m in a)  # every step really updated the policy
    for key in ("reward_mean", "accuracy", "length_mean", "kl", "grad_norm"):
        assert [m[key] for m in b] == pytest.approx([m[key] for m in a], rel=1e-5, abs=1e-7), key
    ckpt_a, ckpt_b = whole / "checkpoints" / "step-000004", part / "checkpoints" / "step-000004"
    state_a = torch.load(ckpt_a / "trainer_state.pt", weights_only=False)
    state_b = torch.load(ckpt_b / "trainer_state.pt", weights_only=False)
    assert state_b["step"] == 4
    assert state_b["extra"]["sampler"] == state_a["extra"]["sampler"]
    assert state_b["extra"]["sampler"]["position"] == {"all": 16}
    for pa, pb in zip(state_a["optimizer"]["state"].values(),
                      state_b["optimizer"]["state"].values()):
        assert pa["step"] == pb["step"] == 4
        torch.testing.assert_close(pa["exp_avg_sq"], pb["exp_avg_sq"], rtol=1e-4, atol=1e-10)
    wa, wb = load_file(ckpt_a / "model.safetensors"), load_file(ckpt_b / "model.safetensors")
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=1e-4, atol=1e-6)


def test_resume_without_a_checkpoint_exits_2(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    (run / "config.yaml").write_text(Path(SMOKE).read_text())
    result = runner.invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "has no complete checkpoint" in message
    # the restart it suggests keeps the run's own settings (it dropped them)
    assert f"rlvr train -c {run / 'config.yaml'} -o {run} --overwrite" in message


def _saved_run(tmp_path, **sections) -> Path:
    """A run directory holding only the smoke preset's config.yaml (with ``sections``
    merged in): enough for the checks made before any work."""
    data = yaml.safe_load(Path(SMOKE).read_text())
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    run = tmp_path / "saved"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    return run


@pytest.mark.parametrize("override, field, reason", [
    ("model.lora_rank=16", "model.lora_rank", "an adapter of the saved rank"),
    ("model.name=smollm2-135m-instruct", "model.name", "comes from the checkpoint"),
    ("grpo.learning_rate=1e-3", "grpo.learning_rate", "carry the learning rate"),
    ("data.mixture=2d+-2d", "data.mixture", "sampler's position are the saved run's"),
    ("sft.epochs=3", "sft.epochs", "SFT ran before the first checkpoint"),
    ("seed=1", "seed", "RNG states"),
    ("eval.pass_at_k_samples=4", "eval.pass_at_k_samples", "baseline pass@k"),
])
def test_resume_refuses_overrides_that_cannot_apply(tmp_path, override, field, reason):
    """`--set` on `--resume` that the checkpoint or the run's start fixed is refused (exit 2,
    naming the override, the field and why) before any work, not silently ignored."""
    run = _saved_run(tmp_path, model={"lora_rank": 8})
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.steps=5",
                                 "--set", override])
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"--set '{override}': {field} cannot change on --resume" in message
    assert reason in message
    assert "grpo.steps" not in message  # that one applies
    assert sorted(p.name for p in run.iterdir()) == ["config.yaml"]


def test_resume_accepts_overrides_that_apply_and_refuses_config_and_output_dir(tmp_path):
    run = _saved_run(tmp_path, model={"lora_rank": 8}, algo={"kl_controller": "adaptive"})
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.steps=5",
                                 "--set", "model.lora_rank=8", "--set", "eval.every=1",
                                 "--set", "reward.timeout_s=3"])
    assert result.exit_code == 2  # got past the override check, to the missing checkpoint
    assert "has no complete checkpoint" in " ".join(result.output.split())
    result = runner.invoke(app, ["train", "--resume", str(run), "--set", "algo.kl_coef=0.1"])
    assert result.exit_code == 2
    assert "adaptive KL controller's current coefficient" in " ".join(result.output.split())
    result = runner.invoke(app, ["train", "--resume", str(run), "--config", SMOKE])
    assert result.exit_code == 2 and "--config: a resumed run uses its own" in " ".join(
        result.output.split())
    result = runner.invoke(app, ["train", "--resume", str(run), "-o", str(tmp_path / "other")])
    assert result.exit_code == 2 and "--output-dir: a resumed run continues in its --resume" \
        in " ".join(result.output.split())


def test_sft_command_saves_a_model_that_loads_as_model_name(tmp_path):
    run = tmp_path / "sft"
    result = runner.invoke(app, ["sft", "--config", SMOKE, "-o", str(run)])
    assert result.exit_code == 0, result.output
    saved = json.loads((run / "sft_results.json").read_text())
    assert saved["sft"]["kept"] == 512 and saved["sft"]["rejected"] == 0
    assert saved["sft_model"]["format_rate"] > saved["base_model"]["format_rate"]
    assert saved["sft"]["final_loss"] < saved["sft"]["first_loss"]
    follow = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(tmp_path / "rl"),
                                 "--set", f"model.name={run / 'sft_model'}",
                                 "--set", "sft.enabled=false", "--set", "grpo.steps=1"])
    assert follow.exit_code == 0, follow.output


def test_lora_run_trains_adapters_only_and_resumes(tmp_path):
    """LoRA via peft: only adapter weights train (the base stays bit-identical), the rollout
    engine samples from merged weights, checkpoints hold the adapter, and resume loads it."""
    import torch
    from safetensors.torch import load_file

    from rlvr.models import TINY_RANDOM, load_model_and_tokenizer

    run = tmp_path / "lora"
    args = ["--config", SMOKE, "--set", "model.lora_rank=8", "--set", "checkpoint.every=1",
            "--set", "eval.every=0"]
    result = runner.invoke(app, ["train", *args, "-o", str(run), "--set", "grpo.steps=1"])
    assert result.exit_code == 0, result.output
    assert "LoRA rank 8" in result.output
    ckpt = run / "checkpoints" / "step-000001"
    adapter = load_file(ckpt / "adapter_model.safetensors")
    b_weights = [v for k, v in adapter.items() if "lora_B" in k]
    assert b_weights and any(float(v.abs().max()) > 0 for v in b_weights)  # trained (B starts at 0)
    base, _ = load_model_and_tokenizer(TINY_RANDOM, seed=0)
    merged = load_file(run / "sft_model" / "model.safetensors")
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged[name], base.state_dict()[name])  # SFT delta merged in
    resumed = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.steps=2",
                                  "--set", "algo.kl_coef=0.02"])
    assert resumed.exit_code == 0, resumed.output
    metrics = _metrics(run)
    assert [m["step"] for m in metrics] == [1, 2]
    # a fixed KL coefficient given on --resume applies (the checkpoint's value is not restored
    # over it), and config.yaml records the settings the run continued with
    assert [m["kl_coef"] for m in metrics] == [0.01, 0.02]
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["grpo"]["steps"] == 2 and saved["algo"]["kl_coef"] == 0.02


def test_a_run_directory_holding_files_is_refused_before_any_work(tmp_path):
    """Without --resume a second run into the same directory would interleave both runs'
    logs; refused (exit 2, naming the directory and the ways out), the old files untouched."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run)])
    message = " ".join(result.output.split())  # rich wraps long lines
    # no manifest: not a run rlvr recorded, so neither --resume nor --overwrite is offered
    assert result.exit_code == 2
    assert "no rlvr run recorded writing (metrics.jsonl)" in message
    assert "--resume" not in message and "--overwrite" not in message
    Manifest(run, files={"metrics.jsonl"}).save()  # a run's directory
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run)])
    message = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "already holds a run" in message and f"--resume {run}" in message
    assert "--overwrite" in message
    assert (run / "metrics.jsonl").read_text() == '{"step": 1}\n'
    a_file = tmp_path / "file"
    a_file.write_text("x")
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(a_file)])
    assert result.exit_code == 2 and "is not a directory" in " ".join(result.output.split())
    result = runner.invoke(app, ["train", "--resume", str(run), "--overwrite"])
    assert result.exit_code == 2 and "pass one of them" in " ".join(result.output.split())


def test_sft_into_a_directory_holding_files_does_not_suggest_resume(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')
    Manifest(run, files={"metrics.jsonl"}).save()
    result = runner.invoke(app, ["sft", "--config", SMOKE, "-o", str(run)])
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and "already holds a run" in message
    assert "--resume" not in message and "--overwrite" in message  # rlvr sft has no --resume


def test_overwrite_refuses_a_directory_holding_files_no_run_writes(tmp_path):
    # `-o . --overwrite` in a project folder: no manifest says rlvr wrote any of it
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "x.csv").write_text("1,2\n")
    (project / "thesis.tex").write_text("precious")
    (project / "config.yaml").write_text("seed: 0\n")  # a run marker alone is not enough
    (project / "checkpoints").mkdir()
    (project / "checkpoints" / "foo").write_text("mine")
    (project / ".env").write_text("SECRET=1")
    for command in ("train", "sft"):
        result = runner.invoke(app, [command, "--config", SMOKE, "-o", str(project),
                                     "--overwrite"])
        message = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert ".env, checkpoints/, config.yaml, data/, thesis.tex" in message
        assert "remove them yourself" in message
    assert (project / "thesis.tex").read_text() == "precious"
    assert (project / "checkpoints" / "foo").read_text() == "mine"
    assert sorted(p.name for p in project.iterdir()) == [".env", "checkpoints", "config.yaml",
                                                          "data", "thesis.tex"]
    assert (project / "data" / "x.csv").read_text() == "1,2\n"


def test_config_summary_names_a_files_tasks_not_the_presets_sizes():
    # a jsonl run printed the preset's "64 train, 16 validation" and its SFT mixture
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig, config_summary

    c = load_config(RunConfig, None, ["data.source=jsonl", "data.path=train.jsonl",
                                      "data.val_path=val.jsonl"])
    data, sft = config_summary(c)[2:4]
    assert "train.jsonl: the file's tasks, validation val.jsonl" in data and "train," not in data
    assert "training tasks' solutions" in sft
    c = load_config(RunConfig, None, [])
    assert "2d+-2d" in config_summary(c)[2] or "train" in config_summary(c)[2]


def test_a_run_refused_for_bad_input_leaves_its_new_directory_empty(tmp_path):
    # a start refused with exit 2 (here: every SFT example cut at
    # sft.max_length) left config.yaml and logs behind, so the corrected command was refused
    run = tmp_path / "run"
    bad = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run),
                              "--set", "sft.max_length=8", "--set", "grpo.steps=1"])
    assert bad.exit_code == 2, bad.output
    assert "sft.max_length" in bad.output
    assert not run.exists() or not any(run.iterdir())
    good = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run),
                               "--set", "grpo.steps=1", "--set", "eval.pass_at_k_samples=0"])
    assert good.exit_code == 0, good.output

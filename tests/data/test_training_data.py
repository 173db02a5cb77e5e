"""Training draws from tiers and source mixtures by weight, logs the realised ratio, skips
stale prompts (dynamic sampling) and refuses tasks whose reference does not verify."""

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.tasks.arithmetic import generate
from rlvr.train.config import RunConfig
from rlvr.train.run import Run

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
FAST = ["eval.pass_at_k_samples=0", "eval.every=0", "logging.tensorboard=false",
        "sft.examples=64", "sft.epochs=1"]


def _run(tmp_path, *overrides):
    config = load_config(RunConfig, SMOKE, [*FAST, *overrides])
    run = Run(config, tmp_path / "run")
    return run, run.train()


def _metrics(run):
    return [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]


def _write(path: Path, tasks) -> Path:
    path.write_text("".join(t.to_json() + "\n" for t in tasks))
    return path


def test_tier_weights_draw_mostly_medium(tmp_path):
    tasks = generate("1dop1d", 300, seed=3, split="train", unique=False)
    tiers = ["easy", "medium", "hard"]
    tasks = [dataclasses.replace(t, id=f"t{i}", difficulty=tiers[i % 3])
             for i, t in enumerate(tasks)]
    path = _write(tmp_path / "tiered.jsonl", tasks)
    run, results = _run(tmp_path, "data.source=jsonl", f"data.path={path}",
                        "data.train_size=280", "grpo.steps=6", "grpo.prompts_per_step=8",
                        "data.tiers=labels")  # dataset labels as tiers: asked for
    mix = results["data_mixture"]
    assert {k: v["target"] for k, v in mix.items()} == pytest.approx(
        {"easy": 0.1, "medium": 0.8, "hard": 0.1})
    drawn = {k: sum(m[f"data/pool/{k}"] for m in _metrics(run)) for k in mix}
    assert sum(drawn.values()) == 48
    assert drawn["medium"] >= 30  # 80% of 48 = 38.4 expected
    assert mix["medium"]["realised"] == pytest.approx(drawn["medium"] / 48)


def test_source_mixture_arithmetic_and_logic_seven_to_three(tmp_path):
    sources = ("[{source: arithmetic, mixture: 1dop1d, weight: 0.7}, "
               "{source: logic, mixture: countdown-3, weight: 0.3}]")
    run, results = _run(tmp_path, f"data.sources={sources}", "grpo.steps=5",
                        "grpo.prompts_per_step=8", "data.val_size=8")
    mix = results["data_mixture"]
    assert mix["arithmetic"]["target"] == pytest.approx(0.7)
    drawn = sum(m["data/pool/logic"] for m in _metrics(run))
    assert mix["logic"]["realised"] == pytest.approx(drawn / 40) and 4 <= drawn <= 22
    assert {t.task_type for t in run.state.data.train_tasks} == {"math", "logic"}
    assert {t.task_type for t in run.state.data.val_tasks} == {"math", "logic"}


def test_dynamic_sampling_skips_prompts_whose_groups_stopped_teaching(tmp_path):
    run, results = _run(tmp_path, "grpo.filter_groups_after=1", "grpo.steps=6",
                        "data.train_size=16", "grpo.prompts_per_step=4")
    skipped = [m["data/skipped"] for m in _metrics(run)]
    assert results["dynamic_sampling_skipped"] == sum(skipped) > 0


def test_tasks_whose_reference_does_not_verify_are_dropped(tmp_path):
    good = generate("1dop1d", 80, seed=4, split="train", unique=False)
    bad = Task("broken-ref", "What is 2 + 2?", "Total: ####", "math", "test",
               solution="2 + 2 = 4\n#### 4")
    path = _write(tmp_path / "tasks.jsonl", [bad, *[dataclasses.replace(t, id=f"g{i}")
                                                    for i, t in enumerate(good)]])
    run, _ = _run(tmp_path, "data.source=jsonl", f"data.path={path}", "grpo.steps=1",
                  "data.val_size=8", "data.train_size=100")
    ids = {t.id for t in run.state.data.train_tasks + run.state.data.val_tasks}
    assert "broken-ref" not in ids and len(ids) == 80


MIX = Path(__file__).resolve().parents[2] / "configs" / "math_code.yaml"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.skipif(not (SHARED / "mbpp").is_dir() or not (SHARED / "gsm8k").is_dir(),
                    reason="shared GSM8K / MBPP data absent")
@pytest.mark.timeout(180)
def test_math_code_preset_mixes_gsm8k_and_mbpp_with_their_own_instructions(tmp_path):
    config = load_config(RunConfig, MIX, [
        "model.name=tiny-random", "grpo.steps=3", "sft.examples=16", "sft.max_length=256",
        f"data.sources.0.path={SHARED / 'gsm8k'}", f"data.sources.1.path={SHARED / 'mbpp'}",
        "data.sources.0.train_size=60", "data.sources.1.train_size=30",
        "data.sources.0.val_size=4", "data.sources.1.val_size=2", "grpo.max_new_tokens=16",
        "eval.max_new_tokens=16", "eval.pass_at_k_samples=0", "logging.tensorboard=false"])
    run = Run(config, tmp_path / "run")
    results = run.train()
    assert {k: v["target"] for k, v in results["data_mixture"].items()} == pytest.approx(
        {"gsm8k": 0.7, "mbpp": 0.3})
    assert sum(v["realised"] for v in results["data_mixture"].values()) == pytest.approx(1.0)
    code = next(t for t in run.state.data.val_tasks if t.task_type == "code")
    math = next(t for t in run.state.data.val_tasks if t.task_type == "math")
    assert run.instruction(code).startswith("Do not put tests")
    assert run.instruction(math).startswith("Solve the problem step by step")
    assert len(run.state.data.val_tasks) == 6

"""Resume edges: (a) a run killed during SFT resumes its SFT from
`sft_checkpoint.pt` (`sft.checkpoint_every`) and ends as an uninterrupted run; one killed after
SFT but before GRPO's first checkpoint reuses `sft_model/`; (b) the temp dirs / files an
interrupted save leaves (`checkpoints/.step-N.<tmp>` ...) are removed when a run starts or
resumes."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

import rlvr.train.sft as sft_module  # noqa: E402
from rlvr.cli import app  # noqa: E402
from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.tasks.arithmetic import generate  # noqa: E402
from rlvr.tasks.prompting import prompt_ids  # noqa: E402
from rlvr.train.evaluation import Evaluator  # noqa: E402
from rlvr.train.sections import SFTConfig  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
FAST = ["--set", "eval.pass_at_k_samples=0", "--set", "eval.every=0", "--set",
        "logging.tensorboard=false", "--set", "model.precision=fp32", "--set", "grpo.steps=2",
        "--set", "sft.checkpoint_every=20"]
TIMING = ("seconds_rollout", "seconds_reward", "seconds_update", "tokens_per_second", "seconds",
          "time")
runner = CliRunner()


class Killed(Exception):
    """Stands in for SIGKILL: raised from inside SFT or validation."""


def _kill_sft_after(monkeypatch, calls: int) -> None:
    real, count = sft_module._step, [0]

    def step(*args, **kwargs):
        count[0] += 1
        if count[0] > calls:
            raise Killed(f"killed at SFT step {count[0]}")
        return real(*args, **kwargs)

    monkeypatch.setattr(sft_module, "_step", step)


def _rows(path: Path) -> list[dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _train(run: Path, *extra):
    return runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST, *extra])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("whole") / "run"
    result = _train(run)
    assert result.exit_code == 0, result.output
    return run


def _same_run(run: Path, whole: Path) -> None:
    a = load_file(run / "sft_model" / "model.safetensors")
    b = load_file(whole / "sft_model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for name in ("metrics.jsonl", "validation.jsonl", "samples.jsonl"):
        assert _rows(run / name) == _rows(whole / name), name
    report = json.loads((run / "results.json").read_text())["sft"]
    expected = json.loads((whole / "results.json").read_text())["sft"]
    assert {k: v for k, v in report.items() if k != "seconds"} == \
        {k: v for k, v in expected.items() if k != "seconds"}


def test_run_sft_resumed_from_its_checkpoint_equals_an_uninterrupted_sft(tmp_path, monkeypatch):
    tokenizer = load_model_and_tokenizer(TINY_RANDOM, seed=0)[1]
    tasks = generate("1dop1d", 40, seed=2, split="train", unique=False)
    prompts = [prompt_ids(tokenizer, t, "Answer with '#### <answer>'.", False) for t in tasks]
    config = SFTConfig(batch_size=8, epochs=2, learning_rate=3e-3, checkpoint_every=3)

    def run_sft(model, **kwargs):
        return sft_module.run_sft(model, tokenizer, tasks, prompts, config, seed=0, bf16=False,
                                  **kwargs)

    def fresh():
        return load_model_and_tokenizer(TINY_RANDOM, seed=0)[0]

    whole = fresh()
    expected = run_sft(whole, log=lambda *_: None)
    state = tmp_path / "sft_checkpoint.pt"
    with monkeypatch.context() as m:
        _kill_sft_after(m, 7)  # 10 steps (5 per epoch): killed in epoch 2, checkpoint at 6
        with pytest.raises(Killed):
            run_sft(fresh(), log=lambda *_: None, state_path=state)
    saved = torch.load(state, weights_only=False)
    assert len(saved["losses"]) == 6 and (saved["epoch"], saved["batch"]) == (1, 1)
    lines: list[str] = []
    resumed = fresh()
    report = run_sft(resumed, log=lines.append, state_path=state, resume=True)
    assert "sft: resumed from sft_checkpoint.pt at step 6/10" in lines
    assert (report.steps, report.first_loss, report.final_loss) == \
        (expected.steps, expected.first_loss, expected.final_loss)
    for (k, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), k


def test_a_run_killed_during_sft_resumes_its_sft_and_matches_the_uninterrupted_run(
        tmp_path, monkeypatch, uninterrupted):
    run = tmp_path / "run"
    with monkeypatch.context() as m:
        _kill_sft_after(m, 30)  # 64 SFT steps; checkpoint at 20
        result = _train(run)
    assert isinstance(result.exception, Killed)
    assert (run / "sft_checkpoint.pt").is_file()
    assert not (run / "sft_model").exists() and not (run / "checkpoints").exists()
    resumed = runner.invoke(app, ["train", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    out = " ".join(resumed.output.split())
    assert "resumed" in out and "before GRPO (no GRPO checkpoint yet)" in out
    assert "sft: resumed from sft_checkpoint.pt at step 20/64" in out
    assert "sft step 10/64" not in out  # the first 20 steps are not redone
    assert not (run / "sft_checkpoint.pt").exists()
    _same_run(run, uninterrupted)


def test_a_run_killed_after_sft_reuses_sft_model(tmp_path, monkeypatch, uninterrupted):
    run = tmp_path / "run"
    real = Evaluator.validate

    def validate(self, label, step):
        if label == "before_grpo":
            raise Killed("killed during the validation before GRPO")
        return real(self, label, step)

    with monkeypatch.context() as m:
        m.setattr(Evaluator, "validate", validate)
        result = _train(run)
    assert isinstance(result.exception, Killed)
    assert (run / "sft_model" / "config.json").is_file() and not (run / "checkpoints").exists()
    resumed = runner.invoke(app, ["train", "--resume", str(run)])
    assert resumed.exit_code == 0, resumed.output
    out = " ".join(resumed.output.split())
    assert f"sft: finished before the interruption; {run / 'sft_model'} loaded" in out
    assert "sft step" not in out
    _same_run(run, uninterrupted)


def test_stale_temp_dirs_of_an_interrupted_save_are_removed_on_resume(tmp_path):
    run = tmp_path / "run"
    assert _train(run, "--set", "grpo.steps=1", "--set", "checkpoint.every=1").exit_code == 0
    stale = [run / "checkpoints" / ".step-000002.k3j4h5", run / ".sft_model.a1b2c3",
             run / "checkpoints" / ".step-000001.old-4242"]
    for path in stale:
        path.mkdir()
        (path / "model.safetensors").write_bytes(b"half a model")
    (run / ".metrics.jsonl.x7y8z9.tmp").write_text('{"step": 2')
    keep = run / ".notes"
    keep.write_text("mine")
    draft = run / ".draft.x1y2z3.tmp"  # named like a temp file, of no file rlvr wrote
    draft.write_text("mine")
    resumed = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.steps=2"])
    assert resumed.exit_code == 0, resumed.output
    out = " ".join(resumed.output.split())
    for path in [*stale, run / ".metrics.jsonl.x7y8z9.tmp"]:
        assert not path.exists()
        assert f"removed {path.relative_to(run)}: left by a save that was interrupted" in out
    assert keep.read_text() == "mine"  # not a temp name of ours: left alone
    assert draft.read_text() == "mine"  # the manifest lists no file 'draft' it was for
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000000",
                                                                       "step-000001",
                                                                       "step-000002"]

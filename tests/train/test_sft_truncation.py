"""SFT and `sft.max_length`: examples cut at the limit are counted and
reported (log line, SFTReport / results); examples left without any answer token are dropped;
when no example keeps an answer token SFT refuses (exit 2 naming sft.max_length) instead of
"training" at loss 0.0000."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app
from rlvr.models import TINY_RANDOM, load_model_and_tokenizer
from rlvr.tasks.arithmetic import generate
from rlvr.train.sections import SFTConfig
from rlvr.train.sft import SFTInputError, run_sft

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny():
    return load_model_and_tokenizer(TINY_RANDOM, seed=0)


def _examples(tokenizer, prompt_lengths):
    """Arithmetic tasks with verified solutions (17-19 tokens with the end token) and
    prompts of the given lengths (token ids; the content does not matter here)."""
    tasks = generate("1dop1d", len(prompt_lengths), seed=2, split="train", unique=False)
    ids = tokenizer("What is the value of " * 40, add_special_tokens=False).input_ids
    return tasks, [ids[:n] for n in prompt_lengths]


def test_cut_examples_are_counted_logged_and_those_without_answer_dropped(tiny):
    model, tokenizer = tiny
    # max_length 40: prompts of 10 fit whole (10 + <= 19), 30 lose part of the answer,
    # 45 keep no answer token
    tasks, prompts = _examples(tokenizer, [10, 10, 30, 30, 30, 45, 45, 45])
    lines = []
    report = run_sft(model, tokenizer, tasks, prompts,
                     SFTConfig(max_length=40, batch_size=4, epochs=1, learning_rate=1e-3),
                     seed=0, bf16=False, log=lines.append)
    assert (report.truncated, report.no_answer, report.kept) == (6, 3, 5)
    assert report.max_length == 40 and report.longest == 45 + 19
    assert report.steps == 2 and report.first_loss > 0  # 5 examples, batches of 4
    assert ("sft.max_length=40[/]: 6 of 8 examples cut (longest prompt + answer 64 tokens); 3 "
            "keep no answer token and are dropped, 3 train on part of their answer") in lines[0]


def test_no_answer_token_left_anywhere_refuses_naming_sft_max_length(tiny):
    import torch

    model, tokenizer = tiny
    tasks, prompts = _examples(tokenizer, [45, 50, 62])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(SFTInputError) as err:
        run_sft(model, tokenizer, tasks, prompts, SFTConfig(max_length=40), seed=0,
                bf16=False, log=lambda *_: None)
    assert str(err.value).startswith("sft.max_length=40: every one of the 3 SFT examples is "
                                     "cut before its answer (prompts are 45-62 tokens)")
    assert "set sft.max_length to at least" in str(err.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # untouched


def test_no_example_fits_exits_2_naming_sft_max_length(tmp_path):
    for command in (["sft"], ["train"]):
        result = runner.invoke(app, [*command, "--config", SMOKE, "-o", str(tmp_path / command[0]),
                                     "--set", "sft.max_length=16",
                                     "--set", "eval.pass_at_k_samples=0"])
        message = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert ("error: sft.max_length=16: every one of the 512 SFT examples is cut before its "
                "answer") in message
        assert "loss 0.0000" not in message


def _unsolved_tasks(path: Path, n: int = 12) -> Path:
    """Math tasks with no ``solution`` field: nothing for the cold start to train on."""
    import json

    rows = [{"id": f"q{i}", "prompt": f"What is {i} + {i}?", "reference": str(2 * i),
             "task_type": "math", "source": "tasks"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_no_verified_example_exits_2_naming_the_reason_and_the_fix(tmp_path):
    tasks = _unsolved_tasks(tmp_path / "tasks.jsonl")
    for command in ("sft", "train"):
        run = tmp_path / command
        result = runner.invoke(app, [command, "--config", SMOKE, "-o", str(run),
                                     "--set", "data.source=jsonl", "--set", f"data.path={tasks}",
                                     "--set", "sft.mixture=null",
                                     "--set", "data.train_size=8", "--set", "data.val_size=4",
                                     "--set", "eval.pass_at_k_samples=0"])
        message = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert ("sft: 0 verified solutions among the 8 SFT tasks (8 have no `solution` field, "
                "0 have one that does not verify") in message
        assert "`solution` fields" in message and "sft.enabled: false" in message
        assert not (run / "sft_model").exists()


def test_run_sft_without_examples_refuses(tiny):
    model, tokenizer = tiny
    with pytest.raises(SFTInputError, match="0 verified solutions among the 3 SFT tasks"):
        run_sft(model, tokenizer, [], [], SFTConfig(), seed=0, bf16=False, rejected=3,
                log=lambda *_: None)

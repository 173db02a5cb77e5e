"""What `rlvr eval` and training read and how they prompt it, as a new user meets them (issue
17): logic tasks without a data file and from `rlvr data generate logic`, no math instruction
after puzzles that state their own format."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app  # noqa: E402
from rlvr.configio import load_config  # noqa: E402
from rlvr.tasks.sources import DataError, load_tasks  # noqa: E402
from rlvr.train import prompting  # noqa: E402
from rlvr.train.config import DEFAULT_INSTRUCTION, DataConfig, RunConfig  # noqa: E402

runner = CliRunner()
SMALL = ["--n", "2", "--max-new-tokens", "4", "--batch-size", "4"]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def user_turns(monkeypatch):
    """Every user turn the prompts are built from (the chat messages of each prompt)."""
    seen: list[str] = []
    original = prompting.chat_messages

    def recording(task, instruction, one_shot):
        messages = original(task, instruction, one_shot)
        seen.append(messages[-1]["content"])
        return messages

    monkeypatch.setattr(prompting, "chat_messages", recording)
    return seen


def _rows(out):
    return [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------ item 11: logic tasks


def test_eval_logic_tasks_are_generated_in_process_without_a_data_path(tmp_path, user_turns):
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "logic",
                                 "--limit", "6", *SMALL, "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert len(rows) == 12 and {r["task_type"] for r in rows} == {"logic"}
    assert {r["category"] for r in rows} <= {"countdown", "knights_knaves"}
    assert {r["difficulty"] for r in rows} <= {"countdown-3", "kk-3"}  # the logic default
    assert json.loads((out / "results.json").read_text())["settings"]["tasks"] == "logic"
    # the puzzles state their own answer format: no math instruction after them
    assert len(user_turns) == 6
    assert all(turn.splitlines()[-1].startswith("#### ") for turn in user_turns)
    assert not any("Solve the problem" in turn for turn in user_turns)


def test_eval_logic_with_an_arithmetic_mixture_exits_2_naming_the_option(tmp_path):
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "logic",
                                 "--mixture", "2d+-2d", "--limit", "2", *SMALL,
                                 "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "--mixture" in result.output and "unknown logic level '2d+-2d'" in result.output
    assert "kk-3" in _flat(result.output)  # the known levels are listed
    assert not (tmp_path / "o").exists()


def test_eval_help_lists_logic_among_the_tasks():
    import typer.main

    command = typer.main.get_command(app).commands["eval"]
    tasks = next(p for p in command.params if "--tasks" in p.opts)
    assert "logic" in tasks.help and "arithmetic" in tasks.help
    mixture = next(p for p in command.params if "--mixture" in p.opts)
    assert "logic" in mixture.help


def _generate_logic(tmp_path, n=30, split="train", mixture="countdown-3:0.5,kk-2:0.5"):
    path = tmp_path / f"logic-{split}.jsonl"
    result = runner.invoke(app, ["data", "generate", "logic", "-m", mixture, "-n", str(n),
                                 "--split", split, "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


def test_data_source_logic_reads_a_file_from_rlvr_data_generate(tmp_path):
    path = _generate_logic(tmp_path)
    ids = {json.loads(line)["id"] for line in path.read_text().splitlines()}
    config = load_config(RunConfig, None, ["data.source=logic", f"data.path={path}",
                                           "data.val_size=5"])
    train, val = load_tasks(config.data, seed=0)
    assert len(val) == 5 and len(train) == 25
    assert {t.id for t in train + val} == ids  # the file's tasks, not generated ones
    assert not {t.id for t in train} & {t.id for t in val}

    # a file of other tasks is refused, naming the file and line
    math = tmp_path / "math.jsonl"
    runner.invoke(app, ["data", "generate", "arithmetic", "-m", "1dop1d", "-n", "10",
                        "-o", str(math)])
    with pytest.raises(DataError, match=r"math.jsonl:1: task_type 'math', expected 'logic'"):
        load_tasks(DataConfig(source="logic", path=str(math), val_size=2), seed=0)


def test_eval_logic_reads_a_generated_file(tmp_path):
    path = _generate_logic(tmp_path, n=8)
    ids = {json.loads(line)["id"] for line in path.read_text().splitlines()}
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "logic",
                                 "--data-path", str(path), "--limit", "4", *SMALL,
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert {r["id"] for r in _rows(out)} <= ids


def test_knights_and_knaves_prompts_carry_no_math_instruction(tmp_path):
    from rlvr.tasks.logic import generate_logic

    assert DataConfig(source="logic").instruction == ""
    assert DataConfig(source="logic").mixture == "countdown-3:0.5,kk-3:0.5"
    assert DataConfig().instruction == DEFAULT_INSTRUCTION  # math sources keep theirs
    kk = generate_logic("kk-3", 2, seed=0)[0]
    messages = prompting.chat_messages(kk, DataConfig(source="logic").instruction, False)
    assert messages == [{"role": "user", "content": kk.prompt}]
    assert kk.prompt.splitlines()[-1].startswith("#### ")  # the format it states itself
    # an instruction the user chose is kept
    assert DataConfig(source="logic", instruction="Think.").instruction == "Think."

    # in a mixture: the logic source gets none, arithmetic the default math instruction
    config = load_config(RunConfig, None, [
        "data.sources=[{source: arithmetic, mixture: 1dop1d}, {source: logic, mixture: kk-2}]"])
    arith, logic = config.data.sources
    assert config.data.source_config(logic).instruction == ""
    assert config.data.source_config(logic).mixture == "kk-2"
    assert config.data.source_config(arith).instruction == DEFAULT_INSTRUCTION
    bare = load_config(RunConfig, None, ["data.sources=[{source: arithmetic}, {source: logic}]"])
    assert bare.data.source_config(bare.data.sources[1]).mixture == "countdown-3:0.5,kk-3:0.5"
    assert bare.data.source_config(bare.data.sources[0]).mixture == "2d+-2d"


def test_training_prompts_of_logic_tasks_end_with_the_puzzles_format(tmp_path):
    from rlvr.train.run import Run

    config = load_config(RunConfig, None, [
        "model.name=tiny-random", "data.source=logic", "data.mixture=kk-2", "data.train_size=4",
        "data.val_size=2", "logging.tensorboard=false"])
    run = Run(config, tmp_path / "run")
    try:
        run.load()
        for task, ids in zip(run.val_tasks, run.val_prompts):
            text = run.tokenizer.decode(ids)
            assert task.prompt in text and "Solve the problem" not in text
            assert run.instruction(task) == ""
    finally:
        run.rewards.close()

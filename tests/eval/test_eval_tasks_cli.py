"""What `rlvr eval` and training read and how they prompt it, as a new user meets them (issue
17): logic tasks without a data file and from `rlvr data generate logic`, no math instruction
after puzzles that state their own format."""

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app
from rlvr.configio import load_config
from rlvr.tasks import prompting
from rlvr.tasks.sources import DataError, load_tasks
from rlvr.train.config import DEFAULT_INSTRUCTION, DataConfig, RunConfig

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
        for task, ids in zip(run.state.data.val_tasks, run.state.data.val_prompts):
            text = run.state.models.tokenizer.decode(ids)
            assert task.prompt in text and "Solve the problem" not in text
            assert run.instruction(task) == ""
    finally:
        run.rewards.close()


# ------------------------------------------------------- item 12: a held-out file, whole files


def _task_file(path, n, seed=0, start=0, mixture="1dop1d"):
    from rlvr.tasks.arithmetic import generate

    tasks = generate(mixture, start + n, seed=seed, split="train")[start:]
    lines = []
    for i, task in enumerate(tasks, start):
        row = json.loads(task.to_json())
        row["id"], row["source"] = f"{path.stem}-{i}", "mine"
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return [json.loads(line)["id"] for line in lines]


def test_a_separate_validation_file_is_validated_on_whole(tmp_path):
    train_ids = _task_file(tmp_path / "train.jsonl", 50)
    val_ids = _task_file(tmp_path / "val.jsonl", 12, seed=1, mixture="2d+-2d")
    notes: list[str] = []
    data = DataConfig(source="jsonl", path=str(tmp_path / "train.jsonl"),
                      val_path=str(tmp_path / "val.jsonl"))
    train, val = load_tasks(data, seed=0, log=notes.append)
    assert [t.id for t in val] == val_ids  # every record, in file order
    assert sorted(t.id for t in train) == sorted(train_ids) and not notes
    capped = data.model_copy(update={"val_size": 5})
    assert [t.id for t in load_tasks(capped, seed=0)[1]] == val_ids[:5]
    # a val_size larger than the file (a preset's 16) uses the whole file
    whole = load_tasks(data.model_copy(update={"val_size": 16}), seed=0)[1]
    assert [t.id for t in whole] == val_ids

    # training tasks that are also in the validation file are left out of training, and said
    both = tmp_path / "both.jsonl"
    both.write_text((tmp_path / "val.jsonl").read_text()
                    + "".join((tmp_path / "train.jsonl").read_text().splitlines(True)[:3]))
    train, val = load_tasks(data.model_copy(update={"val_path": str(both)}), seed=0,
                            log=notes.append)
    assert len(val) == 15 and len(train) == 47 and not {t.id for t in train} & {t.id for t in val}
    assert notes and "3 training tasks are also in data.val_path" in notes[0]

    with pytest.raises(DataError, match="data.val_path: .*nope.jsonl does not exist"):
        load_tasks(data.model_copy(update={"val_path": str(tmp_path / "nope.jsonl")}), seed=0)


def test_a_small_file_without_val_path_holds_out_a_fifth_and_says_so(tmp_path):
    _task_file(tmp_path / "small.jsonl", 50)
    notes: list[str] = []
    data = DataConfig(source="jsonl", path=str(tmp_path / "small.jsonl"))
    assert data.val_size is None
    train, val = load_tasks(data, seed=0, log=notes.append)
    assert len(val) == 10 and len(train) == 40
    assert not {t.id for t in train} & {t.id for t in val}
    assert len(notes) == 1 and "holding out 10" in notes[0] and "data.val_path" in notes[0]
    # a size the user set is never changed: too large is an error naming the fix
    with pytest.raises(DataError, match=r"50 tasks, need more than data.val_size=200.*"
                                        r"data.val_path"):
        load_tasks(data.model_copy(update={"val_size": 200}), seed=0)
    # large files keep the 200 of before
    _task_file(tmp_path / "large.jsonl", 1200, mixture="2d+-2d")
    train, val = load_tasks(DataConfig(source="jsonl", path=str(tmp_path / "large.jsonl")),
                            seed=0, log=notes.append)
    assert len(val) == 200 and len(train) == 1000 and len(notes) == 1


def test_training_reads_data_val_path(tmp_path):
    from rlvr.train.run import Run

    _task_file(tmp_path / "train.jsonl", 50)
    val_ids = _task_file(tmp_path / "val.jsonl", 6, seed=1, mixture="2d+-2d")
    config = load_config(RunConfig, None, [
        "model.name=tiny-random", "data.source=jsonl", f"data.path={tmp_path / 'train.jsonl'}",
        f"data.val_path={tmp_path / 'val.jsonl'}", "logging.tensorboard=false"])
    run = Run(config, tmp_path / "run")
    try:
        run.load()
        data = run.state.data
        assert [t.id for t in data.val_tasks] == val_ids and len(data.train_tasks) == 50
    finally:
        run.rewards.close()

    # a val_path that does not exist exits 2 before any work
    result = runner.invoke(app, ["train", "--set", "model.name=tiny-random", "--set",
                                 "data.source=jsonl", "--set",
                                 f"data.path={tmp_path / 'train.jsonl'}", "--set",
                                 f"data.val_path={tmp_path / 'missing.jsonl'}",
                                 "-o", str(tmp_path / "r2")])
    assert result.exit_code == 2, result.output
    assert "data.val_path:" in result.output and "missing.jsonl does not exist" in result.output


def test_eval_uses_every_record_of_the_file_it_is_given(tmp_path):
    ids = _task_file(tmp_path / "twenty.jsonl", 20)
    out = tmp_path / "all"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "jsonl",
                                 "--data-path", str(tmp_path / "twenty.jsonl"), "--limit", "20",
                                 *SMALL, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted({r["id"] for r in _rows(out)}) == sorted(ids)
    out = tmp_path / "default"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "jsonl",
                                 "--data-path", str(tmp_path / "twenty.jsonl"), *SMALL,
                                 "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "results.json").read_text())["problems"] == 20
    out = tmp_path / "first5"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "jsonl",
                                 "--data-path", str(tmp_path / "twenty.jsonl"), "--limit", "5",
                                 *SMALL, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert list(dict.fromkeys(r["id"] for r in _rows(out))) == ids[:5]


# ------------------------------------------------------------------ item 14: --plugins, task types

PLUGIN = '''"""A user's own task type for rlvr eval --plugins."""
from rlvr.rewards.registry import register_verifier
from rlvr.rewards.types import Status, Verdict


@register_verifier("{name}", format_rule="none")
def always(completion, reference, **options):
    """Correct, and says it was this plugin that scored."""
    return Verdict(Status.correct, "scored-by-plugin", "bare")
'''


def _own_tasks(path, task_type, n=3):
    path.write_text("".join(json.dumps({"id": f"own-{i}", "prompt": f"Say {i}.",
                                        "reference": str(i), "task_type": task_type,
                                        "source": "mine"}) + "\n" for i in range(n)))
    return path


def test_an_unknown_task_type_exits_2_before_any_sampling(tmp_path, monkeypatch):
    import rlvr.eval.engine_sampler as engine_sampler

    def no_sampling(*args, **kwargs):
        raise AssertionError("a model was loaded for tasks no verifier can score")

    monkeypatch.setattr(engine_sampler, "load_engine_sampler", no_sampling)
    data = _own_tasks(tmp_path / "own.jsonl", "my_exact")
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "jsonl",
                                 "--data-path", str(data), *SMALL, "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    text = _flat(result.output)
    assert "own.jsonl:1: task_type 'my_exact' has no registered verifier" in text
    assert "registered: code, logic, math" in text and "--plugins" in text
    assert "Traceback" not in result.output and len(result.output.splitlines()) < 12
    assert not (tmp_path / "o").exists()

    # the library check runs before sampling too (tasks built in code, not read from a file)
    from rlvr.eval.evaluate import EvalError, EvalSettings, evaluate_models
    from rlvr.records import Task

    task = Task("t", "Say 1.", "1", "my_exact", "mine")
    with pytest.raises(EvalError, match="task_type 'my_exact' has no registered verifier"):
        evaluate_models({"m": no_sampling}, [task], EvalSettings(n=2), rewards=None)


def test_a_plugin_that_does_not_import_exits_2_naming_the_option(tmp_path):
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "arithmetic",
                                 "--plugins", "no_such_plugin_module", *SMALL,
                                 "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "--plugins: cannot import 'no_such_plugin_module'" in result.output


@pytest.mark.timeout(240)
def test_eval_plugins_registers_the_task_type_here_and_in_the_verifier_workers(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "my_eval_plugin.py").write_text(PLUGIN.replace("{name}", "my_exact"))
    _own_tasks(tmp_path / "own.jsonl", "my_exact")
    # as a user runs it: from the directory holding the plugin, verifiers in worker processes
    command = [sys.executable, "-m", "rlvr.cli", "eval", "--model", "tiny-random", "--tasks",
               "jsonl", "--data-path", "own.jsonl", "--plugins", "my_eval_plugin", "--workers",
               "2", *SMALL, "-o", "out"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=200,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(tmp_path / "out")
    assert len(rows) == 6 and {r["task_type"] for r in rows} == {"my_exact"}
    assert {r["status"] for r in rows} == {"correct"}
    assert {r["extracted"] for r in rows} == {"scored-by-plugin"}


# ------------------------------------------------------ item 15: the prompt a checkpoint saw

TRAINED_WITH = "Reply with #### and the number, nothing else."


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A smoke run (tiny model, 1 GRPO step) trained with a custom instruction."""
    from pathlib import Path

    from rlvr.train.run import Run

    smoke = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
    config = load_config(RunConfig, smoke, [
        "grpo.steps=1", "sft.examples=16", "sft.epochs=1", "eval.every=0",
        "eval.pass_at_k_samples=0", "logging.tensorboard=false", "data.train_size=16",
        "data.val_size=4"])
    config.data.instruction = TRAINED_WITH
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    Run(config, run_dir).train()
    return run_dir


def test_every_checkpoint_saves_its_prompt_settings(trained_run):
    from rlvr.tasks.prompting import PROMPT_FILE

    for directory in (trained_run / "checkpoints" / "step-000000",
                      trained_run / "checkpoints" / "step-000001", trained_run / "sft_model"):
        saved = json.loads((directory / PROMPT_FILE).read_text())
        assert saved["instruction"] == TRAINED_WITH and saved["one_shot"] is False
        assert saved["source"] == "arithmetic" and "<|im_start|>" in saved["chat_template"]


def test_eval_without_config_prompts_a_checkpoint_with_its_saved_instruction(trained_run,
                                                                            tmp_path,
                                                                            user_turns):
    checkpoint = trained_run / "checkpoints" / "step-000001"
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--model", str(checkpoint), "--tasks", "arithmetic",
                                 "--mixture", "1dop1d", "--limit", "3", *SMALL, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(user_turns) == 3
    assert all(turn.endswith("\n" + TRAINED_WITH) for turn in user_turns)
    text = _flat(result.output)
    assert f"instruction for {checkpoint}: {TRAINED_WITH!r}" in text
    assert f"saved with the model: {checkpoint / 'rlvr_prompt.json'}" in text
    prompts = json.loads((out / "results.json").read_text())["settings"]["prompts"]
    assert prompts[str(checkpoint)]["instruction"] == TRAINED_WITH

    # a model without saved settings gets the default and says so
    user_turns.clear()
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "arithmetic",
                                 "--mixture", "1dop1d", "--limit", "2", *SMALL,
                                 "-o", str(tmp_path / "plain")])
    assert result.exit_code == 0, result.output
    assert all(turn.endswith("\n" + DEFAULT_INSTRUCTION) for turn in user_turns)
    assert "the default for --tasks arithmetic; tiny-random has no saved prompt" in _flat(
        result.output)


def test_config_or_flag_overrides_the_saved_instruction(trained_run, tmp_path, user_turns):
    checkpoint = trained_run / "checkpoints" / "step-000001"
    common = ["eval", "--model", str(checkpoint), "--tasks", "arithmetic", "--mixture",
              "1dop1d", "--limit", "2", *SMALL]
    config = tmp_path / "other.yaml"
    config.write_text("data:\n  instruction: 'Think, then write #### <answer>.'\n")
    result = runner.invoke(app, [*common, "--config", str(config), "-o", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert user_turns and all(t.endswith("\nThink, then write #### <answer>.")
                              for t in user_turns)
    assert f"(--config {config})" in _flat(result.output)
    user_turns.clear()
    result = runner.invoke(app, [*common, "--instruction", "Only the number.",
                                 "-o", str(tmp_path / "f")])
    assert result.exit_code == 0, result.output
    assert user_turns and all(t.endswith("\nOnly the number.") for t in user_turns)
    assert "(--instruction)" in result.output


def test_a_checkpoint_saved_before_the_prompt_file_uses_its_runs_config(trained_run, tmp_path):
    import shutil

    from rlvr.tasks.prompting import PROMPT_FILE, saved_prompt

    old = tmp_path / "run"
    shutil.copytree(trained_run, old)
    for path in old.rglob(PROMPT_FILE):
        path.unlink()
    for directory in (old / "sft_model", old / "checkpoints" / "step-000001"):
        saved = saved_prompt(directory)
        assert saved.origin == old / "config.yaml"
        assert saved.instruction_for("arithmetic") == TRAINED_WITH
    assert saved_prompt("tiny-random") is None and saved_prompt(tmp_path) is None


def test_code_sources_get_a_code_instruction_not_the_math_one(tmp_path, user_turns):
    # `rlvr eval --tasks mbpp` put "give the final answer on a last line of
    # the form '#### <answer>'" after prompts asking for one ```python block
    from rlvr.tasks.builtin_sources import CODE_INSTRUCTION
    from rlvr.tasks.config import default_instruction

    assert default_instruction("mbpp") == default_instruction("humaneval") == CODE_INSTRUCTION
    assert DataConfig(source="mbpp").instruction == CODE_INSTRUCTION
    mbpp = tmp_path / "mbpp.jsonl"
    mbpp.write_text("".join(json.dumps({
        "task_id": task_id, "text": "Write a function add(a, b).",
        "code": "def add(a, b):\n    return a + b\n", "test_list": ["assert add(1, 2) == 3"],
        "test_setup_code": "", "challenge_test_list": []}) + "\n" for task_id in (511, 601)))
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "mbpp",
                                 "--data-path", str(mbpp), "--limit", "1",
                                 *SMALL, "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert user_turns and all(turn.endswith(CODE_INSTRUCTION) for turn in user_turns)
    assert all("####" not in turn for turn in user_turns)

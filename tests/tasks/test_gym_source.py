"""The reasoning-gym task source (`data.source: reasoning_gym`, rlvr.tasks.gym): deterministic
items, train / validation never sharing a question, entries rebuilt from their metadata, the
mixture checked against reasoning-gym, `rlvr data generate` and `rlvr eval --tasks`."""

import json
from collections import Counter

import pytest

rg = pytest.importorskip("reasoning_gym")

from rlvr.tasks.config import DataConfig  # noqa: E402
from rlvr.tasks.gym import CHUNK, chunk_seed, generate_gym, parse_mixture, rebuild_entry  # noqa: E402
from rlvr.tasks.logic import split_of  # noqa: E402
from rlvr.tasks.sources import load_tasks  # noqa: E402

MIX = "countdown(min_numbers=3, max_numbers=4):0.5,knights_knaves(n_people=2):0.5"


def test_same_seed_gives_the_same_items_and_another_seed_others():
    a = generate_gym(MIX, 12, seed=3)
    b = generate_gym(MIX, 12, seed=3)
    c = generate_gym(MIX, 12, seed=4)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert {t.prompt for t in a}.isdisjoint({t.prompt for t in c})


def test_train_and_validation_share_no_question_and_each_split_holds_its_own():
    stats = Counter()
    train = generate_gym(MIX, 60, seed=0, split="train")
    val = generate_gym(MIX, 30, seed=1, split="validation", stats=stats)
    assert len(train) == 60 and len(val) == 30
    assert {t.prompt for t in train}.isdisjoint({t.prompt for t in val})
    assert all(split_of(t.prompt, 0.2, "rlvr-gym-v1") == "train" for t in train)
    assert all(split_of(t.prompt, 0.2, "rlvr-gym-v1") == "validation" for t in val)
    assert len({t.prompt for t in val}) == 30  # repeats dropped within a split
    # most drawn items belong to train: validation draws about five per kept item
    assert stats["drawn"] == 30 + stats["other_split"] + stats["repeated"]
    assert stats["other_split"] > stats["drawn"] / 2


def test_a_task_records_what_rebuilds_its_entry_and_what_score_answer_needs():
    task = generate_gym("countdown(min_numbers=3, max_numbers=3)", 3, seed=5)[2]
    md = task.metadata
    assert md["dataset"] == "countdown" and md["config"] == {"min_numbers": 3, "max_numbers": 3}
    assert md["seed"] == chunk_seed(5, "train", "countdown", 0) and md["index"] < CHUNK
    entry = rebuild_entry(md)
    direct = rg.create_dataset("countdown", min_numbers=3, max_numbers=3, seed=md["seed"],
                               size=CHUNK)[md["index"]]
    assert entry == direct
    assert task.reference == {"dataset": "countdown", "config": md["config"],
                              "entry": json.loads(json.dumps(direct))}
    assert task.prompt == direct["question"] and task.task_type == "reasoning_gym"
    assert task.solution == f"<answer>{direct['answer']}</answer>"
    assert task.category == task.difficulty == "countdown"


def test_weights_pick_the_datasets_and_a_zero_weight_drops_one():
    tasks = generate_gym("leg_counting:1,basic_arithmetic:0", 20, seed=0)
    assert {t.category for t in tasks} == {"leg_counting"}
    mixed = Counter(t.category for t in generate_gym("leg_counting:3,basic_arithmetic:1", 200,
                                                     seed=0))
    assert 120 <= mixed["leg_counting"] <= 180  # 150 expected


@pytest.mark.parametrize("spec, error, words", [
    ("countdwn", KeyError, ["unknown reasoning-gym dataset 'countdwn'", "countdown"]),
    ("countdown(seed=3)", ValueError, ["seed", "set by rlvr"]),
    ("countdown(min_numbers=0)", ValueError, ["countdown: bad options"]),
    ("countdown(min_numbers=three)", ValueError, ["bad options of 'countdown'"]),
    ("countdown:-1", ValueError, ["must be >= 0"]),
])
def test_bad_mixtures_are_refused_naming_the_problem(spec, error, words):
    with pytest.raises(error) as info:
        parse_mixture(spec)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_data_config_defaults_and_load_tasks_give_disjoint_splits():
    data = DataConfig(source="reasoning_gym", mixture=MIX, train_size=40, val_size=10)
    assert data.instruction.startswith("Think it through") and "<answer>" in data.instruction
    train, val = load_tasks(data, seed=0)
    assert len(train) == 40 and len(val) == 10
    assert {t.prompt for t in train}.isdisjoint({t.prompt for t in val})
    with pytest.raises(ValueError, match="unknown reasoning-gym dataset"):
        DataConfig(source="reasoning_gym", mixture="nope")


def test_cli_generate_writes_task_records_that_load_back(tmp_path):
    from typer.testing import CliRunner

    from rlvr.cli import app
    from rlvr.tasks.sources import load_task_file

    out = tmp_path / "gym.jsonl"
    result = CliRunner().invoke(app, ["data", "generate", "reasoning_gym", "-m", MIX, "-n", "8",
                                      "--seed", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    tasks = load_task_file(out)
    assert [t.to_dict() for t in tasks] == [t.to_dict() for t in generate_gym(MIX, 8, seed=2)]
    bad = CliRunner().invoke(app, ["data", "generate", "reasoning_gym", "-m", "nope", "-n", "2",
                                   "-o", str(tmp_path / "x.jsonl")])
    assert bad.exit_code == 2 and "unknown reasoning-gym dataset" in bad.output


def test_rlvr_eval_tasks_reasoning_gym_generates_prompts_and_scores(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from rlvr.cli import app
    from rlvr.tasks import prompting

    turns = []
    original = prompting.chat_messages

    def recording(task, instruction, one_shot):
        messages = original(task, instruction, one_shot)
        turns.append(messages[-1]["content"])
        return messages

    monkeypatch.setattr(prompting, "chat_messages", recording)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["eval", "--model", "tiny-random", "--tasks",
                                      "reasoning_gym", "--mixture", MIX, "--limit", "4", "--n",
                                      "2", "--max-new-tokens", "4", "--batch-size", "4",
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {r["task_type"] for r in rows} == {"reasoning_gym"}
    assert {r["category"] for r in rows} <= {"countdown", "knights_knaves"}
    # the validation items, each prompted with the <answer> instruction
    val = generate_gym(MIX, 4, seed=1, split="validation")
    assert len(turns) == 4 and all(t.endswith("</answer> tags.") for t in turns)
    assert all(any(turn.startswith(t.prompt) for turn in turns) for t in val)

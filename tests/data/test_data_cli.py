"""`rlvr data convert / generate / check / stratify` end to end on real files and a tiny
model; bad input exits 2 naming the file or option."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.records import Task

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
runner = CliRunner()


def _tasks(path: Path) -> list[Task]:
    return [Task.from_json(line) for line in path.read_text().splitlines()]


@pytest.mark.skipif(not (SHARED / "gsm8k").is_dir(), reason="shared GSM8K data not present")
def test_convert_gsm8k_and_math500_to_task_records(tmp_path):
    out = tmp_path / "gsm8k.jsonl"
    result = runner.invoke(app, ["data", "convert", "gsm8k", str(SHARED / "gsm8k"),
                                 "--split", "test", "-o", str(out)])
    assert result.exit_code == 0, result.output
    tasks = _tasks(out)
    assert len(tasks) == 1319 and tasks[0].task_type == "math" and tasks[0].source == "gsm8k"
    assert tasks[0].reference.rstrip().endswith("#### 18")  # Janet's ducks
    out = tmp_path / "math500.jsonl"
    assert runner.invoke(app, ["data", "convert", "math500", str(SHARED / "math500"), "-o",
                               str(out)]).exit_code == 0
    assert len(_tasks(out)) == 500


def test_convert_and_generate_refuse_bad_input(tmp_path):
    result = runner.invoke(app, ["data", "convert", "gsm9k", "x", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "'gsm9k' is not one of" in result.output
    result = runner.invoke(app, ["data", "convert", "gsm8k", str(tmp_path / "missing"),
                                 "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "missing" in result.output
    result = runner.invoke(app, ["data", "generate", "arithmetic", "-m", "9d+9d", "-o",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2 and "--mixture" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "p", "reference": "1", "task_type": "math"}\n')
    result = runner.invoke(app, ["data", "check", "-t", str(bad)])
    assert result.exit_code == 2 and f"{bad}:1" in result.output and "source" in result.output


def test_check_reports_failures_per_source_and_writes_the_clean_tasks(tmp_path):
    good = Task("g1", "What is 2 + 3?", "5", "math", "mine", solution="2 + 3 = 5\n#### 5")
    wrong_solution = Task("w1", "What is 2 + 2?", "4", "math", "mine",
                          solution="2 + 2 = 5\n#### 5")
    broken_ref = Task("b1", "What is 1 + 1?", "Total: ####", "math", "other")
    path = tmp_path / "t.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in (good, wrong_solution, broken_ref)))
    clean = tmp_path / "clean.jsonl"
    result = runner.invoke(app, ["data", "check", "-t", str(path), "-o", str(clean),
                                 "--workers", "1"])
    assert result.exit_code == 1
    assert "FAIL mine w1: solution: wrong" in result.output
    assert "FAIL other b1: reference: error empty reference" in result.output
    assert "│ mine   │     2 │             0 / 2 │            1 / 2 │" in result.output
    assert [t.id for t in _tasks(clean)] == ["g1"]


def test_generate_logic_then_stratify_with_a_tiny_model(tmp_path):
    tasks = tmp_path / "logic.jsonl"
    assert runner.invoke(app, ["data", "generate", "logic", "-m", "countdown-3:0.5,kk-2:0.5",
                               "-n", "6", "-o", str(tasks)]).exit_code == 0
    out = tmp_path / "tiers.jsonl"
    result = runner.invoke(app, ["data", "stratify", "-t", str(tasks), "--model", "tiny-random",
                                 "-n", "4", "-o", str(out), "--max-new-tokens", "8"])
    assert result.exit_code == 0, result.output
    stratified = _tasks(out)
    assert [t.id for t in stratified] == [t.id for t in _tasks(tasks)]
    for t in stratified:  # a random tiny model solves nothing: all hard, pass rate 0
        assert t.pass_rate == 0.0 and t.difficulty == "hard"
        assert t.metadata["level"] in ("countdown-3", "kk-2")
    assert "0/4 │        6" in result.output and "tiers: easy 0, medium 0, hard 6" in result.output


def test_stratify_assigns_tiers_from_pass_rates():
    from types import SimpleNamespace

    from rlvr.data.stratify import histogram, stratify, tier
    from rlvr.rewards.config import RewardConfig
    from rlvr.rewards.pipeline import RewardPipeline

    assert [tier(r) for r in (1.0, 0.75, 0.625, 0.375, 0.25, 0.0)] == [
        "easy", "easy", "medium", "medium", "hard", "hard"]
    with pytest.raises(ValueError, match="hard < easy"):
        tier(0.5, easy=0.2, hard=0.4)
    tasks = [Task(f"t{i}", "q", "7", "math", "s", difficulty="2d+-2d") for i in range(3)]
    right, wrong = SimpleNamespace(text="#### 7"), SimpleNamespace(text="#### 8")
    samples = [[right] * 4, [right, right, wrong, wrong], [wrong] * 4]
    with RewardPipeline(RewardConfig(workers=0)) as rewards:
        out = stratify(tasks, samples, rewards)
    assert [(t.pass_rate, t.difficulty) for t in out] == [(1.0, "easy"), (0.5, "medium"),
                                                          (0.0, "hard")]
    assert histogram(out, 4) == {"by_correct": {0: 1, 1: 0, 2: 1, 3: 0, 4: 1},
                                 "by_tier": {"easy": 1, "medium": 1, "hard": 1},
                                 "mean_pass_rate": 0.5}


def test_dedup_command_removes_planted_copies_and_reports_their_eval_item(tmp_path):
    q = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many "
         "clips in May. How many clips did Natalia sell altogether in April and May?")
    evaluation = [Task("e1", q, "72", "math", "eval"),
                  Task("e2", "A robe takes 2 bolts of blue fiber and half that much white "
                       "fiber. How many bolts in total does it take?", "3", "math", "eval")]
    train = [Task("copy", q.replace("48", "52"), "78", "math", "train"),
             Task("own", "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 "
                  "minutes of babysitting. How much did she earn?", "10", "math", "train")]
    paths = {}
    for name, tasks in (("train", train), ("eval", evaluation)):
        paths[name] = tmp_path / f"{name}.jsonl"
        paths[name].write_text("".join(t.to_json() + "\n" for t in tasks))
    clean = tmp_path / "clean.jsonl"
    result = runner.invoke(app, ["data", "dedup", "--train", str(paths["train"]), "--eval",
                                 str(paths["eval"]), "-o", str(clean)])
    assert result.exit_code == 0, result.output
    assert "exact 1.00 train copy ~ eval e1" in result.output
    assert "1 of 2 training items contaminated (1 exact, 0 near)" in result.output
    assert [t.id for t in _tasks(clean)] == ["own"]


def test_variants_command_recomputes_the_answer(tmp_path):
    natalia = Task("n1", "Natalia sold clips to 48 of her friends in April, and then she sold "
                   "half as many clips in May. How many clips did Natalia sell altogether in "
                   "April and May?",
                   "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = "
                   "<<48+24=72>>72 clips altogether in April and May.\n#### 72", "math", "gsm8k")
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(natalia.to_json() + "\n")
    result = runner.invoke(app, ["data", "variants", "-t", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    (variant,) = _tasks(out)
    new = int(variant.metadata["substitutions"]["48"])
    assert new != 48 and f"to {new} of her friends" in variant.prompt
    assert variant.reference.endswith(f"#### {new + new // 2}")
    assert variant.metadata["variant_of"] == "n1"


def test_unknown_split_and_unknown_task_type_exit_2_naming_them(tmp_path):
    result = runner.invoke(app, ["data", "convert", "gsm8k", str(tmp_path), "--split", "dev",
                                 "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2 and "--split: 'dev' is not a split of gsm8k" in result.output
    odd = tmp_path / "odd.jsonl"
    odd.write_text(Task("c1", "What is NaCl?", "salt", "chemistry", "mine").to_json() + "\n")
    for cmd in (["data", "check", "-t", str(odd)],
                ["data", "stratify", "-t", str(odd), "--model", "tiny-random"]):
        result = runner.invoke(app, cmd)
        assert result.exit_code == 2, result.output
        assert f"{odd}:1: task_type 'chemistry' has no verifier" in " ".join(result.output.split())


# the data commands' flags with wrong values exit 2 naming the option,
# before any file is read (the task files below need not exist)
@pytest.mark.parametrize("args, option", [
    (["dedup", "--train", "t.jsonl", "--eval", "e.jsonl", "--threshold", "1.5"], "--threshold"),
    (["dedup", "--train", "t.jsonl", "--eval", "e.jsonl", "--threshold", "-0.1"],
     "--threshold"),
    (["generate", "arithmetic", "-n", "0"], "-n"),
    (["generate", "arithmetic", "-n", "true"], "-n"),
    (["stratify", "-t", "t.jsonl", "-n", "0"], "-n"),
    (["stratify", "-t", "t.jsonl", "--temperature", "-1"], "--temperature"),
    (["stratify", "-t", "t.jsonl", "--easy", "1.5"], "easy=1.5"),
    (["stratify", "-t", "t.jsonl", "--easy", "0.2", "--hard", "0.5"], "hard=0.5, easy=0.2"),
    (["variants", "-t", "t.jsonl", "--per-task", "0"], "--per-task"),
    (["check", "-t", "t.jsonl", "--workers", "0"], "--workers"),
])
def test_bad_flag_values_exit_2_naming_the_option(tmp_path, args, option):
    result = runner.invoke(app, ["data", *args])
    assert result.exit_code == 2, result.output
    assert option in " ".join(result.output.split())

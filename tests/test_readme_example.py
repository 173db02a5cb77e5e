"""The README's "Train on your own problems with your own reward" example works as written:
its JSONL, verifier module and run config are taken from the README itself, the config
validates, the verifier scores through the reward pipeline and `rlvr verify`, and (slow) the
quick-check training command runs to its results table."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Train on your own problems with your own reward"


def _example() -> dict[str, list[str]]:
    """The fenced blocks of the README's example section, by language."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks: dict[str, list[str]] = {}
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", text[start:end], re.DOTALL):
        blocks.setdefault(lang, []).append(body)
    return blocks


@pytest.fixture
def workdir(tmp_path):
    blocks = _example()
    assert set(blocks) == {"json", "python", "yaml", "bash"}, set(blocks)
    (tmp_path / "mine.jsonl").write_text(blocks["json"][0], encoding="utf-8")
    (tmp_path / "my_reward.py").write_text(blocks["python"][0], encoding="utf-8")
    (tmp_path / "mine.yaml").write_text(blocks["yaml"][0], encoding="utf-8")
    return tmp_path


def _commands() -> list[str]:
    lines = _example()["bash"][0].splitlines()
    return [line.split("  #")[0].strip() for line in lines if line.strip()]


def _run(args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "rlvr.cli", *args], cwd=cwd, env=env, check=False,
                          capture_output=True, text=True, timeout=timeout)


def test_the_example_has_the_pieces_it_promises():
    commands = _commands()
    assert commands[0].startswith("echo '") and commands[0].endswith("' > try.jsonl")
    assert commands[1] == "rlvr verify --plugins my_reward try.jsonl"
    assert commands[2].startswith("rlvr train --config mine.yaml --set model.name=tiny-random")
    assert commands[3] == "rlvr train --config mine.yaml"
    yaml_and_python = sum(len(_example()[k][0].splitlines()) for k in ("yaml", "python"))
    assert yaml_and_python <= 35  # "in about 30 lines of YAML / Python"


def test_config_validates_and_records_are_tasks(workdir, monkeypatch):
    from rlvr.configio import load_config
    from rlvr.records import Task
    from rlvr.train.config import RunConfig

    monkeypatch.chdir(workdir)
    config = load_config(RunConfig, workdir / "mine.yaml", [])
    assert (config.data.source, config.data.path) == ("jsonl", "mine.jsonl")
    assert config.reward.plugins == ["my_reward"] and config.sft.enabled is False
    tasks = [Task(**json.loads(line)) for line in
             (workdir / "mine.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(t.task_type, t.reference) for t in tasks] == [
        ("yesno", "no"), ("yesno", "yes")] * 3
    assert len(tasks) > config.data.val_size  # something is left to train on


def test_the_verifier_scores_through_rlvr_verify(workdir):
    # the README's first command writes try.jsonl; its JSON is taken from the command itself
    record = _commands()[0][len("echo '"):-len("' > try.jsonl")]
    rows = [json.loads(record),
            {"task_type": "yesno", "completion": "<answer>yes</answer>", "reference": "no"},
            {"task_type": "yesno", "completion": "maybe", "reference": "no"}]
    (workdir / "try.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                       encoding="utf-8")
    done = _run(["verify", "--plugins", "my_reward", "try.jsonl"], workdir, timeout=120)
    assert done.returncode == 0, done.stderr
    scored = [json.loads(line) for line in done.stdout.splitlines()]
    # outcome 1 + format 0.1 x answer_tag's 1.0 for the right answer; the wrong one keeps the
    # format credit only; no yes / no at all: unparsed, nothing
    assert [(r["status"], r["extracted"], r["reward"]) for r in scored] == [
        ("correct", "no", pytest.approx(1.1)), ("wrong", "yes", pytest.approx(0.1)),
        ("unparsed", None, pytest.approx(0.0))]


@pytest.mark.slow
def test_the_quick_check_trains(workdir):
    args = _commands()[2].split()[1:]
    done = _run([*args, "-o", "run"], workdir, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((workdir / "run" / "results.json").read_text(encoding="utf-8"))
    # 2 held-out problems (val_size: 2), validated before and after the one GRPO step
    assert len(results["baseline"]["verdicts"]) == len(results["trained"]["verdicts"]) == 2

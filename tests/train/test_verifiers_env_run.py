"""`rlvr train` and `rlvr eval --config` with `env: {source: verifiers}` on the tiny random
model, with the multi-turn higher / lower environment tests/envs/vf_guess_env.py: the
environment's rows are the tasks (no data.source written), every observation in the logged
trajectories is the environment's answer to the turn before it (not trained), and every
reward and rubric component equals the rubric recomputed by hand from the trajectory."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("verifiers")
pytest.importorskip("datasets")

ROOT = Path(__file__).resolve().parents[2]
RLVR = [sys.executable, "-m", "rlvr.cli"]
CONFIG = """\
name: vf-smoke
seed: 0
model: {name: tiny-random}
env: {source: verifiers, module: vf_guess_env, kwargs: {n: 30, max_turns: 3},
      max_episode_tokens: 64}
data: {train_size: 8, val_size: 4}
sft: {enabled: false}
grpo: {steps: 2, prompts_per_step: 2, group_size: 4, max_new_tokens: 8, micro_batch_size: 8}
rollout: {engine: torch}
reward: {workers: 1}
eval: {every: 2, max_new_tokens: 8, pass_at_k_samples: 0}
checkpoint: {every: 2, keep: 1}
"""


def _env() -> dict:
    # this checkout's rlvr, and tests/envs for the environment module (verifier workers too)
    path = [str(ROOT / "src"), str(ROOT / "tests" / "envs"), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(p for p in path if p))


def _run(args: list[str]) -> None:
    done = subprocess.run([*RLVR, *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _last_int(text: str) -> int | None:
    import re
    found = re.findall(r"-?\d+", text)
    return int(found[-1]) if found else None


def check_episode(row: dict) -> int:
    """Assert the row's observations and reward are vf_guess_env's; returns its observations.
    By hand: an observation answers the assistant turn before it (its last integer against
    the secret); reward = 0.7 * solved + 0.3 / (guesses env_response counted)."""
    secret = int(row["reference"]["row"]["answer"])
    steps = row["trajectory"]
    assistant = [s["text"] for s in steps if s["role"] == "assistant"]
    observations = 0
    for before, step in zip(steps, steps[1:]):
        if step["role"] != "user":
            continue
        guess = _last_int(before["text"])
        want = "No number." if guess is None else "higher" if guess < secret else "lower"
        assert before["role"] == "assistant" and step["text"] == want
        assert step["trained"] is False
        observations += 1
    guesses = sum(s["role"] == "user" and s["text"] != "No number." for s in steps)
    solved = 1.0 if _last_int(assistant[-1]) == secret else 0.0
    assert row["components"]["rubric/solved"] == solved
    assert row["components"]["rubric/efficiency"] == pytest.approx(1 / guesses if guesses else 0)
    assert row["components"]["rubric/num_turns"] == len(assistant) == row["turns"] <= 3
    assert row["reward"] == pytest.approx(0.7 * solved + 0.3 * (1 / guesses if guesses else 0))
    return observations


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("vf") / "config.yaml"
    path.write_text(CONFIG)
    return path


def test_rlvr_train_plays_the_verifiers_environment(config, tmp_path):
    run = tmp_path / "run"
    _run(["train", "--config", str(config), "-o", str(run)])
    metrics = _rows(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(1.0 <= m["episode_turns_mean"] <= 3.0 for m in metrics)
    validation = _rows(run / "validation.jsonl")
    assert [v["label"] for v in validation] == ["before_grpo", "trained"]
    samples = _rows(run / "samples.jsonl")
    assert {r["reference"]["env"] for r in samples} == {"vf_guess_env"}
    # the random model sometimes ends a turn early: some episodes get an observation
    assert sum(check_episode(r) for r in samples) > 0
    saved = (run / "config.yaml").read_text()
    assert "verifiers_episodes" in saved and "vf_guess_env(n=30, max_turns=3)" in saved


def test_rlvr_eval_with_the_config_plays_the_verifiers_environment(config, tmp_path):
    out = tmp_path / "eval"
    _run(["eval", "--config", str(config), "--model", "tiny-random", "--n", "4", "--limit", "3",
          "--max-new-tokens", "8", "--batch-size", "4", "-o", str(out)])
    rows = _rows(out / "completions.jsonl")
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 3
    assert sum(check_episode(r) for r in rows) > 0

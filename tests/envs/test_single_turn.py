"""``single_turn``: today's tasks as one-turn episodes, with exactly today's rewards.

For tasks of every kind available offline (generated arithmetic and logic; GSM8K, MATH-500,
HumanEval and MBPP from the shared data), the episode's reward is the one the single-turn
path gives the same completion (``RewardPipeline.score_batch([ScoreRequest(text,
task.reference, task.task_type)])``, what ``rlvr.train.rollouts.score`` and validation
call), for right, wrong and cut completions; the prompt is the task's chat messages unchanged."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from rlvr.envs import EnvConfig, FinishReason, SingleTurnEnv, Turn, make_env
from rlvr.models.tiny import tiny_tokenizer
from rlvr.rewards import RewardPipeline, ScoreRequest
from rlvr.rewards.config import RewardConfig
from rlvr.tasks.prompting import chat_messages, prompt_ids
from rlvr.tasks.registry import task_source

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="module")
def rewards():
    with RewardPipeline(RewardConfig(workers=1)) as pipeline:
        yield pipeline


def generated(name: str, n: int = 3):
    source = task_source(name)
    return source.generate(source.default_mixture, n, seed=0, split="validation")


def from_file(name: str, split, n: int = 3):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared data missing: {path}")
    return task_source(name).read(path, split)[:n]


def completions(task) -> list[str]:
    """A right answer (the worked solution), a wrong one, a cut one, and the bare reference."""
    solution = task.solution or ""
    if task.task_type == "code":
        return [solution, "```python\ndef nothing():\n    return None\n```", solution[:40], ""]
    wrong = solution.rsplit("####", 1)[0] + "#### 100000007" if "####" in solution else "#### -1"
    texts = [solution, wrong, solution[: len(solution) // 2]]
    if isinstance(task.reference, str):
        texts.append(f"#### {task.reference}")
    return texts


def same(a, b) -> bool:
    """Equal results but for the time measured (``seconds``; a code verdict's cpu= / wall=)."""
    def untimed(r):
        return replace(r, seconds=0.0, detail=re.sub(r" (cpu|wall)=[0-9.]+s", "", r.detail))
    return untimed(a) == untimed(b)


KINDS = [("arithmetic", lambda: generated("arithmetic")),
         ("logic", lambda: generated("logic", 4)),
         ("gsm8k", lambda: from_file("gsm8k", "validation")),
         ("math500", lambda: from_file("math500", None)),
         ("humaneval", lambda: from_file("humaneval", None, 2)),
         ("mbpp", lambda: from_file("mbpp", "validation", 2))]


@pytest.mark.parametrize("kind, tasks", KINDS, ids=[k for k, _ in KINDS])
def test_same_reward_as_the_single_turn_path(kind, tasks, rewards):
    env = make_env(EnvConfig(), rewards)
    assert isinstance(env, SingleTurnEnv)
    episodes, turns, today = [], [], []
    for task in tasks():
        for text in completions(task):
            episodes.append(env.start(task))
            turns.append(Turn(text, tokens=len(text)))
            today.append(ScoreRequest(text, task.reference, task.task_type))
    expected = rewards.score_batch(today)
    results = env.step_many(episodes, turns)
    statuses = set()
    for episode, result, want in zip(episodes, results, expected):
        assert result.done and result.finish_reason is FinishReason.stop
        assert result.observation is None and episode.turns == 1
        assert same(result.reward, want) and episode.reward is result.reward
        statuses.add(want.status.value)
    assert "correct" in statuses and len(statuses) >= 2   # both right and wrong were judged


def test_the_prompt_is_the_tasks_chat_messages():
    tokenizer = tiny_tokenizer()
    [task] = generated("arithmetic", 1)
    for one_shot in (False, True):
        messages = chat_messages(task, "Write the answer as #### N.", one_shot)
        episode = SingleTurnEnv(None, rewards=None).start(task, messages)
        assert episode.messages == messages and episode.initial == len(messages)
        assert messages == chat_messages(task, "Write the answer as #### N.", one_shot)  # copied
        rendered = tokenizer.apply_chat_template(episode.messages, add_generation_prompt=True,
                                                 tokenize=False)
        assert tokenizer(rendered, add_special_tokens=False).input_ids == prompt_ids(
            tokenizer, task, "Write the answer as #### N.", one_shot)
    assert SingleTurnEnv(None, None).start(task).messages == [
        {"role": "user", "content": task.prompt}]


def test_a_cut_turn_ends_with_length_or_max_tokens_and_is_scored(rewards):
    [task] = generated("arithmetic", 1)
    cut = task.solution[:5]
    env = make_env(EnvConfig(max_episode_tokens=50), rewards)
    a, b = env.start(task), env.start(task)
    ra, rb = env.step_many([a, b], [Turn(cut, 20, "length"), Turn(cut, 50, "length")])
    assert (ra.finish_reason, rb.finish_reason) == (FinishReason.length, FinishReason.max_tokens)
    assert (a.tokens, a.tokens_left, b.tokens_left) == (20, 30, 0)
    want = rewards.score(cut, task.reference, task.task_type)
    assert same(ra.reward, want) and same(rb.reward, want) and want.status.value == "unparsed"


def test_one_turn_whatever_max_turns_says(rewards):
    [task] = generated("arithmetic", 1)
    env = make_env(EnvConfig(max_turns=5), rewards)
    episode = env.start(task)
    assert episode.max_turns == 1
    assert env.step(episode, Turn(task.solution, 9)).finish_reason is FinishReason.stop
    with pytest.raises(ValueError, match="already done"):
        env.step(episode, Turn("again"))

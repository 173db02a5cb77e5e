"""``env: {source: verifiers}`` (rlvr.envs.verifiers_adapter) with the small environment
modules tests/envs/vf_guess_env.py (multi-turn higher / lower) and tests/rewards/vf_tiny_env.py
(single-turn): the config supplies the tasks and refuses what disagrees or cannot run; an
episode played by a scripted assistant has the turns, observations, reward and per-function
scores of verifiers' own rollout driven by the same script (a ToolEnv's too, its calls parsed
from the text); group rubrics and environments that call a model client are refused with the
reason."""

import asyncio
from pathlib import Path
from unittest import mock

import pytest

pytest.importorskip("verifiers")
pytest.importorskip("datasets")

import vf_guess_env

from rlvr.envs import EnvConfig, FinishReason, Turn, make_env
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.verifiers_env import VerifiersEnvError
from rlvr.tasks.config import DataConfig
from rlvr.tasks.sources import load_tasks
from rlvr.train.config import RunConfig

REWARDS_DIR = Path(__file__).resolve().parents[1] / "rewards"  # vf_tiny_env


def guess_env(**kwargs) -> dict:
    return {"source": "verifiers", "module": "vf_guess_env", "kwargs": kwargs}


@pytest.fixture(scope="module")
def pipeline():
    with RewardPipeline(RewardConfig(workers=0)) as p:
        yield p


def tasks_of(env: dict, n: int = 6):
    config = RunConfig(model={"name": "tiny-random"}, env=env,
                       data={"train_size": n, "val_size": 2})
    train, _ = load_tasks(config.data, seed=0)
    return config, train


def verifiers_rollout(vf_env, row: dict, script: list[str]):
    """verifiers' own MultiTurnEnv.rollout with a scripted model (its replies in order: a
    text, or a text and its parsed tool calls, as a server gives them) and the rubric's
    score_rollout: the reference behaviour."""
    from verifiers.types import Response, ResponseMessage

    replies = iter(script)

    async def scripted(state, prompt, **kwargs):
        reply = next(replies)
        text, calls = (reply, None) if isinstance(reply, str) else reply
        return Response(id="r", created=0, model="m", message=ResponseMessage(
            role="assistant", content=text, tool_calls=calls, finish_reason="stop",
            is_truncated=False))

    with mock.patch.object(vf_env, "get_model_response", scripted), \
            mock.patch("verifiers.legacy.envs.environment.resolve_client", lambda c: c):
        state = asyncio.run(vf_env.rollout(input=dict(row), client=None, model="m"))
        asyncio.run(vf_env.rubric.score_rollout(state))
    return state


def play(env, task, script: list[str]):
    episode = env.start(task)
    results = []
    for text in script:
        results.append(env.step(episode, Turn(text, 3)))
        if results[-1].done:
            break
    return episode, results


def test_env_source_verifiers_supplies_the_tasks_and_the_adapter():
    config, train = tasks_of(guess_env(n=20))
    assert config.env.name == "verifiers" and config.data.source == "verifiers_episodes"
    assert config.data.mixture == "vf_guess_env(n=20)" and config.data.instruction == ""
    assert len(train) == 6 and {t.reference["env"] for t in train} == {"vf_guess_env"}
    # the prompt: the environment's system prompt and the row's question, as data.source does
    assert train[0].prompt.startswith(vf_guess_env.SYSTEM + "\n\nGuess my number")
    same = RunConfig(model={"name": "tiny-random"}, env=guess_env(n=20),
                     data={"source": "verifiers", "mixture": "vf_guess_env(n=20)"})
    assert same.data.source == "verifiers_episodes"


@pytest.mark.parametrize("data, words", [
    ({"source": "arithmetic"}, "data.source: 'arithmetic' disagrees with env.source verifiers"),
    ({"mixture": "vf_guess_env(n=3)"}, "data.mixture: 'vf_guess_env(n=3)' disagrees"),
    ({"path": "x.jsonl"}, "data.path: env.source verifiers"),
])
def test_data_that_disagrees_with_the_env_is_refused(data, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        RunConfig(model={"name": "tiny-random"}, env=guess_env(n=20), data=data)


@pytest.mark.parametrize("env, words", [
    ({"source": "verifiers"}, "module: source verifiers needs the environment module"),
    ({"source": "verifiers", "module": "vf_guess_env", "name": "tool"}, "leave name out"),
    ({"module": "vf_guess_env"}, "module / kwargs: only with source: verifiers"),
    ({"name": "verifiers"}, "needs source: verifiers and module"),
])
def test_env_fields_are_checked(env, words):
    with pytest.raises(ValueError, match=words):
        EnvConfig(**env)


def test_group_rubrics_are_refused_with_the_reason(monkeypatch):
    monkeypatch.syspath_prepend(str(REWARDS_DIR))
    with pytest.raises(ValueError, match="group reward functions .* scores each completion "
                                         "alone"):
        EnvConfig(source="verifiers", module="vf_tiny_env", kwargs={"kind": "group"})


def test_a_multi_turn_module_as_data_source_points_to_the_env_section():
    with pytest.raises(ValueError, match="env: {source: verifiers, module: vf_guess_env}"):
        DataConfig(source="verifiers", mixture="vf_guess_env")


def test_an_episode_equals_the_verifiers_rollout_with_the_same_script(pipeline):
    config, train = tasks_of(guess_env(n=20, max_turns=5))
    env = make_env(config.env, pipeline)
    task = next(t for t in train if int(t.reference["row"]["answer"]) not in (10, 15))
    secret = task.reference["row"]["answer"]
    script = ["Is it 10?", "Then 15.", "Hmm", f"It is {secret}.", "unused"]
    episode, results = play(env, task, script)
    state = verifiers_rollout(env.vf_env, task.reference["row"], script)
    want = [m.model_dump(exclude_none=True) for m in state["completion"]]
    got = episode.messages[episode.initial:]
    assert [(m["role"], m["content"]) for m in got] == [(m["role"], m["content"])
                                                         for m in want]
    # and by hand: 15 < 10? the observations follow the secret
    assert [r.observation["content"] for r in results[:-1]] == [
        "higher" if int(secret) > 10 else "lower", "higher" if int(secret) > 15 else "lower",
        "No number."]
    last = results[-1]
    assert last.finish_reason is FinishReason.stop and episode.turns == 4
    assert episode.state["stop_condition"] == "guessed" == state["stop_condition"]
    # env_response ran after turns 1-3 and counted 2 guesses ("Hmm" has none; the winning
    # turn ends the rollout before it): 0.7 * 1 + 0.3 / 2
    assert last.reward.reward == pytest.approx(state["reward"]) == pytest.approx(0.85)
    rubric = {k: v for k, v in last.reward.components.items() if k.startswith("rubric/")}
    assert rubric == pytest.approx({"rubric/" + k: float(v) for k, v in state["metrics"].items()})
    assert rubric["rubric/num_turns"] == 4.0 and rubric["rubric/efficiency"] == 0.5


def test_the_environments_max_turns_and_final_env_response(pipeline):
    config, train = tasks_of(guess_env(n=20, max_turns=2))
    env = make_env(config.env, pipeline)
    assert env.max_turns == 2  # env.max_turns 4, lowered to the environment's 2
    task = next(t for t in train if t.reference["row"]["answer"] != "1")
    episode, results = play(env, task, ["1", "1", "1"])
    state = verifiers_rollout(env.vf_env, task.reference["row"], ["1", "1"])
    assert episode.turns == 2 and results[-1].finish_reason is FinishReason.stop
    assert episode.state["stop_condition"] == "max_turns_reached" == state["stop_condition"]
    # not solved; env_response ran once (after the first turn), one guess: 0.3 * 1 / 1
    assert results[-1].reward.reward == pytest.approx(state["reward"]) == pytest.approx(0.3)

    config, train = tasks_of(guess_env(n=20, kind="final"))
    env = make_env(config.env, pipeline)
    secret = train[0].reference["row"]["answer"]
    script = ["0", secret]
    episode, results = play(env, train[0], script)
    state = verifiers_rollout(env.vf_env, train[0].reference["row"], script)
    assert episode.state["stop_condition"] == "has_final_env_response"
    assert results[-1].finish_reason is FinishReason.stop and episode.turns == 2
    assert state["completion"][-1].content == "Correct!"
    assert results[-1].reward.reward == pytest.approx(state["reward"]) \
        == pytest.approx(0.7 + 0.3 / 2)


def test_an_env_response_that_needs_a_model_client_is_refused(pipeline):
    config, train = tasks_of(guess_env(kind="client"))
    env = make_env(config.env, pipeline)
    episode = env.start(train[0])
    with pytest.raises(VerifiersEnvError, match="no model client"):
        env.step(episode, Turn("5", 1))


def test_a_single_turn_environment_through_env_scores_as_its_rubric(pipeline, monkeypatch):
    monkeypatch.syspath_prepend(str(REWARDS_DIR))
    import vf_tiny_env
    config, train = tasks_of({"source": "verifiers", "module": "vf_tiny_env"})
    env = make_env(config.env, pipeline)
    assert env.max_turns == 1
    answer = train[0].reference["row"]["answer"]
    text = f"Adding them.\n#### {answer}"
    episode, [result] = play(env, train[0], [text])
    parser = vf_tiny_env.vf.Parser(extract_fn=vf_tiny_env.final_number)
    messages = [{"role": "assistant", "content": text}]
    correct = vf_tiny_env.correct_answer(parser=parser, completion=messages, answer=answer)
    brevity = asyncio.run(vf_tiny_env.brevity(completion=messages))
    assert (correct, brevity) == (1.0, 1.0)
    assert result.finish_reason is FinishReason.stop and result.reward.status.value == "correct"
    assert result.reward.reward == pytest.approx(0.8 * correct + 0.2 * brevity)
    assert result.reward.components["rubric/brevity"] == brevity


def test_a_tool_environment_runs_the_calls_parsed_from_the_text(pipeline, monkeypatch):
    from verifiers.types import ToolCall

    from rlvr.envs.verifiers_adapter import tools_system_prompt
    monkeypatch.syspath_prepend(str(REWARDS_DIR))
    config, train = tasks_of({"source": "verifiers", "module": "vf_tiny_env",
                              "kwargs": {"kind": "tool"}})
    env = make_env(config.env, pipeline)
    task = train[0]
    a, b = task.reference["row"]["info"]["a"], task.reference["row"]["info"]["b"]
    call = f'<tool_call>{{"name": "add", "arguments": {{"a": {a}, "b": {b}}}}}</tool_call>'
    script = [f"Let me add. {call}", '<tool_call>{"name": "add", "arguments": '
              '{"a": 1}}</tool_call> and <tool_call>not json</tool_call>', f"#### {a + b}"]
    episode, results = play(env, task, script)
    assert episode.messages[0] == {"role": "system",
                                   "content": tools_system_prompt(env.vf_env.tool_defs)}
    assert "- add: Add two integers." in episode.messages[0]["content"]
    # the first call runs the function; the second misses an argument: the environment's own
    # error text; the malformed block is text, not a call
    assert results[0].observation == {"role": "tool", "content": str(a + b)}
    assert "missing 1 required positional argument: 'b'" in results[1].observation["content"]
    assert results[2].finish_reason is FinishReason.stop and episode.turns == 3
    assert episode.state["stop_condition"] == "no_tools_called"
    parsed = [[ToolCall(id="call_1_0", name="add", arguments=f'{{"a": {a}, "b": {b}}}')],
              [ToolCall(id="call_2_0", name="add", arguments='{"a": 1}')], None]
    state = verifiers_rollout(env.vf_env, task.reference["row"], list(zip(script, parsed)))
    want = [(m.role, m.content) for m in state["completion"] if m.role != "assistant"]
    assert [(m["role"], m["content"]) for m in episode.messages[episode.initial:]
            if m["role"] != "assistant"] == want
    # 0.8 * correct + 0.2 * brevity (#### N is short); the monitor counts the two calls
    assert results[2].reward.reward == pytest.approx(state["reward"]) == pytest.approx(1.0)
    rubric = {k: v for k, v in results[2].reward.components.items() if k.startswith("rubric/")}
    assert rubric == pytest.approx({"rubric/" + k: float(v) for k, v in state["metrics"].items()})
    assert rubric["rubric/total_tool_calls"] == 2.0 and rubric["rubric/add_calls"] == 2.0

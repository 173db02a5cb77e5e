"""The ``tool`` environment on scripted turns: calls, observations, limits and finish reasons,
and episodes side by side."""

import pytest

from rlvr.envs import EnvConfig, FinishReason, ToolEnv, Turn, make_env, tools_prompt
from rlvr.records import Task
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.tools import ToolStatus, get_tool

TASK = Task(id="mul-1", prompt="What is 1234 * 5678?", reference="7006652", task_type="math",
            source="test")
CALL = "I will use the calculator. <calculator>1234 * 5678</calculator>"
ANSWER = "1234 * 5678 = 7006652\n#### 7006652"


class CountingRewards:
    """The real pipeline, counting score_batch calls and their sizes."""

    def __init__(self, pipeline):
        self.pipeline, self.batches = pipeline, []

    def score_batch(self, requests):
        self.batches.append(len(requests))
        return self.pipeline.score_batch(requests)


@pytest.fixture(scope="module")
def pipeline():
    with RewardPipeline(RewardConfig(workers=0)) as p:
        yield p


@pytest.fixture(scope="module", autouse=True)
def _release_hung_tools():
    yield
    import rlvr_env_plugin
    rlvr_env_plugin.RELEASE.set()


def env_for(pipeline, **settings):
    settings.setdefault("tools", ["calculator"])
    return make_env(EnvConfig(name="tool", plugins=["rlvr_env_plugin"], **settings), pipeline)


def test_a_tool_episode(pipeline):
    env = env_for(pipeline)
    episode = env.start(TASK)
    assert episode.messages[0] == {"role": "system", "content": tools_prompt(
        [get_tool("calculator")])}
    assert episode.messages[1:] == [{"role": "user", "content": TASK.prompt}]
    first = env.step(episode, Turn(CALL, 14))
    assert not first.done and first.observation == {"role": "tool", "content": "7006652"}
    assert episode.messages[-2:] == [{"role": "assistant", "content": CALL}, first.observation]
    [call] = episode.tool_calls
    assert (call.name, call.status, call.text) == ("calculator", ToolStatus.ok, "7006652")
    last = env.step(episode, Turn(ANSWER, 16))
    assert last.finish_reason is FinishReason.stop and last.reward.status.value == "correct"
    assert last.reward.reward == pytest.approx(1.1)
    assert (episode.turns, episode.tokens, episode.done) == (2, 30, True)
    assert episode.assistant_texts == [CALL, ANSWER]


def test_the_default_system_prompt():
    assert tools_prompt([get_tool("calculator")]) == (
        "You can use tools. To call one, write its tag around the input and end your turn; the "
        "result comes back in the next message. A turn without a tool call is your final "
        "answer.\nTools:\n- <calculator>expression</calculator>: exact arithmetic: numbers, "
        "+ - * / // % ** (or ^) and parentheses, e.g. (1234 * 5678 - 9) / 3")
    assert tools_prompt([]) == ""


def test_system_prompt_settings(pipeline):
    custom = env_for(pipeline, system_prompt="Tools:\n{tools}")
    assert custom.start(TASK).messages[0]["content"] == (
        "Tools:\n- <calculator>expression</calculator>: exact arithmetic: numbers, + - * / // % "
        "** (or ^) and parentheses, e.g. (1234 * 5678 - 9) / 3")
    assert env_for(pipeline, system_prompt="").start(TASK).messages == [
        {"role": "user", "content": TASK.prompt}]
    merged = env_for(pipeline, system_prompt="Use tools.").start(
        TASK, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}])
    assert merged.messages == [{"role": "system", "content": "Use tools.\n\nBe brief."},
                               {"role": "user", "content": "q"}]


def test_a_malformed_call_is_an_error_observation(pipeline):
    env = env_for(pipeline)
    episode = env.start(TASK)
    result = env.step(episode, Turn("<calculator>1234 * 5678", 9))
    assert result.observation["content"] == \
        "Error: unclosed <calculator>: end the call with </calculator>"
    assert episode.tool_calls[0].status is ToolStatus.invalid and not episode.done
    bad = env.step(episode, Turn('<tool_call>{"name": "calculator", "arguments": '
                                 '{"expr": "1"}}</tool_call>', 9))
    assert bad.observation["content"] == \
        "Error: calculator: missing a required argument: 'expression'"


def test_several_calls_and_the_per_turn_limit(pipeline):
    env = env_for(pipeline, max_calls_per_turn=2)
    episode = env.start(TASK)
    result = env.step(episode, Turn("<calculator>1+2</calculator> <calculator>3+4</calculator> "
                                    "<calculator>5+6</calculator>", 20))
    assert result.observation["content"] == (
        "[1] calculator:\n3\n\n[2] calculator:\n7\n\n"
        "[3] calculator:\nError: not run: at most 2 tool calls per turn")
    assert [c.status for c in episode.tool_calls] == [ToolStatus.ok, ToolStatus.ok,
                                                      ToolStatus.invalid]


def test_max_turns_ends_without_running_the_call(pipeline):
    env = env_for(pipeline, max_turns=2)
    episode = env.start(TASK)
    assert not env.step(episode, Turn(CALL, 14)).done
    last = "again <calculator>1+1</calculator>"
    result = env.step(episode, Turn(last, 8))
    assert result.finish_reason is FinishReason.max_turns and episode.turns == 2
    assert len(episode.tool_calls) == 1                       # the second call did not run
    want = pipeline.score(last, TASK.reference, TASK.task_type)   # scored on that last turn
    assert (result.reward.status, result.reward.reward) == (want.status, want.reward)


def test_max_tokens_after_an_observation_and_at_a_cut(pipeline):
    env = env_for(pipeline, max_episode_tokens=40)
    a, b, c = env.start(TASK), env.start(TASK), env.start(TASK)
    results = env.step_many([a, b, c], [Turn(CALL, 25), Turn(CALL, 40), Turn("1234 *", 40,
                                                                                "length")])
    assert not results[0].done and a.tokens_left == 15
    assert results[1].finish_reason is FinishReason.max_tokens and b.tool_calls == []
    assert results[2].finish_reason is FinishReason.max_tokens
    a.add_inserted(15)                                        # the observation's ids
    assert a.tokens_left == 0
    [end] = env.finish_many([a], FinishReason.max_tokens)
    assert end.finish_reason is FinishReason.max_tokens and a.finish_reason == "max_tokens"
    assert end.reward is a.reward and a.reward.status.value == "unparsed"
    with pytest.raises(ValueError, match="must be >= 0"):
        b.add_inserted(-1)


def test_a_hanging_tool_is_a_timeout_observation_or_ends_the_episode(pipeline):
    call = Turn("<test_hang>x</test_hang>", 5)
    env = env_for(pipeline, tools=["test_hang"], tool_timeout_s=0.3)
    episode = env.start(TASK)
    result = env.step(episode, call)
    assert result.observation["content"] == "Error: the test_hang call timed out after 0.3 s"
    assert episode.tool_calls[0].status is ToolStatus.timeout and not episode.done
    ending = env_for(pipeline, tools=["test_hang"], tool_timeout_s=0.3, end_on_tool_timeout=True)
    episode = ending.start(TASK)
    result = ending.step(episode, call)
    assert result.finish_reason is FinishReason.tool_timeout and result.reward is not None


def test_raising_and_flooding_tools_give_bounded_observations(pipeline):
    env = env_for(pipeline, tools=["test_boom", "test_flood"], tool_output_bytes=256)
    a, b = env.start(TASK), env.start(TASK)
    ra, rb = env.step_many([a, b], [Turn("<test_boom>q</test_boom>", 5),
                                    Turn("<test_flood>ab</test_flood>", 5)])
    assert ra.observation["content"] == "Error: RuntimeError: cannot handle 'q'"
    flood = rb.observation["content"]
    assert flood == "ab" * 116 + "\n[... 1999768 bytes cut]" and len(flood.encode()) == 256
    assert b.tool_calls[0].cut_bytes == 1_999_768


def test_user_role_observations(pipeline):
    env = env_for(pipeline, observation_role="user")
    episode = env.start(TASK)
    assert env.step(episode, Turn(CALL, 1)).observation == {"role": "user", "content": "7006652"}


def test_the_python_tool_in_an_episode(pipeline):
    env = env_for(pipeline, tools=["python", "calculator"])
    episode = env.start(TASK)
    result = env.step(episode, Turn("<python>\nprint(1234 * 5678)\n</python>", 10))
    assert result.observation["content"] == "7006652"


def test_episodes_side_by_side(pipeline):
    rewards = CountingRewards(pipeline)
    env = env_for(rewards)
    episodes = [env.start(TASK) for _ in range(3)]
    results = env.step_many(episodes, [Turn(CALL, 10), Turn(ANSWER, 10), Turn("#### 5", 3)])
    assert [r.done for r in results] == [False, True, True] and rewards.batches == [2]
    assert [len(e.tool_calls) for e in episodes] == [1, 0, 0]
    assert [r.reward.status.value for r in results[1:]] == ["correct", "wrong"]
    env.step_many(episodes[:1], [Turn(ANSWER, 10)])
    assert rewards.batches == [2, 1] and episodes[0].reward.status.value == "correct"
    assert [e.turns for e in episodes] == [2, 1, 1]
    # each episode holds its own conversation
    assert [len(e.messages) for e in episodes] == [5, 3, 3]


def test_a_user_environment_from_a_plugin(pipeline):
    env = make_env(EnvConfig(name="test_guess", plugins=["rlvr_env_plugin"], max_turns=3),
                   pipeline)
    task = Task(id="g", prompt="Guess my number (1-10).", reference="7", task_type="math",
                source="test")
    episode = env.start(task)
    assert env.step(episode, Turn("#### 3", 2)).observation == {"role": "user",
                                                                 "content": "higher"}
    assert env.step(episode, Turn("#### 9", 2)).observation["content"] == "lower"
    last = env.step(episode, Turn("#### 7", 2))
    assert last.finish_reason is FinishReason.stop and last.reward.status.value == "correct"


def test_bad_engine_input_is_refused(pipeline):
    env = env_for(pipeline)
    episode = env.start(TASK)
    with pytest.raises(ValueError, match="1 episodes but 2 turns"):
        env.step_many([episode], [Turn("a"), Turn("b")])
    with pytest.raises(ValueError, match="'stop' or 'length'"):
        env.step(episode, Turn("a", 1, "eos"))
    assert isinstance(env, ToolEnv) and episode.turns == 0   # nothing was recorded

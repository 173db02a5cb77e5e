"""Episode metrics and trajectories (rlvr.envs.summary) on hand-built episodes: every finish
reason's share, tool errors and seconds, reward with and without tool use, and trajectory
segments with their token counts from the loss mask."""

import pytest

from rlvr.envs import Episode, FinishReason
from rlvr.envs.summary import episode_metrics, episode_record, trajectory
from rlvr.records import Task
from rlvr.rewards.types import RewardResult, Status
from rlvr.tools import ToolOutcome, ToolStatus

TASK = Task(id="t", prompt="q", reference="1", task_type="math", source="test")


TURN_TEXTS = ("first turn", "second turn", "third turn")


def _episode(reward, reason, calls=(), turns=1):
    messages = [{"role": "user", "content": "q"}]
    for k in range(turns):
        messages.append({"role": "assistant", "content": TURN_TEXTS[k]})
        if k < turns - 1:
            messages.append({"role": "tool", "content": f"obs {k}"})
    episode = Episode(TASK, messages, 1, 4, turns=turns)
    episode.tool_calls = [ToolOutcome("calculator", s, "x", seconds) for s, seconds in calls]
    episode.finish_reason = reason
    episode.reward = RewardResult(reward, {}, Status.correct if reward else Status.wrong)
    return episode


def test_episode_metrics_by_hand():
    episodes = [
        _episode(1.0, FinishReason.stop, [(ToolStatus.ok, 0.5), (ToolStatus.timeout, 2.0)], 3),
        _episode(0.0, FinishReason.max_turns, [(ToolStatus.invalid, 0.0)], 2),
        _episode(0.5, FinishReason.length),
        _episode(0.0, FinishReason.tool_timeout, [(ToolStatus.error, 1.5)], 2),
    ]
    m = episode_metrics(episodes)
    assert m["episode_turns_mean"] == (3 + 2 + 1 + 2) / 4
    assert m["episode_tool_calls_mean"] == 4 / 4
    assert m["tool_error_rate"] == 3 / 4  # timeout, invalid, error
    assert m["tool_seconds"] == 4.0
    assert m["finish_rate/stop"] == m["finish_rate/max_turns"] == 0.25
    assert m["finish_rate/length"] == m["finish_rate/tool_timeout"] == 0.25
    assert m["finish_rate/max_tokens"] == 0.0
    assert (m["episodes_tool_use"], m["episodes_no_tool_use"]) == (3.0, 1.0)
    assert m["reward_mean_tool_use"] == pytest.approx(1 / 3)
    assert m["reward_mean_no_tool_use"] == 0.5


def test_no_episode_without_tools_leaves_its_mean_out():
    m = episode_metrics([_episode(1.0, FinishReason.stop, [(ToolStatus.ok, 0.1)], 2)])
    assert "reward_mean_no_tool_use" not in m and m["episodes_no_tool_use"] == 0.0
    assert episode_metrics([]) == {}
    running = _episode(1.0, FinishReason.stop)
    running.finish_reason = None
    with pytest.raises(ValueError, match="not finished"):
        episode_metrics([running])


def test_trajectory_segments_and_token_counts():
    episode = _episode(1.0, FinishReason.stop, [(ToolStatus.ok, 0.1)], 2)
    mask = [True] * 4 + [False] * 6 + [True] * 3
    assert trajectory(episode, mask) == [
        {"role": "assistant", "text": "first turn", "trained": True, "tokens": 4},
        {"role": "tool", "text": "obs 0", "trained": False, "tokens": 6},
        {"role": "assistant", "text": "second turn", "trained": True, "tokens": 3}]
    # a mask that does not line up with the messages gives no counts rather than wrong ones
    assert all("tokens" not in s for s in trajectory(episode, [True] * 5))
    record = episode_record(episode, mask)
    assert (record["turns"], record["tool_calls"], record["tool_errors"],
            record["finish_reason"]) == (2, 1, 0, "stop")

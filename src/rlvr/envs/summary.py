"""What a run logs about finished episodes: the per-step episode metrics (turns, tool calls,
tool errors and time, finish reasons, reward with and without tool use) and an episode's
trajectory as segments that show which spans were trained (the sampled assistant turns) and
which were not (the inserted observations).

Pure functions of :class:`rlvr.envs.Episode` records (and, for token counts, the episode's
loss-mask row): the trainer's metrics.jsonl / samples.jsonl, validation and ``rlvr eval`` all
use them, so every place reports the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.envs.types import Episode, FinishReason


def uses_tools(episode: Episode) -> bool:
    """True when the episode made at least one tool call (any status: a malformed or refused
    call is still an attempt to use a tool)."""
    return bool(episode.tool_calls)


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Per-step metrics of finished episodes.

    Returns (all floats; an empty list gives ``{}``):
        ``episode_turns_mean``: assistant turns per episode (mean).
        ``episode_tool_calls_mean``: tool calls per episode (mean; every recorded call, run
            or refused).
        ``tool_error_rate``: share of the calls whose observation is an error: status
            ``error``, ``timeout`` or ``invalid`` (:class:`rlvr.tools.ToolStatus`); 0.0
            without calls.
        ``tool_seconds``: wall seconds of all calls together (each call's own time, so
            concurrent calls add up; a timed-out call counts its bound).
        ``finish_rate/<reason>``: share of episodes per :class:`FinishReason` (every reason,
            0.0 when none ended so; the shares sum to 1).
        ``episodes_tool_use`` / ``episodes_no_tool_use``: how many episodes made at least one
            call / none.
        ``reward_mean_tool_use`` / ``reward_mean_no_tool_use``: the mean reward (the reward
            pipeline's verdict, before any shaping) of each of those groups; absent when the
            group is empty.

    Raises:
        ValueError: an episode is not finished (no reward yet).
    """
    if not episodes:
        return {}
    for e in episodes:
        if e.reward is None or e.finish_reason is None:
            raise ValueError(f"episode of task {e.task.id!r} is not finished")
    n = len(episodes)
    calls = [c for e in episodes for c in e.tool_calls]
    metrics = {
        "episode_turns_mean": sum(e.turns for e in episodes) / n,
        "episode_tool_calls_mean": len(calls) / n,
        "tool_error_rate": sum(not c.ok for c in calls) / len(calls) if calls else 0.0,
        "tool_seconds": float(sum(c.seconds for c in calls)),
    }
    for reason in FinishReason:
        metrics[f"finish_rate/{reason.value}"] = sum(e.finish_reason == reason
                                                     for e in episodes) / n
    for label, group in (("tool_use", [e for e in episodes if uses_tools(e)]),
                         ("no_tool_use", [e for e in episodes if not uses_tools(e)])):
        metrics[f"episodes_{label}"] = float(len(group))
        if group:
            metrics[f"reward_mean_{label}"] = sum(e.reward.reward for e in group) / len(group)
    return metrics


def _runs(mask: Sequence[bool]) -> list[int]:
    """Lengths of the runs of equal values in ``mask``, in order."""
    runs: list[int] = []
    for t, value in enumerate(mask):
        if t and value == mask[t - 1]:
            runs[-1] += 1
        else:
            runs.append(1)
    return runs


def trajectory(episode: Episode, loss_mask: Sequence[bool] | None = None) -> list[dict]:
    """The episode after its prompt as segments, in order: each assistant turn
    ``{"role": "assistant", "text": ..., "trained": True}`` and each observation
    ``{"role": "tool" | "user", "text": ..., "trained": False}`` (environment tokens carry no
    gradient). An observation the episode's token budget left out (``dropped_observation``)
    is the last segment, with ``"inserted": False``.

    Args:
        episode: a finished (or running) episode.
        loss_mask: the episode's loss-mask row over its completion tokens, unpadded (True on
            sampled ids, :attr:`rlvr.rollout.RolloutOutput.loss_mask`); when given and its runs
            line up with the segments, each segment also gets ``"tokens"``: its token count
            (an observation's count includes the chat template's scaffolding around it).
    """
    segments = [{"role": m["role"], "text": m["content"], "trained": m["role"] == "assistant"}
                for m in episode.messages[episode.initial:]]
    if episode.dropped_observation and segments and not segments[-1]["trained"]:
        segments[-1]["inserted"] = False  # over the token budget: not in the episode's ids
    if loss_mask is not None:
        mask = [bool(x) for x in loss_mask]
        runs = _runs(mask)
        counted = [s for s in segments if s.get("inserted", True)]
        if len(runs) == len(counted) and all(
                bool(mask[sum(runs[:i])]) == s["trained"] for i, s in enumerate(counted)):
            for segment, count in zip(counted, runs):
                segment["tokens"] = count
    return segments


def episode_record(episode: Episode, loss_mask: Sequence[bool] | None = None) -> dict:
    """The fields a sample row gets for an episode: ``trajectory`` (:func:`trajectory`),
    ``turns``, ``tool_calls`` (count), ``tool_errors`` (calls with an error observation) and
    ``finish_reason``."""
    return {"trajectory": trajectory(episode, loss_mask), "turns": episode.turns,
            "tool_calls": len(episode.tool_calls),
            "tool_errors": sum(not c.ok for c in episode.tool_calls),
            "finish_reason": None if episode.finish_reason is None
            else episode.finish_reason.value}

"""``verifiers`` environments played as rlvr episodes (``env: {source: verifiers, module: ...}``):
the adapter registered as ``verifiers``.

A verifiers ``MultiTurnEnv`` (``SingleTurnEnv`` included: one turn) drives its rollout with
``env_response(messages, state)`` and stop conditions (``@vf.stop`` methods, checked by
``is_completed(state)``, ``max_turns`` among them). The adapter runs the same calls between
rlvr's sampled turns; each episode holds the environment's ``state`` (``episode.state["vf"]``,
built as ``init_state`` builds it, then ``setup_state``) and the verifiers messages of the
next turn's prompt (``episode.state["vf_prompt"]``)::

    assistant turn -> trajectory step added -> is_completed(state)?  yes: episode ends (stop)
                   -> no: env_response(prompt + turn, state) -> the observation message
                      (several messages of one role are joined by a blank line)
                   -> final_env_response set: episode ends (stop), that response is scored

The finished episode is scored by the reward pipeline (task type ``verifiers``,
:func:`rlvr.rewards.verifiers_env.verify_rubric`) with the whole conversation after the
prompt and the JSON-valued state the environment set (its own keys, e.g. a counter
``env_response`` keeps) in the reference's ``"episode"``: the rubric's ``score_rollout``
sees the completion and state a verifiers rollout would give it.

Tool environments (``ToolEnv``: tools as Python functions) get their calls as the structured
``tool_calls`` an OpenAI-compatible server parses out of a reply; rlvr's turns are text, so the
adapter parses them as a Hermes-style server does (:func:`parse_calls`: each well-formed
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block, ids ``call_<turn>_<i>``),
hands them to the environment in the assistant message, and describes the tools in a system
message (:func:`tools_system_prompt`; a server's chat template would render ``tool_defs``).
The environment's ``env_response`` runs them; its tool messages become one observation.

Not supported (refused with the reason, :func:`rlvr.rewards.verifiers_env.check_episodic`):
environments with their own ``rollout``, group reward functions. ``state["client"]`` is ``None`` and
``state["sampling_args"]`` is ``None``: an ``env_response`` that calls a model itself fails
with a message saying so. Observations must be text; ``timeout_seconds`` is not enforced.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from rlvr.envs.base import Environment
from rlvr.envs.config import EnvConfig
from rlvr.envs.registry import register_env
from rlvr.envs.types import Episode, FinishReason, Message
from rlvr.records import Task
from rlvr.rewards.verifiers_env import (
    VerifiersEnvError,
    import_verifiers,
    load,
    row_state,
    run_sync,
)

CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

# State keys verifiers itself sets (init_state, the rollout loop): not carried to scoring.
_OWN_KEYS = frozenset({
    "input", "task", "prompt", "completion", "trajectory", "client", "model",
    "sampling_args", "is_completed", "is_truncated", "stop_condition", "tool_defs", "reward",
    "advantage", "metrics", "timing", "error", "usage", "usage_tracker", "trajectory_id",
    "final_env_response", "responses", "prompt_too_long", "timed_out"})


def initial_state(env: Any, row: dict) -> Any:
    """A verifiers ``State`` for dataset ``row`` as ``Environment.init_state`` builds it,
    without a model client (``client`` / ``sampling_args`` ``None``, ``model`` ``"rlvr"``),
    then the environment's ``setup_state``.

    Raises:
        VerifiersEnvError: ``setup_state`` raised (the message names it).
    """
    vf = import_verifiers()
    from verifiers.types import RolloutTiming

    state = row_state(vf, row)
    state.update(client=None, model="rlvr", sampling_args=None, is_completed=False,
                 is_truncated=False, trajectory=[], completion=None,
                 trajectory_id=uuid.uuid4().hex, reward=None, metrics=None, error=None,
                 final_env_response=None, timing=RolloutTiming())
    state["tool_defs"] = env._normalize_tool_defs(env.tool_defs or []) or []
    env._get_usage_tracker(state, create_if_missing=True)
    try:
        return run_sync(env.setup_state(state)) or state
    except Exception as exc:
        raise VerifiersEnvError(f"verifiers setup_state raised {type(exc).__name__}: {exc}") \
            from exc


def parse_calls(text: str, turn: int) -> list[dict]:
    """The tool calls of an assistant turn as a Hermes-style server parses them: each
    ``<tool_call>`` block holding a JSON object with a string ``name`` (``arguments``, or
    ``parameters``, a JSON object or its string) becomes ``{"id": "call_<turn>_<i>", "name":
    ..., "arguments": "<JSON string>"}`` (verifiers' ``ToolCall``); other blocks stay text."""
    calls = []
    for body in CALL.findall(text):
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            continue
        arguments = data.get("arguments", data.get("parameters", {}))
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append({"id": f"call_{turn}_{len(calls)}", "name": data["name"],
                      "arguments": arguments})
    return calls


def tools_system_prompt(tool_defs: list) -> str:
    """The system message describing a ToolEnv's tools (name, description, JSON parameters)
    and the call format :func:`parse_calls` reads."""
    lines = [f"- {t.name}: {t.description} Parameters (JSON schema): "
             f"{json.dumps(t.parameters, sort_keys=True)}" for t in tool_defs]
    return ("You may call these tools, one block per call: <tool_call>{\"name\": ..., "
            "\"arguments\": {...}}</tool_call>. A reply without a call is your final answer.\n"
            + "\n".join(lines))


def scored_state(state: Any) -> dict:
    """The environment's own JSON-valued state keys (not verifiers' bookkeeping): what the
    rubric may read besides the conversation."""
    out = {}
    for key, value in dict(state).items():
        if key in _OWN_KEYS:
            continue
        try:
            out[key] = json.loads(json.dumps(value))
        except (TypeError, ValueError):
            continue  # not JSON: stays with the episode, the rubric cannot see it
    return out


@register_env
class VerifiersEnv(Environment):
    """Episodes of the verifiers environment ``config.module`` (module docs).

    Raises (at construction):
        ValueError: the config is not ``source: verifiers`` with a module.
        VerifiersEnvError: the environment cannot be played (ToolEnv, group rewards, ...).
    """

    name = "verifiers"

    def __init__(self, config: EnvConfig | None, rewards: Any):
        if config is None or config.source != "verifiers" or not config.module:
            raise ValueError("the verifiers environment needs env.source: verifiers and "
                             "env.module")
        super().__init__(config, rewards)
        self.vf_env = load(config.module, config.kwargs, episodic=True)
        self.has_tools = isinstance(self.vf_env, import_verifiers().ToolEnv)

    @property
    def max_turns(self) -> int:
        """``env.max_turns``, lowered to the verifiers environment's own ``max_turns``."""
        own = self.vf_env.max_turns
        return min(self.config.max_turns, own) if own and own > 0 else self.config.max_turns

    def start(self, task: Task, messages: Sequence[Message] | None = None) -> Episode:
        """A new episode of ``task`` (a row of this environment's dataset) with its fresh
        verifiers state.

        Raises:
            ValueError: the task is not a row of ``env.module``.
        """
        reference = task.reference if isinstance(task.reference, dict) else {}
        if reference.get("env") != self.config.module or "row" not in reference:
            raise ValueError(f"task {task.id!r} is not a row of the verifiers environment "
                             f"{self.config.module!r} (its tasks come from env.source)")
        episode = super().start(task, messages)
        state = initial_state(self.vf_env, reference["row"])
        episode.state.update(vf=state, vf_prompt=list(state["prompt"]), vf_completion=[])
        return episode

    def initial_messages(self, task: Task, messages: list[Message]) -> list[Message]:
        """A ToolEnv's tools described in a system message first; others unchanged."""
        if not self.has_tools or not self.vf_env.tool_defs:
            return messages
        return [{"role": "system", "content": tools_system_prompt(self.vf_env.tool_defs)},
                *messages]

    def _assistant(self, text: str, turn: int) -> Any:
        from verifiers.utils.message_utils import normalize_messages

        message = {"role": "assistant", "content": text}
        calls = parse_calls(text, turn) if self.has_tools else []
        if calls:
            message["tool_calls"] = calls
        return normalize_messages([message], field_name="completion")[0]

    def parse_action(self, episode: Episode, text: str) -> Any | None:
        """Add the turn to the verifiers trajectory; ``None`` (end) when a stop condition of
        the environment fires (its name kept in ``episode.state["stop_condition"]``)."""
        state = episode.state["vf"]
        completion = [self._assistant(text, episode.turns)]
        episode.state["vf_completion"] += completion
        step = {"prompt": episode.state["vf_prompt"], "completion": completion,
                "response": None, "tokens": None, "reward": None, "advantage": None,
                "is_truncated": False, "trajectory_id": state["trajectory_id"], "extras": {}}

        async def advance() -> bool:  # one event loop for both calls
            await self.vf_env.add_trajectory_step(state, step)
            return await self.vf_env.is_completed(state)

        if run_sync(advance()):
            episode.state["stop_condition"] = state.get("stop_condition")
            return None
        return completion

    def respond(self, episodes: list[Episode], actions: list[Any]) -> list[Message | FinishReason]:
        """``env_response`` of every acting episode (run together in one event loop); each
        reply becomes one observation message, or ends the episode (``stop``) when the
        environment set ``final_env_response`` or raised a ``vf.Error``.

        Raises:
            VerifiersEnvError: ``env_response`` raised anything else (e.g. it needs a model
                client), or replied with no message, mixed roles or non-text content.
        """
        async def all_replies():
            return await asyncio.gather(*(self._reply(e, a) for e, a in zip(episodes, actions)))

        return list(run_sync(all_replies()))

    async def _reply(self, episode: Episode, completion: list) -> Message | FinishReason:
        vf = import_verifiers()
        from verifiers.utils.message_utils import maybe_normalize_messages

        state = episode.state["vf"]
        messages = list(episode.state["vf_prompt"]) + list(completion)
        try:
            reply = await self.vf_env.env_response(messages, state)
        except vf.Error as exc:  # verifiers' own rollout records it and stops
            state["error"] = exc
            episode.state["stop_condition"] = "has_error"
            return FinishReason.stop
        except Exception as exc:
            raise VerifiersEnvError(
                f"verifiers environment {self.config.module!r}: env_response raised "
                f"{type(exc).__name__}: {exc} (rlvr gives it no model client: state['client'] "
                f"is None)") from exc
        if state.get("final_env_response") is not None:
            episode.state["stop_condition"] = "has_final_env_response"
            return FinishReason.stop
        reply = maybe_normalize_messages(reply, field_name="env_response")
        episode.state["vf_prompt"] = messages + list(reply)
        episode.state["vf_completion"] += list(reply)
        return self._observation(reply)

    def _observation(self, reply: list) -> Message:
        # tool messages take env.observation_role (as rlvr's tool environment does)
        roles = {m.role for m in reply}
        if not reply or len(roles) != 1 or not all(isinstance(m.content, str) for m in reply):
            raise VerifiersEnvError(
                f"verifiers environment {self.config.module!r}: env_response gave "
                f"{len(reply)} messages (roles {sorted(roles)}); rlvr inserts one text "
                f"observation per turn: at least one message, one role, text content")
        role = roles.pop()
        role = self.config.observation_role if role == "tool" else role
        return {"role": role, "content": "\n\n".join(m.content for m in reply)}

    def score_reference(self, episode: Episode) -> Any:
        """The task's reference plus the episode (``"completion"``: the verifiers messages
        after the prompt, tool calls and the final env response included, and a last turn
        the engine cut; ``"state"``: :func:`scored_state`)."""
        messages = list(episode.state["vf_completion"])
        if episode.turns > sum(m.role == "assistant" for m in messages):  # a cut last turn
            messages.append(self._assistant(episode.assistant_texts[-1], episode.turns))
        final = episode.state["vf"].get("final_env_response")
        if final:
            from verifiers.utils.message_utils import maybe_normalize_messages
            messages += maybe_normalize_messages(final, field_name="final_env_response")
        completion = [m.model_dump(exclude_none=True) for m in messages]
        return {**episode.task.reference,
                "episode": {"completion": completion,
                            "state": scored_state(episode.state["vf"])}}

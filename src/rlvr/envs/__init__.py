"""Environments: multi-turn episodes over tasks.

An environment starts an episode from a task (its messages in OpenAI chat format) and answers
each sampled assistant turn with an observation message or "done" plus the reward pipeline's
verdict. Per-episode state lives in the :class:`Episode`, so the G episodes of a task run side
by side. This package holds the protocol, the environments and the token insertion; training
on multi-turn episodes (the rollout engines, the loss masks) is the next increment.

Public API:

- :class:`Environment` (:mod:`rlvr.envs.base`): ``start``, ``step`` / ``step_many``,
  ``finish_many``; the hooks ``initial_messages``, ``parse_action``, ``respond``,
  ``scored_text``.
- :class:`Episode`, :class:`Turn`, :class:`StepResult`, :class:`FinishReason`
  (:mod:`rlvr.envs.types`).
- :class:`EnvConfig` (:mod:`rlvr.envs.config`): limits and tools.
- :func:`register_env`, :func:`env_class`, :func:`env_names`, :func:`make_env`,
  :func:`unregister_env` (:mod:`rlvr.envs.registry`); built-ins ``single_turn``
  (:mod:`rlvr.envs.single_turn`), ``tool`` (:mod:`rlvr.envs.tool_env`) and ``verifiers``
  (:mod:`rlvr.envs.verifiers_adapter`), registered when this package imports them.
- :func:`parse_tool_calls`, :class:`ToolCall` (:mod:`rlvr.envs.tool_calls`: the call format).
- :func:`observation_ids`, :func:`observation_text`, :class:`ChatTemplateError`
  (:mod:`rlvr.envs.tokens`).
"""

from rlvr.envs import verifiers_adapter  # noqa: F401  (registers the verifiers environment)
from rlvr.envs.base import Environment
from rlvr.envs.config import EnvConfig, describe_names
from rlvr.envs.registry import env_class, env_names, make_env, register_env, unregister_env
from rlvr.envs.single_turn import SingleTurnEnv
from rlvr.envs.tokens import ChatTemplateError, observation_ids, observation_text
from rlvr.envs.tool_calls import ToolCall, parse_tool_calls
from rlvr.envs.tool_env import ToolEnv, tool_lines, tools_prompt
from rlvr.envs.types import Episode, FinishReason, Message, StepResult, Turn

describe_names()  # the built-ins above are registered: EnvConfig.name lists them

__all__ = [
    "ChatTemplateError",
    "EnvConfig",
    "Environment",
    "Episode",
    "FinishReason",
    "Message",
    "SingleTurnEnv",
    "StepResult",
    "ToolCall",
    "ToolEnv",
    "Turn",
    "env_class",
    "env_names",
    "make_env",
    "observation_ids",
    "observation_text",
    "parse_tool_calls",
    "register_env",
    "tool_lines",
    "tools_prompt",
    "unregister_env",
]

"""Configuration of an environment. The field docs are the user documentation.

A run config's ``env`` section (:class:`rlvr.train.config.RunConfig`, like ``reward:``,
:class:`rlvr.rewards.config.RewardConfig`): with it, ``rlvr train`` and ``rlvr eval --config``
play episodes of this environment.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from rlvr.configio import ConfigModel
from rlvr.envs.registry import ENVIRONMENTS
from rlvr.limits import MAX_BYTES, MAX_REPEATS, MAX_TIMEOUT_S, MAX_TOKENS, MAX_WORKERS
from rlvr.registry import load_plugins
from rlvr.rewards.verifiers_env import load
from rlvr.tools.registry import TOOLS
from rlvr.tools.types import DEFAULT_OUTPUT_BYTES, DEFAULT_TIMEOUT_S

#: The description of ``EnvConfig.name``; ``{one_of}`` is the registered names. The built-in
#: environments subclass :class:`rlvr.envs.Environment`, which uses this config, so they
#: register after the class is built: :mod:`rlvr.envs` fills the names in once they have
#: (:func:`describe_names`).
NAME_DESCRIPTION = (
    "Registered environment (`rlvr.envs.register_env`), {one_of}: `single_turn` (one "
    "assistant turn, scored: exactly today's single-turn rewards), `tool` (the assistant may "
    "call `tools`; a turn without a call ends the episode and is scored), `verifiers` (the "
    "adapter of `source: verifiers`, which sets it), or one a plugin registers.")


class EnvConfig(ConfigModel):
    """How episodes are played: which environment, its limits and its tools.

    Example (YAML, the ``env:`` section of a run config)::

        name: tool
        tools: [calculator, python]
        max_turns: 4
        max_episode_tokens: 512
        tool_timeout_s: 10
        tool_output_bytes: 1024

    or a ``verifiers`` environment module (its dataset, turns and rubric)::

        source: verifiers
        module: my_env
        kwargs: {num_examples: 500}
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    source: Literal["rlvr", "verifiers"] = Field(
        "rlvr",
        description="Where the environment comes from. `rlvr` (default): the registered "
        "environment `name`. `verifiers`: the `verifiers` environment module `module` "
        "(`load_environment(**kwargs)`, extra `verifiers`): its dataset is the run's tasks "
        "(`data.source` / `data.mixture` follow from it and may be left out), its turns run "
        "through the `verifiers` adapter (SingleTurnEnv, MultiTurnEnv: `env_response` gives "
        "each observation, its stop conditions and `max_turns` end the episode, "
        "`env.max_turns` caps it too; ToolEnv: its tools are described in a system message and "
        "each `<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>` block is a call "
        "its env_response runs) and its rubric scores the whole conversation (components "
        "`rubric/<function>`). Refused with the reason: environments with their own `rollout`, "
        "group reward functions, an env_response that calls a model client.")
    module: str | None = Field(
        None,
        description="`source: verifiers`: the environment module (importable, or an installed "
        "verifiers environment), e.g. `my_env`.")
    kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="`source: verifiers`: keyword arguments of the module's "
        "`load_environment` (JSON values).")
    name: str = Field(
        "single_turn",
        description=NAME_DESCRIPTION.format(one_of="one of the registered environments"))
    max_turns: int = Field(
        4, ge=1, le=MAX_REPEATS,
        description="Most assistant turns per episode. The turn that would exceed it by asking "
        "for a tool ends the episode (`max_turns`, scored) without running the call. "
        "`single_turn` always plays one turn.")
    max_episode_tokens: int | None = Field(
        None, ge=1, le=MAX_TOKENS,
        description="Token budget of an episode after its prompt: sampled turns plus inserted "
        "observations (their chat-template ids). The engine counts the tokens and caps each turn "
        "at what is left; an episode that reaches the budget ends (`max_tokens`, scored). null: "
        "no budget (each turn is still capped by the engine's `max_new_tokens`).")
    tools: list[str] = Field(
        default_factory=lambda: ["calculator", "python"],
        description=f"Tools the `tool` environment offers (`rlvr.tools.register_tool`), each "
        f"{TOOLS.one_of()} (`calculator`: exact arithmetic, `python`: the code runs in the "
        "sandbox). The model calls one as `<name>input</name>` or `<tool_call>{\"name\": ..., "
        "\"arguments\": {...}}</tool_call>`.")
    tool_timeout_s: float = Field(
        DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S,
        description="Time bound of one tool call in seconds, from its start (a tool's own "
        "smaller bound wins: `calculator` 2 s). A call past it gets the observation `Error: the "
        "<tool> call timed out after N s` (python: its sandbox's CPU budget and wall backstop are "
        "this bound too); see `end_on_tool_timeout`.")
    tool_output_bytes: int = Field(
        DEFAULT_OUTPUT_BYTES, ge=256, le=MAX_BYTES,
        description="Size bound of one tool call's observation in bytes of UTF-8, cut marker "
        "(`[... N bytes cut]`) included. The python tool keeps the head of the output and the "
        "tail of the traceback (half the bound each when both are long).")
    max_calls_per_turn: int = Field(
        4, ge=1, le=MAX_REPEATS,
        description="Tool calls run per assistant turn; later calls in the turn get the "
        "observation `Error: ... at most N tool calls per turn` and are not run.")
    end_on_tool_timeout: bool = Field(
        False,
        description="true: a tool call that times out ends the episode (`tool_timeout`, scored "
        "on the turn that made the call). false (default): the timeout is an observation and the "
        "model may go on.")
    observation_role: Literal["tool", "user"] = Field(
        "tool",
        description="Chat role of the observation message: `tool` (OpenAI's, rendered by "
        "ChatML-style templates as is) or `user` (for templates that refuse a `tool` role).")
    system_prompt: str | None = Field(
        None,
        description="The `tool` environment's system message: null (default) describes the "
        "tools and the call format; a string replaces it (`{tools}` in it becomes the tool "
        "list); empty: no system message.")
    tool_workers: int | None = Field(
        None, ge=1, le=MAX_WORKERS,
        description="Tool calls running at once (across the episodes of a step); null: the "
        "usable CPU cores. A call's time bound starts when it starts running.")
    plugins: list[str] = Field(
        default_factory=list,
        description="Python modules to import first, so that the environments and tools they "
        "register (`@register_env`, `@register_tool`) can be named here.")

    @model_validator(mode="before")
    @classmethod
    def _verifiers_name(cls, data):
        # source: verifiers plays through the registered adapter; name may be left out.
        if isinstance(data, dict) and data.get("source") == "verifiers":
            data = dict(data)
            name = data.setdefault("name", "verifiers")
            if name != "verifiers":
                raise ValueError(f"name: source verifiers plays through the `verifiers` "
                                 f"adapter; leave name out (got {name!r})")
        return data

    @model_validator(mode="after")
    def _verifiers_module(self) -> EnvConfig:
        if self.source != "verifiers":
            if self.module is not None or self.kwargs:
                raise ValueError("module / kwargs: only with source: verifiers")
            if self.name == "verifiers":
                raise ValueError("name: `verifiers` needs source: verifiers and module")
            return self
        if not self.module:
            raise ValueError("module: source verifiers needs the environment module "
                             "(e.g. module: my_env)")
        try:
            json.dumps(self.kwargs)
        except (TypeError, ValueError):
            raise ValueError("kwargs: load_environment arguments must be JSON values") from None
        try:
            load(self.module, self.kwargs, episodic=True)
        except (ImportError, RuntimeError) as exc:
            raise ValueError(f"module: {exc}") from None
        return self

    @model_validator(mode="after")
    def _names_exist(self) -> EnvConfig:
        try:
            load_plugins(self.plugins)
        except ImportError as exc:
            raise ValueError(f"plugins: cannot import {exc.name or exc}") from None
        ENVIRONMENTS.check(self.name, "name")
        seen = set()
        for tool in self.tools:
            TOOLS.check(tool, "tools")
            if tool in seen:
                raise ValueError(f"tools: {tool!r} is listed twice")
            seen.add(tool)
        return self


def describe_names() -> None:
    """Write the registered environments' names into the description of ``EnvConfig.name``
    (:data:`NAME_DESCRIPTION`); :mod:`rlvr.envs` calls it after importing the built-ins."""
    EnvConfig.model_fields["name"].description = NAME_DESCRIPTION.format(
        one_of=ENVIRONMENTS.one_of())
    EnvConfig.model_rebuild(force=True)

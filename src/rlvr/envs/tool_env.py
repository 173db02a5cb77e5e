"""The ``tool`` environment: the assistant may call tools; a turn without a call is its answer.

- Prompt: a system message describing the tools and the call format (:func:`tools_prompt`;
  ``env.system_prompt`` replaces it), then the caller's messages.
- A turn with calls (:func:`rlvr.envs.parse_tool_calls`: ``<calculator>...</calculator>`` or
  ``<tool_call>{json}</tool_call>``): up to ``env.max_calls_per_turn`` of them run
  (:func:`rlvr.tools.run_calls`: concurrently across the step's episodes, each bounded in time
  and output) and their results come back as one observation message of role
  ``env.observation_role``. A malformed call, an unknown tool, bad arguments, a tool that
  raises, hangs or floods its output: each is an error observation, never an exception.
- A turn without a call ends the episode (``stop``) and is scored as the final answer. The
  limits of :class:`rlvr.envs.FinishReason` apply; with ``env.end_on_tool_timeout`` a timed-out
  call ends the episode (``tool_timeout``).
"""

from __future__ import annotations

from collections.abc import Iterable

from rlvr.envs.base import Environment
from rlvr.envs.config import EnvConfig
from rlvr.envs.registry import register_env
from rlvr.envs.tool_calls import JSON_TAG, ToolCall, parse_tool_calls
from rlvr.envs.types import Episode, FinishReason, Message
from rlvr.records import Task
from rlvr.tools.registry import Tool, get_tool
from rlvr.tools.runner import check_arguments, invalid, run_calls
from rlvr.tools.types import ToolLimits, ToolOutcome, ToolStatus


def tools_prompt(tools: Iterable[Tool]) -> str:
    """The default system message of the ``tool`` environment: how to call, then one line per
    tool (its call form and description). Empty for no tools."""
    tools = list(tools)
    if not tools:
        return ""
    return ("You can use tools. To call one, write its tag around the input and end your "
            "turn; the result comes back in the next message. A turn without a tool call is "
            "your final answer.\nTools:\n" + tool_lines(tools))


def tool_lines(tools: Iterable[Tool]) -> str:
    """One ``- <call form>: description`` line per tool (what ``{tools}`` in a custom system
    prompt becomes)."""
    lines = []
    for tool in tools:
        form = (f"<{tool.name}>{tool.argument}</{tool.name}>" if tool.argument is not None else
                f'<{JSON_TAG}>{{"name": "{tool.name}", "arguments": {{...}}}}</{JSON_TAG}>')
        lines.append(f"- {form}: {tool.description}")
    return "\n".join(lines)


@register_env
class ToolEnv(Environment):
    """Episodes where the assistant calls ``config.tools`` until it answers.

    Raises:
        KeyError: (at construction) a tool of ``config.tools`` is not registered.
    """

    name = "tool"

    def __init__(self, config: EnvConfig | None, rewards):
        super().__init__(config, rewards)
        self.tools = {name: get_tool(name) for name in self.config.tools}
        self.limits = ToolLimits(self.config.tool_timeout_s, self.config.tool_output_bytes)

    def system_prompt(self) -> str:
        """The system message text (``""``: none): ``config.system_prompt`` with ``{tools}``
        replaced by :func:`tool_lines`, or :func:`tools_prompt` when it is unset."""
        custom = self.config.system_prompt
        if custom is None:
            return tools_prompt(self.tools.values())
        return custom.replace("{tools}", tool_lines(self.tools.values()))

    def initial_messages(self, task: Task, messages: list[Message]) -> list[Message]:
        """The system prompt first (merged before the caller's own system message, if any)."""
        prompt = self.system_prompt()
        if not prompt:
            return messages
        if messages and messages[0].get("role") == "system":
            return [{"role": "system", "content": f"{prompt}\n\n{messages[0]['content']}"},
                    *messages[1:]]
        return [{"role": "system", "content": prompt}, *messages]

    def parse_action(self, episode: Episode, text: str) -> list[ToolCall] | None:
        """The turn's tool calls, or None (no call: the final answer)."""
        calls = parse_tool_calls(text, {n: t.argument for n, t in self.tools.items()})
        return calls or None

    def respond(self, episodes: list[Episode], actions: list[list[ToolCall]]
                ) -> list[Message | FinishReason]:
        """Run every episode's calls (all episodes' runnable calls at once), record the
        outcomes in ``episode.tool_calls`` and answer each with one observation message."""
        outcomes: list[list[ToolOutcome | None]] = []
        runnable: list[tuple[int, int, Tool, dict]] = []
        for e, calls in enumerate(actions):
            row: list[ToolOutcome | None] = []
            for k, call in enumerate(calls):
                row.append(self._refusal(call, k))
                if row[-1] is None:
                    runnable.append((e, k, self.tools[call.name], call.arguments))
            outcomes.append(row)
        ran = run_calls([(tool, args) for _, _, tool, args in runnable], self.limits,
                        self.config.tool_workers)
        for (e, k, _, _), outcome in zip(runnable, ran):
            outcomes[e][k] = outcome
        replies: list[Message | FinishReason] = []
        for episode, row in zip(episodes, outcomes):
            done = [o for o in row if o is not None]
            episode.tool_calls.extend(done)
            if self.config.end_on_tool_timeout and any(o.status is ToolStatus.timeout
                                                       for o in done):
                replies.append(FinishReason.tool_timeout)
            else:
                replies.append({"role": self.config.observation_role,
                                "content": self.format_observation(done)})
        return replies

    def format_observation(self, outcomes: list[ToolOutcome]) -> str:
        """The observation text of one turn's calls: the one call's text, or for several
        ``[1] name:`` / ``[2] name:`` headed blocks in call order."""
        if len(outcomes) == 1:
            return outcomes[0].text
        return "\n\n".join(f"[{k}] {o.name}:\n{o.text}" for k, o in enumerate(outcomes, 1))

    def _refusal(self, call: ToolCall, index: int) -> ToolOutcome | None:
        """The outcome of a call that is not run (malformed, over the per-turn count, bad
        arguments), or None for a call to run."""
        name = call.name or JSON_TAG
        if call.error is not None:
            return invalid(name, call.error, self.limits)
        if index >= self.config.max_calls_per_turn:
            return invalid(name, f"not run: at most {self.config.max_calls_per_turn} tool calls "
                                 "per turn", self.limits)
        problem = check_arguments(self.tools[call.name], call.arguments)
        return None if problem is None else invalid(name, problem, self.limits)

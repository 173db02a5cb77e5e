"""Finding tool calls in an assistant turn: a small pure parser.

The format, and why:

- **Tag form** ``<calculator>1234 * 5678</calculator>``, ``<python>print(2 ** 100)</python>``:
  the tool's name as an XML-like tag around its one text argument (the tool's
  :attr:`~rlvr.tools.Tool.argument`). Nothing to escape (code goes in as written, newlines and
  quotes included), few tokens, one rule per tool: what a 135M-parameter model learns from a
  few hundred demonstrations. A fenced block inside ``<python>`` is unwrapped by the tool.
- **JSON form** ``<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}
  </tool_call>``: the Hermes / Qwen convention that many chat templates and instruct models
  already know, for any tool (several arguments too; ``"parameters"`` is read as
  ``"arguments"``, and arguments given as a JSON string are decoded).

Neither collides with answers: math answers are ``#### 42``, ``\\boxed{}``, ``<answer>`` or
prose, and tool names exclude ``answer`` / ``think`` / ``tool_call`` / ``tool_response``
(:data:`rlvr.tools.RESERVED_NAMES`). Only the tags of the environment's own tools are calls,
so ``<b>`` or an unknown ``<foo>`` in prose is text. A fenced ```` ```python ```` block is
*not* a call: it is a code task's answer format, and a turn that shows code is not asking to
run it.

A malformed call (an unclosed tag, an empty body, bad JSON, an unknown tool, a tool that only
takes JSON) becomes a :class:`ToolCall` with ``error`` set, which the environment answers with
an error observation; the parser never raises on any text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

JSON_TAG = "tool_call"


@dataclass(frozen=True)
class ToolCall:
    """One call found in a turn.

    Attributes:
        name: the tool named (``""`` when malformed JSON names none).
        arguments: keyword arguments for the tool (empty for a malformed call).
        form: ``"tag"`` or ``"json"``.
        start, end: the call's character span in the turn, tags included.
        error: why the call cannot be made, for the model to read; ``None`` for a call to run.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    form: str = "tag"
    start: int = 0
    end: int = 0
    error: str | None = None


def _opening(names: list[str]) -> re.Pattern:
    alternatives = "|".join(re.escape(n) for n in sorted({JSON_TAG, *names}, key=len, reverse=True))
    return re.compile(rf"<({alternatives})>")


def parse_tool_calls(text: str, tools: Mapping[str, str | None]) -> list[ToolCall]:
    """The tool calls in ``text``, in order (see the module doc for the format).

    Args:
        text: one assistant turn.
        tools: the environment's tools: name -> the parameter the tag form fills (``None``: the
            tool takes only the JSON form).

    Returns:
        One :class:`ToolCall` per call, malformed ones with ``error`` set; after an unclosed
        tag nothing more is read (the rest of the turn is inside it). Empty: no call (the turn
        is a final answer).
    """
    calls: list[ToolCall] = []
    opening = _opening(list(tools))
    pos = 0
    while True:
        m = opening.search(text, pos)
        if m is None:
            return calls
        name = m.group(1)
        close = f"</{name}>"
        end = text.find(close, m.end())
        if end < 0:
            calls.append(ToolCall(name, form="json" if name == JSON_TAG else "tag",
                                  start=m.start(), end=len(text),
                                  error=f"unclosed <{name}>: end the call with {close}"))
            return calls
        body, span = text[m.end():end], (m.start(), end + len(close))
        call = _json_call(body, tools) if name == JSON_TAG else _tag_call(name, body, tools)
        calls.append(ToolCall(call.name, call.arguments, call.form, *span, error=call.error))
        pos = span[1]


def _tag_call(name: str, body: str, tools: Mapping[str, str | None]) -> ToolCall:
    argument = tools[name]
    if argument is None:
        return ToolCall(name, error=f"{name} takes JSON arguments: <tool_call>{{\"name\": "
                                    f"\"{name}\", \"arguments\": {{...}}}}</tool_call>")
    value = body.strip("\n")
    if not value.strip():
        return ToolCall(name, error=f"empty <{name}> call: put the input between the tags")
    return ToolCall(name, {argument: value})


def _json_call(body: str, tools: Mapping[str, str | None]) -> ToolCall:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return ToolCall("", form="json", error=f"malformed JSON in <tool_call>: {exc}"[:300])
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCall("", form="json", error='<tool_call> needs a JSON object {"name": ..., '
                                              '"arguments": {...}}')
    name = data["name"]
    if name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        return ToolCall(name, form="json", error=f"unknown tool {name!r}; available: {known}")
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            pass  # reported below as a non-object
    if not isinstance(arguments, dict):
        return ToolCall(name, form="json", error=f"{name}: arguments must be a JSON object, "
                                                 f"got {type(arguments).__name__}")
    return ToolCall(name, arguments, form="json")

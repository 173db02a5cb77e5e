"""Tools by name: what the ``tools`` list of an environment config (:class:`rlvr.envs.EnvConfig`)
accepts.

A tool is a function from its arguments to text, registered with one decorator::

    from rlvr.tools import register_tool

    @register_tool("word_count", description="counts the words of a text", timeout_s=2.0)
    def word_count(text: str) -> str:
        return str(len(text.split()))

The model calls it as ``<word_count>some text</word_count>`` (a tool whose one required
parameter takes the tag's text) or ``<tool_call>{"name": "word_count", "arguments": {"text":
"some text"}}</tool_call>`` (see :mod:`rlvr.envs.tool_calls`). The table is :data:`TOOLS` (a
:class:`rlvr.registry.Registry` of :class:`Tool` records). The built-ins (``calculator``,
``python``) register when the package :mod:`rlvr.tools` imports their modules (so any import of
a ``rlvr.tools`` module registers them); user tools register when their module is imported
(``env.plugins``).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.registry import Registry

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
#: Tags of the answer formats and of the JSON call form: never a tool's name.
RESERVED_NAMES = frozenset({"answer", "think", "tool_call", "tool_response"})


@dataclass(frozen=True)
class Tool:
    """One registered tool.

    Attributes:
        name: the name calls use; lower-case letters, digits and ``_``, starting with a letter,
            at most 32 characters, not one of :data:`RESERVED_NAMES`.
        fn: ``fn(**arguments) -> str``; the text is the observation. It may raise: a
            :class:`~rlvr.tools.ToolError`'s message is shown as is, any other exception as
            ``Error: <type>: <message>``.
        description: one line for the model (the tool environment's system prompt lists it).
        argument: the parameter the tag form (``<name>text</name>``) fills; ``None``: the tool
            takes only the JSON call form.
        timeout_s: the tool's own time bound in seconds; ``None``: the environment's
            ``tool_timeout_s``. A call gets the smaller of the two.
    """

    name: str
    fn: Callable[..., str]
    description: str
    argument: str | None = None
    timeout_s: float | None = None

    def bound_s(self, default_s: float) -> float:
        """The time bound of one call in seconds: the smaller of ``timeout_s`` and
        ``default_s`` (the environment's)."""
        return default_s if self.timeout_s is None else min(self.timeout_s, default_s)


#: Tools by name (``env.tools``); each entry's object is its :class:`Tool` record.
TOOLS: Registry[Tool, Any] = Registry("tool", field="env.tools", identity=lambda tool: tool.fn)
_AUTO = object()


def _single_required(fn: Callable) -> str | None:
    """The name of ``fn``'s only required parameter, or None (none, or several)."""
    required = [p.name for p in inspect.signature(fn).parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return required[0] if len(required) == 1 else None


def register_tool(name: str, *, description: str, argument: str | None | object = _AUTO,
                  timeout_s: float | None = None) -> Callable:
    """Register the decorated function as the tool ``name`` (see :class:`Tool`).

    Args:
        name: the tool's name (see :class:`Tool` for the allowed form).
        description: one line for the model.
        argument: the parameter the tag form fills; by default the function's only required
            parameter (``None`` when it has none or several: JSON calls only).
        timeout_s: the tool's own time bound in seconds (> 0), or None.

    Raises:
        ValueError: a malformed or reserved name, another function already registered under
            it, an empty description, an ``argument`` the function does not take, or a
            ``timeout_s`` that is not a positive number.
    """
    if not isinstance(name, str) or not _NAME.match(name) or name in RESERVED_NAMES:
        raise ValueError(f"tool name {name!r}: expected lower-case letters, digits and _ "
                         f"(a letter first, at most 32), not one of {sorted(RESERVED_NAMES)}")
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"tool {name!r}: description must be a non-empty string")
    if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0
                                      and math.isfinite(timeout_s)):
        raise ValueError(f"tool {name!r}: timeout_s must be a positive number, got {timeout_s!r}")

    def decorator(fn: Callable) -> Callable:
        arg = _single_required(fn) if argument is _AUTO else argument
        if arg is not None and arg not in inspect.signature(fn).parameters:
            raise ValueError(f"tool {name!r}: argument {arg!r} is not a parameter of {fn!r}")
        TOOLS.add(name, Tool(name, fn, description.strip(), arg,
                             None if timeout_s is None else float(timeout_s)))
        return fn

    return decorator


def unregister_tool(name: str) -> None:
    """Remove a registered tool (tests, plugins that replace one); unknown names pass."""
    TOOLS.unregister(name)


def get_tool(name: str) -> Tool:
    """The tool registered under ``name``.

    Raises:
        KeyError: unknown name; the message lists the registered ones and the closest match.
    """
    return TOOLS.get(name, field="")


def tool_names() -> list[str]:
    """Names of all registered tools, sorted."""
    return TOOLS.names()

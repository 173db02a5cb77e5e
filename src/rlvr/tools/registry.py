"""Tools by name: what the ``tools`` list of an environment config (:class:`rlvr.envs.EnvConfig`)
accepts.

A tool is a function from its arguments to text, registered with one decorator::

    from rlvr.tools import register_tool

    @register_tool("word_count", description="counts the words of a text", timeout_s=2.0)
    def word_count(text: str) -> str:
        return str(len(text.split()))

The model calls it as ``<word_count>some text</word_count>`` (a tool whose one required
parameter takes the tag's text) or ``<tool_call>{"name": "word_count", "arguments": {"text":
"some text"}}</tool_call>`` (see :mod:`rlvr.envs.tool_calls`). The built-ins (``calculator``,
``python``, :data:`BUILTIN_TOOLS`) register when a lookup first needs them; user tools
register when their module is imported (``env.plugins``).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import re
from dataclasses import dataclass
from typing import Callable

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


TOOLS: dict[str, Tool] = {}
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
        existing = TOOLS.get(name)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"tool {name!r} is already registered ({existing.fn!r})")
        TOOLS[name] = Tool(name, fn, description.strip(), arg,
                           None if timeout_s is None else float(timeout_s))
        return fn

    return decorator


def unregister_tool(name: str) -> None:
    """Remove a registered tool (tests, plugins that replace one); unknown names pass."""
    TOOLS.pop(name, None)


def get_tool(name: str) -> Tool:
    """The tool registered under ``name`` (a built-in's module is imported on first use).

    Raises:
        KeyError: unknown name; the message lists the registered ones and the closest match.
    """
    if name not in TOOLS and name in BUILTIN_TOOLS:
        importlib.import_module(BUILTIN_TOOLS[name])
    if name not in TOOLS:
        _load_builtins()  # the error lists every tool
    return lookup(TOOLS, "tool", name)


def require_tool(name: str) -> None:
    """Check that ``name`` is a registered or built-in tool without importing a built-in (the
    python tool imports the sandbox: config validation need not pay for it).

    Raises:
        KeyError: as :func:`get_tool` for an unknown name.
    """
    if name not in TOOLS and name not in BUILTIN_TOOLS:
        lookup({**dict.fromkeys(BUILTIN_TOOLS), **TOOLS}, "tool", name)


def lookup(table: dict, kind: str, name: str):
    """``table[name]``, or a ``KeyError`` naming ``kind``, the closest registered name and all
    of them (``unknown tool 'calculater'; did you mean 'calculator'? registered: ...``)."""
    try:
        return table[name]
    except (KeyError, TypeError):
        close = difflib.get_close_matches(str(name), [str(k) for k in table], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown {kind} {name!r}{hint} registered: "
                       f"{', '.join(sorted(table)) or 'none'}") from None


def tool_names() -> list[str]:
    """Names of all registered tools, sorted."""
    _load_builtins()
    return sorted(TOOLS)


#: Built-in tool name -> the module that registers it.
BUILTIN_TOOLS = {"calculator": "rlvr.tools.calculator", "python": "rlvr.tools.python_tool"}


def _load_builtins() -> None:
    # Importing the built-in modules runs their decorators; by name when a lookup needs them,
    # so importing the registry stays cheap and free of cycles (the python tool imports the
    # sandbox, ~40 ms).
    for module in BUILTIN_TOOLS.values():
        importlib.import_module(module)

"""Tools a policy calls in a multi-turn episode: a registry of functions from
arguments to text, each with a time bound, and a runner that bounds every call's time and
output.

Public API:

- :data:`TOOLS`, :class:`Tool`, :func:`register_tool`, :func:`get_tool`,
  :func:`tool_names`, :func:`unregister_tool` (:mod:`rlvr.tools.registry`).
- :func:`run_calls`: run calls concurrently, each bounded; :func:`current_limits` inside a
  running tool; :func:`check_arguments` (:mod:`rlvr.tools.runner`).
- :class:`ToolLimits`, :class:`ToolOutcome`, :class:`ToolStatus`, :class:`ToolError`,
  :class:`ToolTimeout` (:mod:`rlvr.tools.types`); :func:`bound_text` (:mod:`rlvr.tools.output`).
- Built-ins: ``calculator`` (:mod:`rlvr.tools.calculator`: exact arithmetic, no eval) and
  ``python`` (:mod:`rlvr.tools.python_tool`: the sandbox), registered when this package imports
  their modules (the python tool's on its first use).
"""

from rlvr.tools import calculator as _calculator  # noqa: F401  (registers the calculator)
from rlvr.tools.output import bound_text
from rlvr.tools.registry import (
    RESERVED_NAMES,
    TOOLS,
    Tool,
    get_tool,
    register_tool,
    tool_names,
    unregister_tool,
)
from rlvr.tools.runner import check_arguments, current_limits, run_calls
from rlvr.tools.types import (
    DEFAULT_OUTPUT_BYTES,
    DEFAULT_TIMEOUT_S,
    MIN_OUTPUT_BYTES,
    ToolError,
    ToolLimits,
    ToolOutcome,
    ToolStatus,
    ToolTimeout,
)


# The python tool's module imports the sandbox (and the code verifier): declared here, imported
# on first use, so a config naming it validates without them.
def _load_python_tool() -> None:
    from rlvr.tools import python_tool  # noqa: F401


TOOLS.lazy("python", _load_python_tool)

__all__ = [
    "DEFAULT_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MIN_OUTPUT_BYTES",
    "RESERVED_NAMES",
    "TOOLS",
    "Tool",
    "ToolError",
    "ToolLimits",
    "ToolOutcome",
    "ToolStatus",
    "ToolTimeout",
    "bound_text",
    "check_arguments",
    "current_limits",
    "get_tool",
    "register_tool",
    "run_calls",
    "tool_names",
    "unregister_tool",
]

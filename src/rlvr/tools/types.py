"""Records of a tool call: its limits, its outcome, and the exceptions a tool raises to say
what went wrong in words the model reads."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

#: Default wall-time bound of one tool call in seconds (``env.tool_timeout_s``).
DEFAULT_TIMEOUT_S = 10.0
#: Default size bound of one observation in bytes of UTF-8, marker included
#: (``env.tool_output_bytes``).
DEFAULT_OUTPUT_BYTES = 1024
#: The smallest output bound accepted: room for a cut marker and a little text.
MIN_OUTPUT_BYTES = 64


class ToolStatus(StrEnum):
    """How one tool call ended.

    - ``ok``: the tool returned its text.
    - ``error``: the tool raised (a :class:`ToolError` with its own message, or any other
      exception, shown as ``Error: <type>: <message>``) or returned something that is not text.
    - ``timeout``: the call ran past its time bound (the runner stopped waiting), or the tool
      raised :class:`ToolTimeout` (e.g. the sandbox stopped the program at its bound).
    - ``invalid``: the call could not be made: malformed call text, an unknown tool, arguments
      that do not fit the tool's parameters, or more calls in one turn than allowed.
    """

    ok = "ok"
    error = "error"
    timeout = "timeout"
    invalid = "invalid"


class ToolError(Exception):
    """Raised by a tool to fail with ``str(exc)`` as the observation, verbatim (no
    ``Error: <type>:`` prefix): e.g. the python tool's program output and traceback."""


class ToolTimeout(ToolError):
    """A :class:`ToolError` that counts as a ``timeout``: the tool itself stopped work that
    ran past its bound (the python tool, when the sandbox's time limit ended the program)."""


@dataclass(frozen=True)
class ToolLimits:
    """The bounds of one call, as a running tool sees them (:func:`rlvr.tools.current_limits`).

    Attributes:
        timeout_s: the call's time bound in seconds (wall time from the moment it starts).
        output_bytes: the observation's size bound in UTF-8 bytes, cut marker included.
    """

    timeout_s: float = DEFAULT_TIMEOUT_S
    output_bytes: int = DEFAULT_OUTPUT_BYTES


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced.

    Attributes:
        name: the tool called (as written in the call, for an unknown tool).
        status: see :class:`ToolStatus`.
        text: the observation text, at most the call's ``output_bytes`` bytes of UTF-8.
        seconds: wall seconds from the call's start to its result (its bound, for a timeout;
            0.0 for an ``invalid`` call, which never runs).
        cut_bytes: bytes of the tool's text cut to fit ``output_bytes`` (0: nothing cut).
    """

    name: str
    status: ToolStatus
    text: str
    seconds: float = 0.0
    cut_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.ok

    def to_dict(self) -> dict:
        """Plain-data view (status as a string, seconds rounded to 0.1 ms)."""
        return {"name": self.name, "status": self.status.value, "text": self.text,
                "seconds": round(self.seconds, 4), "cut_bytes": self.cut_bytes}

"""Alerts: one record per health-check finding, appended to ``RUN_DIR/alerts.jsonl`` and
printed as a visible console line (R40)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rlvr.io import append_jsonl

SEVERITY = {"warn": 0, "rollback": 1, "stop": 2}


@dataclass(frozen=True)
class Alert:
    """A health check's finding and the action taken.

    Attributes:
        step: GRPO step at which the check fired.
        check: the check's name (``reward_collapse``, ``kl_spike`` ...).
        action: ``warn``, ``rollback`` or ``stop``.
        message: what was seen, in plain words, with the numbers.
        value: the measured value (units of the metric), or ``None``.
        threshold: the threshold it crossed, or ``None``.
        examples: a few completions (or other evidence) that show the problem.
        time: UTC ISO-8601 timestamp.
    """

    step: int
    check: str
    action: str
    message: str
    value: float | None = None
    threshold: float | None = None
    examples: list[str] = field(default_factory=list)
    time: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def to_dict(self) -> dict:
        return asdict(self)


def strongest(alerts: list[Alert]) -> Alert | None:
    """The alert whose action is most severe (stop > rollback > warn); ``None`` if none."""
    return max(alerts, key=lambda a: SEVERITY[a.action], default=None)


class AlertLog:
    """Appends alerts to ``path`` (JSONL, flushed per alert) and prints each one.

    Args:
        path: the ``alerts.jsonl`` file; created on the first alert.
        print_fn: console printer (``rich.console.Console.print`` in a run).
    """

    COLOURS = {"warn": "yellow", "rollback": "magenta", "stop": "red"}

    def __init__(self, path: Path, print_fn=print):
        self.path, self.print = path, print_fn

    def emit(self, alert: Alert) -> None:
        append_jsonl(self.path, [alert.to_dict()], default=float)  # standard JSON, NaN as null
        colour = self.COLOURS.get(alert.action, "yellow")
        self.print(f"[bold {colour}]ALERT[/] step {alert.step} {alert.check} "
                   f"({alert.action}): {alert.message}")
        for example in alert.examples[:2]:
            self.print(f"  e.g. {example[:200]!r}")

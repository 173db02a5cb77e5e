"""Numbers of a run's records as the report shows them (:mod:`rlvr.reports.run_report`, also
``rlvr sweep``): only finite numbers count, anything else is shown as ``-``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def pct(value: Any) -> str:
    """``value`` as a percentage of 1 (``0.125`` -> ``12.5%``); ``-`` unless finite."""
    number = finite(value)
    return "-" if number is None else f"{number:.1%}"


def num(value: Any, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals; ``-`` unless finite."""
    number = finite(value)
    return "-" if number is None else f"{number:.{digits}f}"


def points(value: Any) -> str:
    """A difference of two fractions of 1 in percentage points (``+2.5 points``); ``-`` unless
    finite."""
    number = finite(value)
    return "-" if number is None else f"{100 * number:+.1f} points"


def series(rows: Iterable[dict], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of ``key``, sorted by step; rows without a finite step or value are
    skipped, and a step logged twice (a resumed run) keeps its last value."""
    by_step: dict[float, float] = {}
    for row in rows:
        step, value = finite(row.get("step")), finite(row.get(key))
        if step is not None and value is not None:
            by_step[step] = value
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]

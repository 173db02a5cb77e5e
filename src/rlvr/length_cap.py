"""The inference length cap (R19): P90 of completion lengths x 1.2, rounded up.

One definition for the two places that compute it: :func:`rlvr.algo.length.inference_length_limit`
(from training generation lengths) and :func:`rlvr.eval.lengths.recommended_cap` (the length
tool's recommendation). Plain Python, no torch, so the length tool runs without the training
stack.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The cap is this percentile of the lengths ...
CAP_PERCENT = 90
#: ... times this safety factor.
CAP_FACTOR = 1.2


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's default
    ``method="linear"``): position ``(n - 1) * q / 100`` in the sorted values.
    Example: [10, 20, 30, 40], q = 90 -> position 2.7 -> 30 + 0.7 * 10 = 37.

    Raises:
        ValueError: no values, or q outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])


def length_cap(lengths: Sequence[float], percent: float = CAP_PERCENT,
               factor: float = CAP_FACTOR) -> int:
    """``ceil(percentile(lengths, percent) * factor)`` tokens (a tiny epsilon absorbs float
    error, so 37 * 1.2 = 44.4 -> 45 and 50 * 1.2 -> 60, not 61).

    Args:
        lengths: completion lengths in tokens (non-empty).
        percent: which percentile (90 = P90), in (0, 100].
        factor: safety factor (> 0).

    Raises:
        ValueError: empty lengths or out-of-range parameters.
    """
    if not 0 < percent <= 100 or factor <= 0:
        raise ValueError(f"need 0 < percent <= 100 and factor > 0, got {percent}, {factor}")
    return math.ceil(percentile(lengths, percent) * factor - 1e-9)

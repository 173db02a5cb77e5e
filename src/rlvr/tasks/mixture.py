"""What the generated task sources (arithmetic, logic) share: difficulty-mixture specs and the
checks on a generator's arguments.

A mixture spec names difficulty levels with relative weights, ``"2d+-2d:0.6,2dx1d:0.4"``
(R26); each generator resolves the names against its own levels.
"""

from __future__ import annotations

from typing import Sequence, TypeVar

SPLITS = ("train", "validation")

T = TypeVar("T")


def split_weighted(spec: str, label: str) -> list[tuple[str, float]]:
    """``"a:0.6, b"`` -> ``[("a", 0.6), ("b", 1.0)]``: names with their weights, in spec order;
    a name without ``:weight`` weighs 1, empty items are skipped.

    Args:
        spec: the comma-separated spec.
        label: what the spec is, for the error message (e.g. ``"logic mixture"``).

    Raises:
        ValueError: a weight that is not a number.
    """
    pairs: list[tuple[str, float]] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, weight = item.rpartition(":")
        if not sep:
            name, weight = item, "1"
        try:
            pairs.append((name.strip(), float(weight)))
        except ValueError:
            raise ValueError(f"bad weight {weight!r} in {label} {spec!r}") from None
    return pairs


def check_weights(pairs: Sequence[tuple[T, float]], spec: object, label: str) -> float:
    """The total weight of ``pairs``, checked.

    Raises:
        ValueError: no pairs, a negative weight, or weights summing to 0.
    """
    if not pairs:
        raise ValueError(f"empty {label} {spec!r}")
    total = sum(w for _, w in pairs)
    if any(w < 0 for _, w in pairs) or total <= 0:
        raise ValueError(f"mixture weights must be >= 0 and sum to > 0: {spec!r}")
    return total


def check_generator_args(split: str, val_fraction: float, n: int) -> None:
    """The arguments every generator takes, checked.

    Raises:
        ValueError: ``split`` not in :data:`SPLITS`, ``val_fraction`` outside (0, 1), ``n < 0``.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")

"""What the generated task sources (arithmetic, logic) share: difficulty-mixture specs and the
checks on a generator's arguments.

A mixture spec names difficulty levels with relative weights, ``"2d+-2d:0.6,2dx1d:0.4"``
(R26); each generator resolves the names against its own levels.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import TypeVar

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


def _top_level_items(spec: str) -> list[str]:
    """``spec`` split at the commas outside brackets and quotes."""
    items, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(spec):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    items.append(spec[start:])
    return [item.strip() for item in items if item.strip()]


def _options(name: str, args: str, spec: str, label: str) -> dict:
    try:
        call = ast.parse(f"f({args})", mode="eval").body
        if call.args:
            raise ValueError("positional")
        return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"bad options of {name!r} in {label} {spec!r}: expected "
                         f"name(key=value, ...) with Python literal values ({exc})") from None


_ITEM = re.compile(r"(?P<name>[^():]+?)\s*(?:\((?P<args>.*)\))?\s*(?::\s*(?P<weight>[^():]*))?")


def split_option_specs(spec: str, label: str) -> list[tuple[str, dict, float]]:
    """``"countdown(min_numbers=3, max_numbers=4):0.6, knights_knaves"`` ->
    ``[("countdown", {"min_numbers": 3, "max_numbers": 4}, 0.6), ("knights_knaves", {}, 1.0)]``:
    names with their generator options (keyword arguments with Python literal values:
    numbers, strings, lists, dicts, True / False / None) and weights, in spec order; a name
    without ``:weight`` weighs 1. Used by the sources whose generators take options
    (``reasoning_gym`` datasets, ``verifiers`` environments).

    Raises:
        ValueError: an item that is not ``name(options):weight``, options that are not
            keyword literals, or a weight that is not a number (the message names the item).
    """
    out = []
    for item in _top_level_items(spec):
        m = _ITEM.fullmatch(item)
        if not m:
            raise ValueError(f"cannot read {item!r} in {label} {spec!r}: expected "
                             f"name(key=value, ...):weight")
        name = m["name"].strip()
        options = _options(name, m["args"], spec, label) if m["args"] is not None else {}
        try:
            weight = float(m["weight"]) if m["weight"] is not None else 1.0
        except ValueError:
            raise ValueError(f"bad weight {m['weight']!r} in {label} {spec!r}") from None
        out.append((name, options, weight))
    return out

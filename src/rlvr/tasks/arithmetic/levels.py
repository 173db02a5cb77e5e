"""Difficulty levels of the arithmetic generator (:mod:`rlvr.tasks.arithmetic`, R24): a
:class:`Level`, the named :data:`PRESETS`, and mixtures of levels by weight
(:func:`parse_mixture`, R26).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rlvr.tasks.arithmetic.expressions import OPERATORS
from rlvr.tasks.mixture import check_weights, split_weighted


@dataclass(frozen=True)
class Level:
    """A difficulty level of the generator.

    Attributes:
        name: label, stored as the task's ``difficulty`` and ``category``.
        digits: digits of each operand, e.g. ``(2, 1)``; its length is the number of operands
            (>= 2). A d-digit operand is uniform in [10^(d-1), 10^d - 1] (1-digit: 1..9).
        operators: subset of ``"+-*/"``; ``/`` is exact integer division.
        parentheses: if true, the operands are grouped by a random binary tree and every
            problem shows at least one pair of parentheses (needs >= 3 operands).
        allow_negative: if false, problems whose answer is negative are not drawn
            (intermediate results may still be negative).
    """

    name: str
    digits: tuple[int, ...]
    operators: str
    parentheses: bool = False
    allow_negative: bool = False

    def __post_init__(self) -> None:
        if len(self.digits) < 2 or any(not 1 <= d <= 9 for d in self.digits):
            raise ValueError(
                f"level {self.name!r}: need >= 2 operands of 1..9 digits, got {self.digits}"
            )
        if not self.operators or set(self.operators) - set(OPERATORS):
            raise ValueError(f"level {self.name!r}: operators must be a subset of {OPERATORS!r}")
        if self.parentheses and len(self.digits) < 3:
            raise ValueError(f"level {self.name!r}: parentheses need >= 3 operands")


#: Named presets. The issue's measured baselines (one-shot SmolLM2-135M) were 1-digit op
#: 1-digit 69.5%, 2-digit +/- 2-digit 21.5%, 2-digit x 1-digit 26.5%, three operands 1%,
#: 2-digit x 2-digit 3.5%.
PRESETS: dict[str, Level] = {
    level.name: level
    for level in (
        Level("1d+1d", (1, 1), "+"),
        Level("1dop1d", (1, 1), "+-*"),
        Level("2d+-2d", (2, 2), "+-"),
        Level("2d+2d", (2, 2), "+"),
        Level("2d-2d", (2, 2), "-"),
        Level("2dx1d", (2, 1), "*"),
        Level("2dx2d", (2, 2), "*"),
        Level("3ops", (2, 1, 1), "+-*"),
        Level("3ops-paren", (1, 1, 1), "+-*", parentheses=True),
        Level("div", (2, 1), "/"),
    )
}


def get_level(level: str | Level) -> Level:
    """A :class:`Level` from a preset name (or the level itself).

    Raises:
        KeyError: for an unknown name, listing the presets.
    """
    if isinstance(level, Level):
        return level
    try:
        return PRESETS[level]
    except KeyError:
        raise KeyError(
            f"unknown arithmetic level {level!r}; presets: {', '.join(PRESETS)}"
        ) from None


MixtureSpec = str | Level | Mapping[str, float] | Iterable[tuple[str | Level, float]]


def parse_mixture(spec: MixtureSpec) -> list[tuple[Level, float]]:
    """Levels and normalised weights from a mixture spec (R26).

    Accepted forms: a preset name (``"2d+-2d"``), a :class:`Level`, a string
    ``"2d+-2d:0.6,2dx1d:0.4"`` (a name without ``:w`` weighs 1), a mapping name -> weight, or
    an iterable of (name or Level, weight) pairs.

    Raises:
        ValueError: for a malformed spec, a negative weight or weights summing to 0.
        KeyError: for an unknown level name.
    """
    if isinstance(spec, Level):
        pairs: list[tuple[str | Level, float]] = [(spec, 1.0)]
    elif isinstance(spec, str):
        pairs = split_weighted(spec, "mixture spec")
    elif isinstance(spec, Mapping):
        pairs = [(k, float(v)) for k, v in spec.items()]
    else:
        pairs = [(k, float(v)) for k, v in spec]
    total = check_weights(pairs, spec, "mixture spec")
    return [(get_level(name), w / total) for name, w in pairs if w > 0]

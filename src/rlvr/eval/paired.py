"""How sure a pass@1 gain is: two models' verdicts on the *same* problems, compared pair by pair.

A run's headline is the greedy pass@1 of the trained model minus that of the model that entered
GRPO, on one validation set. Both see the same problems, so the gain's uncertainty is that of
the per-problem differences ``d_i = after_i - before_i`` in {-1, 0, 1}, far smaller than two
independent proportions' would be: only the problems whose verdict flipped carry information.
On 200 problems a +17-point gain still has a 95% interval about +-7 points wide, which is why
the interval is printed next to the gain.

- interval: the Wald interval for the difference of two dependent proportions (Agresti,
  *Categorical Data Analysis*, 3rd ed. 2013, Sec. 11.1), ``gain -/+ 1.96 * sqrt(((f + b) / n -
  gain^2) / n)`` with ``f`` / ``b`` the problems fixed / broken and ``gain = (f - b) / n``:
  the normal interval of the mean of the ``d_i``.
- test: McNemar's exact test (McNemar 1947, *Psychometrika* 12(2)): under "no change" each
  flipped problem is equally likely to be a fix or a break, so the two-sided p-value is
  ``min(1, 2 * P(Binomial(fixed + broken, 1/2) <= min(fixed, broken)))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PairedGain:
    """The pass@1 gain of ``after`` over ``before`` on the same problems.

    Attributes:
        gain: ``mean(after) - mean(before)``, a share in [-1, 1] (x100: points).
        low: lower end of its 95% interval, clipped to [-1, 1].
        high: upper end of its 95% interval, clipped to [-1, 1].
        fixed: problems wrong before and right after.
        broken: problems right before and wrong after.
        n: problems compared.
        p_value: McNemar's exact two-sided p-value (1.0 when nothing flipped).
    """

    gain: float
    low: float
    high: float
    fixed: int
    broken: int
    n: int
    p_value: float

    def as_dict(self) -> dict:
        """The fields as a plain dict (for results.json)."""
        return asdict(self)

    def summary(self) -> str:
        """One line, e.g. ``95% CI +14.6 to +27.4; 52 fixed, 10 broken of 200; McNemar p
        1.4e-07``."""
        return (f"95% CI {self.low * 100:+.1f} to {self.high * 100:+.1f}; {self.fixed} fixed, "
                f"{self.broken} broken of {self.n}; McNemar p {self.p_value:.2g}")


def gain_summary(saved) -> str:
    """:meth:`PairedGain.summary` of a saved :meth:`PairedGain.as_dict` (results.json's
    ``gain_pass_at_1_ci``); ``""`` for None or anything that is not such a dict (an older or
    edited file), so that a report still renders."""
    try:
        return PairedGain(**saved).summary()
    except (TypeError, ValueError):
        return ""


def mcnemar_exact_p(fixed: int, broken: int) -> float:
    """McNemar's exact two-sided p-value for ``fixed`` and ``broken`` discordant pairs:
    ``min(1, 2 * sum_{i <= min(fixed, broken)} C(m, i) / 2**m)`` with ``m = fixed + broken``
    (1.0 when ``m`` is 0).

    Raises:
        ValueError: a negative count.
    """
    if fixed < 0 or broken < 0:
        raise ValueError(f"mcnemar_exact_p: counts must be >= 0, got {fixed}, {broken}")
    m = fixed + broken
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(fixed, broken) + 1))
    # exact integers up to the one division: no underflow for thousands of flips
    return min(1.0, 2 * tail / 2 ** m)


def paired_gain(before: Sequence[bool], after: Sequence[bool]) -> PairedGain:
    """The paired gain, its 95% interval and McNemar's p-value (module docstring) from two
    models' per-problem verdicts, in the same problem order.

    Args:
        before: verdict per problem (True: correct) of the reference model, length n >= 1.
        after: the compared model's verdicts on the same n problems.

    Raises:
        ValueError: the lengths differ or are 0.
    """
    if len(before) != len(after) or not before:
        raise ValueError(f"paired_gain: need two equal, non-empty verdict lists, got "
                         f"{len(before)} and {len(after)}")
    n = len(before)
    fixed = sum(1 for b, a in zip(before, after) if a and not b)
    broken = sum(1 for b, a in zip(before, after) if b and not a)
    gain = (fixed - broken) / n
    # mean(d^2) = (fixed + broken) / n, since every d_i is -1, 0 or 1
    var = (fixed + broken) / n - gain * gain
    half = 1.96 * math.sqrt(max(var, 0.0) / n)
    return PairedGain(gain=gain, low=max(-1.0, gain - half), high=min(1.0, gain + half),
                      fixed=fixed, broken=broken, n=n, p_value=mcnemar_exact_p(fixed, broken))


def verdict_string(correct: Sequence[bool]) -> str:
    """Per-problem verdicts as one compact string for a JSONL row, ``"1"`` correct and ``"0"``
    not, in problem order (200 problems: 200 characters)."""
    return "".join("1" if ok else "0" for ok in correct)


def parse_verdicts(text: str) -> list[bool]:
    """The inverse of :func:`verdict_string`.

    Raises:
        ValueError: a character other than ``0`` / ``1``.
    """
    bad = set(text) - {"0", "1"}
    if bad:
        raise ValueError(f"verdicts: expected only '0' and '1', got {sorted(bad)}")
    return [c == "1" for c in text]

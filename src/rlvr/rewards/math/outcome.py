"""What a comparison of two answers returns, and the settings it is made under.

:class:`Policy` (the numeric tolerance, see :mod:`.scalars`) goes into every comparison,
:class:`Outcome` comes out. The comparisons of composite answers (:mod:`.sequences`,
:mod:`.matrices`, :mod:`.realsets`) compare their parts with the ``compare`` function they are
given (:data:`Compare`, :func:`.equivalence.compare` itself), so that they need not import the
dispatch that calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Policy:
    """Numeric tolerance settings (see :mod:`.scalars`)."""

    exact_sig_digits: int = 9
    rounded_reference_tolerance: bool = True
    accept_unevaluated: bool = True


@dataclass(frozen=True)
class Outcome:
    """Result of a comparison: ``equal``; ``multiple`` when the response listed several
    candidates for a single-valued reference; ``detail`` names the deciding rule."""

    equal: bool
    detail: str
    multiple: bool = False


def yes(detail: str) -> Outcome:
    """An equal :class:`Outcome` decided by the rule ``detail``."""
    return Outcome(True, detail)


def no(detail: str) -> Outcome:
    """A differing :class:`Outcome` decided by the rule ``detail``."""
    return Outcome(False, detail)


#: ``compare(ref, resp, policy) -> Outcome`` over parsed answers of any shape.
Compare = Callable[[Any, Any, Policy], Outcome]

"""Name -> function registries of the algorithm core.

Every variant (an advantage estimator, a policy loss, a KL estimator, a loss aggregation) is one
small pure function registered under a name, so a config can select it by string and adding a
variant is one decorated function, never an edit to an ``if`` chain::

    from rlvr.algo.registry import ADVANTAGE_ESTIMATORS

    @ADVANTAGE_ESTIMATORS.register("my_baseline")
    def my_baseline(rewards, group_ids, **options): ...

    fn = ADVANTAGE_ESTIMATORS.get("my_baseline")

The registries are filled by importing their modules; :func:`Registry.get` imports
``rlvr.algo`` first, so a lookup always sees the built-in variants.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """A named table of functions of one kind (e.g. ``"advantage estimator"``).

    Args:
        kind: human-readable name of what is registered; used in error messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._table: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator registering ``fn`` under ``name``; returns ``fn`` unchanged.

        Raises:
            ValueError: if a different function is already registered under ``name``.
        """

        def decorator(fn: F) -> F:
            existing = self._table.get(name)
            if existing is not None and existing is not fn:
                raise ValueError(f"{self.kind} {name!r} is already registered ({existing!r})")
            self._table[name] = fn
            return fn

        return decorator

    def get(self, name: str) -> F:
        """The function registered under ``name``.

        Raises:
            KeyError: for an unknown name; the message lists the registered names and the
                closest match (so a typo in a config is easy to fix).
        """
        _load_builtins()
        try:
            return self._table[name]
        except KeyError:
            known = sorted(self._table)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise KeyError(
                f"unknown {self.kind} {name!r}{hint} registered: {', '.join(known) or 'none'}"
            ) from None

    def names(self) -> list[str]:
        """Sorted names of everything registered."""
        _load_builtins()
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        _load_builtins()
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._table)})"


#: ``(rewards: FloatTensor[N], group_ids: LongTensor[N], **options) -> FloatTensor[N]``
ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator")
#: ``(log_probs, old_log_probs, advantages, mask, **options) -> PolicyLossOutput``
POLICY_LOSSES: Registry = Registry("policy loss")
#: ``(log_probs: FloatTensor[N, T], ref_log_probs: FloatTensor[N, T]) -> FloatTensor[N, T]``
KL_ESTIMATORS: Registry = Registry("KL estimator")
#: ``(token_loss: FloatTensor[N, T], mask: BoolTensor[N, T], **options) -> FloatTensor[]``
LOSS_AGGREGATIONS: Registry = Registry("loss aggregation")


def _load_builtins() -> None:
    # Importing the package imports every module, which runs their decorators. Lazy, so that
    # importing this module alone has no cycles.
    import rlvr.algo  # noqa: F401

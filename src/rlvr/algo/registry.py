"""Name -> entry registries of the algorithm core.

Every variant (an advantage estimator, a policy loss, a KL estimator, a loss aggregation) is one
small pure function registered under a name, so a config can select it by string and adding a
variant is one decorated function, never an edit to an ``if`` chain. The entry also owns what
the trainer needs to call it: which run-config options it takes (``options``) and, for a loss
aggregation, how a micro-batch's loss is weighted in the step (``weight``)::

    from rlvr.algo.registry import ADVANTAGE_ESTIMATORS

    @ADVANTAGE_ESTIMATORS.register("my_baseline", options=lambda config: {"eps": 1e-6})
    def my_baseline(rewards, group_ids, *, eps): ...

    fn = ADVANTAGE_ESTIMATORS.get("my_baseline")
    ADVANTAGE_ESTIMATORS.options("my_baseline", config)   # -> {"eps": 1e-6}

``config`` is the run config (:class:`rlvr.train.config.RunConfig`, or any object with the
same attributes); the entries read it, the algorithm core never imports it. The registries
are filled by importing their modules, which ``rlvr.algo`` does; Python imports a package before
any of its modules, so whoever imports this module gets registries holding the built-in
variants.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True)
class Entry(Generic[F]):
    """One registered variant.

    Attributes:
        name: the registry key, what a config selects.
        fn: the variant itself.
        options: ``options(config, *context) -> dict``, the keyword options of ``fn`` taken
            from the run config (the registry's docs say which ``context`` follows); None
            when ``fn`` takes none.
        weight: loss aggregations only: ``weight(mask, counts, world_size) -> float``, see
            :data:`LOSS_AGGREGATIONS`.
    """

    name: str
    fn: F
    options: Callable[..., dict] | None = None
    weight: Callable[..., float] | None = None


class Registry(Generic[F]):
    """A named table of functions of one kind (e.g. ``"advantage estimator"``).

    Args:
        kind: human-readable name of what is registered; used in error messages.
        fields: the :class:`Entry` fields an entry of this kind may declare besides ``fn``.
        required: the fields every entry of this kind must declare.
    """

    def __init__(self, kind: str, *, fields: tuple[str, ...] = ("options",),
                 required: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.fields, self.required = fields, required
        self._table: dict[str, Entry[F]] = {}

    def register(self, name: str, **spec: Any) -> Callable[[F], F]:
        """Decorator registering ``fn`` under ``name`` with its ``spec`` (``options=...``,
        and for loss aggregations ``weight=...``); returns ``fn`` unchanged.

        Raises:
            TypeError: a spec field this kind does not take, or a required one missing.
            ValueError: if a different function is already registered under ``name``.
        """
        unknown = sorted(set(spec) - set(self.fields))
        missing = [f for f in self.required if spec.get(f) is None]
        if unknown or missing:
            takes = ", ".join(self.fields) or "nothing but the function"
            problem = (f"does not take {', '.join(unknown)}" if unknown
                       else f"needs {', '.join(missing)}")
            raise TypeError(f"{self.kind} {name!r}: a {self.kind} entry {problem} "
                            f"(it takes: {takes})")

        def decorator(fn: F) -> F:
            existing = self._table.get(name)
            if existing is not None and existing.fn is not fn:
                raise ValueError(f"{self.kind} {name!r} is already registered ({existing.fn!r})")
            self._table[name] = Entry(name, fn, **spec)
            return fn

        return decorator

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's or a plugin's variant); unknown names are ignored."""
        self._table.pop(name, None)

    def entry(self, name: str) -> Entry[F]:
        """The :class:`Entry` registered under ``name``.

        Raises:
            KeyError: for an unknown name; the message lists the registered names and the
                closest match (so a typo in a config is easy to fix).
        """
        try:
            return self._table[name]
        except KeyError:
            known = ", ".join(sorted(self._table)) or "none"
            raise KeyError(f"unknown {self.kind} {name!r}{self._hint(name)} registered: "
                           f"{known}") from None

    def get(self, name: str) -> F:
        """The function registered under ``name``.

        Raises:
            KeyError: as :meth:`entry`.
        """
        return self.entry(name).fn

    def options(self, name: str, config: Any, *context: Any) -> dict:
        """The keyword options ``name`` takes, read from ``config`` (and ``context``, see the
        registry's docs); ``{}`` for an entry that declares none.

        Raises:
            KeyError: as :meth:`entry`.
        """
        entry = self.entry(name)
        return {} if entry.options is None else dict(entry.options(config, *context))

    def unknown_message(self, name: str) -> str:
        """The message for a config naming an unregistered ``name``: the closest registered
        name, then all of them (``"'dapo2' is unknown as a loss aggregation; did you mean
        'dapo'? registered: bnpo, dapo, dr_grpo, grpo"``)."""
        hint = self._hint(name)
        return (f"{name!r} is unknown as a {self.kind}{hint}{' ' if hint else '; '}registered: "
                f"{', '.join(sorted(self._table)) or 'none'}")

    def _hint(self, name: str) -> str:
        close = difflib.get_close_matches(name, sorted(self._table), n=1)
        return f"; did you mean {close[0]!r}?" if close else ""

    def names(self) -> list[str]:
        """Sorted names of everything registered."""
        return sorted(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._table)})"


#: fn ``(rewards: FloatTensor[N], group_ids: LongTensor[N], **options) -> FloatTensor[N]``;
#: options ``(config) -> dict`` (e.g. grpo's ``std_scale`` from ``algo.std_scale``).
ADVANTAGE_ESTIMATORS: Registry = Registry("advantage estimator")
#: fn ``(log_probs, old_log_probs, advantages, mask, **options) -> PolicyLossOutput``;
#: options ``(config) -> dict`` (e.g. ``{"eps": config.algo.clip_eps}``).
POLICY_LOSSES: Registry = Registry("policy loss")
#: fn ``(log_probs: FloatTensor[N, T], ref_log_probs: FloatTensor[N, T]) -> FloatTensor[N, T]``;
#: no options.
KL_ESTIMATORS: Registry = Registry("KL estimator", fields=())
#: fn ``(token_loss: FloatTensor[N, T], mask: BoolTensor[N, T], **options) -> FloatTensor[]``;
#: options ``(config, counts: BatchCounts) -> dict`` (the step's global counts, e.g. DAPO's
#: token count); weight (required) ``(mask: BoolTensor[n, T], counts: BatchCounts,
#: world_size: int) -> float``, the factor of one micro-batch's aggregate so that the summed
#: (and, over ``world_size`` data-parallel ranks, averaged) gradient is the aggregation's over
#: the whole step (:func:`rlvr.algo.loss_agg.micro_batch_weight`).
LOSS_AGGREGATIONS: Registry = Registry("loss aggregation", fields=("options", "weight"),
                                       required=("weight",))

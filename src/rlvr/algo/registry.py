"""Name -> entry registries of the algorithm core.

Every variant (an advantage estimator, a policy loss, a KL estimator, a loss aggregation) is one
small pure function registered under a name, so a config can select it by string and adding a
variant is one decorated function, never an edit to an ``if`` chain. The registries are
:class:`rlvr.registry.Registry` tables; an entry's metadata owns what the trainer needs to call
it: which run-config options it takes (:attr:`VariantMeta.options`) and, for a loss
aggregation, how a micro-batch's loss is weighted in the step
(:attr:`LossAggregationMeta.weight`)::

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.registry import Entry, NoMeta, Registry

__all__ = ["ADVANTAGE_ESTIMATORS", "KL_ESTIMATORS", "LOSS_AGGREGATIONS", "OFF_POLICY_CORRECTIONS",
           "POLICY_LOSSES",
           "Entry", "LossAggregationMeta", "Registry", "VariantMeta", "VariantRegistry"]


@dataclass(frozen=True)
class VariantMeta:
    """What an advantage estimator or a policy loss records beside its function.

    Attributes:
        options: ``options(config, *context) -> dict``, the keyword options of the function
            taken from the run config (the registry's docs say which ``context`` follows);
            None when it takes none.
    """

    options: Callable[..., dict] | None = None


@dataclass(frozen=True)
class LossAggregationMeta:
    """What a loss aggregation records beside its function.

    Attributes:
        weight: ``weight(mask, counts, world_size) -> float``, see :data:`LOSS_AGGREGATIONS`.
        options: as :attr:`VariantMeta.options`, with the step's :class:`BatchCounts` as
            context.
    """

    weight: Callable[..., float]
    options: Callable[..., dict] | None = None


class VariantRegistry(Registry):
    """A :class:`rlvr.registry.Registry` of algorithm variants: adds :meth:`options`."""

    def options(self, name: str, config: Any, *context: Any) -> dict:
        """The keyword options ``name`` takes, read from ``config`` (and ``context``, see the
        registry's docs); ``{}`` for an entry that declares none.

        Raises:
            KeyError: an unknown name (:meth:`rlvr.registry.Registry.entry`).
        """
        options = getattr(self.entry(name).meta, "options", None)
        return {} if options is None else dict(options(config, *context))


#: fn ``(rewards: FloatTensor[N], group_ids: LongTensor[N], **options) -> FloatTensor[N]``;
#: options ``(config) -> dict`` (e.g. grpo's ``std_scale`` from ``algo.std_scale``).
ADVANTAGE_ESTIMATORS = VariantRegistry("advantage estimator", VariantMeta,
                                       field="algo.advantage")
#: fn ``(log_probs, old_log_probs, advantages, mask, **options) -> PolicyLossOutput``;
#: options ``(config) -> dict`` (e.g. ``{"eps": config.algo.clip_eps}``).
POLICY_LOSSES = VariantRegistry("policy loss", VariantMeta, field="algo.policy_loss")
#: fn ``(log_probs: FloatTensor[N, T], ref_log_probs: FloatTensor[N, T]) -> FloatTensor[N, T]``;
#: no options.
KL_ESTIMATORS = VariantRegistry("KL estimator", NoMeta, field="algo.kl_estimator")
#: fn ``(token_loss: FloatTensor[N, T], mask: BoolTensor[N, T], **options) -> FloatTensor[]``;
#: options ``(config, counts: BatchCounts) -> dict`` (the step's global counts, e.g. DAPO's
#: token count); weight (required) ``(mask: BoolTensor[n, T], counts: BatchCounts,
#: world_size: int) -> float``, the factor of one micro-batch's aggregate so that the summed
#: (and, over ``world_size`` data-parallel ranks, averaged) gradient is the aggregation's over
#: the whole step (:func:`rlvr.algo.loss_agg.micro_batch_weight`).
LOSS_AGGREGATIONS = VariantRegistry("loss aggregation", LossAggregationMeta,
                                    field="algo.loss_agg")
#: fn ``(prox_log_probs: FloatTensor[N, T], behav_log_probs: FloatTensor[N, T],
#: mask: BoolTensor[N, T], **options) -> CorrectionWeights``; options ``(config) -> dict``
#: (:mod:`rlvr.algo.corrections`).
OFF_POLICY_CORRECTIONS = VariantRegistry("off-policy correction", VariantMeta,
                                         field="algo.off_policy_correction")

"""Aggregators (R1): combine per-component scores into one scalar reward."""

from __future__ import annotations

from rlvr.rewards.registry import register_aggregator


@register_aggregator("weighted_sum")
def weighted_sum(components: dict[str, float], weights: dict[str, float]) -> float:
    """``sum_c weights[c] * components[c]`` over the components present in both maps.

    A component without a weight counts 0; a weight without a component is ignored (e.g. a
    ``process`` weight on a task type that has no process verifier).
    """
    return float(sum(weights.get(name, 0.0) * score for name, score in components.items()))


@register_aggregator("outcome_gated")
def outcome_gated(components: dict[str, float], weights: dict[str, float]) -> float:
    """Weighted sum in which the non-outcome components only count when the outcome is right.

    Stricter than ``weighted_sum``: a wrong answer earns nothing for its format, so format
    cannot be farmed at all (useful once the model has learned the format).
    """
    if components.get("outcome", 0.0) <= 0.0:
        return 0.0
    return weighted_sum(components, weights)

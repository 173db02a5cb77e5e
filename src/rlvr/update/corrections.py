"""Which off-policy correction an update applies, read from the run config.

``algo.off_policy_correction`` names one of :data:`rlvr.algo.corrections.
OFF_POLICY_CORRECTIONS` or ``auto``, which resolves per run:

- ``decoupled`` when the run trains on stale samples (``grpo.max_staleness > 0``): AReaL's
  decoupled objective, built for exactly that (the clip around the trainer's policy, the
  behaviour weight for the sample's version, tokens past ``algo.decoupled_cap`` dropped);
- ``tis`` when ``algo.tis_cap`` is set (an int8 rollout sets it: a mismatched sampler of the
  same weights);
- ``none`` otherwise: the synchronous run in one precision, whose sampler and trainer compute
  the same function (the loss is then exactly on-policy GRPO's).
"""

from __future__ import annotations

from rlvr.algo.corrections import OFF_POLICY_CORRECTIONS


def resolve_correction(config) -> str:
    """The correction ``config`` selects (``auto`` resolved, see the module doc).

    Args:
        config: the run config (:class:`rlvr.train.config.RunConfig` or any object with
            ``algo`` and ``grpo``); an ``algo`` without ``off_policy_correction`` counts as
            ``auto``.
    """
    a = config.algo
    name = getattr(a, "off_policy_correction", "auto")
    if name != "auto":
        return name
    if getattr(config.grpo, "max_staleness", 0):
        return "decoupled"
    return "tis" if getattr(a, "tis_cap", None) else "none"


def correction_settings(config) -> tuple[str, dict]:
    """``(name, options)``: the resolved correction and the keyword options its registry
    entry reads from ``config`` (its caps).

    Raises:
        KeyError: the name is not registered.
    """
    name = resolve_correction(config)
    return name, OFF_POLICY_CORRECTIONS.options(name, config)


def needs_sampler_log_probs(config) -> bool:
    """True when the update weights the loss with the sampler's log-probs (every correction
    but ``none``), so the rollout's log-probs must reach the update."""
    return resolve_correction(config) != "none"

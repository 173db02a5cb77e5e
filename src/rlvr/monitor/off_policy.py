"""The off-policy health check: the sampler and the trainer disagree about the sampled tokens
by more than a correction can be trusted to fix.

It reads two metrics the update logs every step (docs/reference/metrics.md):
``rollout_logprob_gap``, the mean |log pi_trainer - log pi_sampler| of the sampled tokens, and
``is_masked_fraction``, the share of tokens an off-policy correction (``mis``, ``icepop``,
``decoupled``) dropped. A synchronous fp32 run has a gap near 1e-6 nats/token (the two code
paths compute the same function); an int8 sampler ~0.15, which truncated importance sampling
corrects. Far beyond that the rollout is not sampling the policy being trained (wrong or very
stale weights, a broken engine), and a large masked fraction means the update is discarding
much of what was sampled: in both cases the corrected gradient is no longer the one meant.
"""

from __future__ import annotations

from rlvr.monitor.checks import CheckContext, Finding, health_check


@health_check("off_policy")
def off_policy(ctx: CheckContext, cfg) -> Finding | None:
    """``rollout_logprob_gap > max_logprob_gap`` or ``is_masked_fraction >
    max_masked_fraction`` on the current step (steps without the metric are skipped)."""
    cur = ctx.current
    gap = cur.get("rollout_logprob_gap")
    if gap is not None and gap > cfg.max_logprob_gap:
        return Finding(f"the sampler's and the trainer's log-probs of the sampled tokens differ "
                       f"by {gap:.3g} nats/token on average (> {cfg.max_logprob_gap:g}): the "
                       f"rollout is not sampling the policy being trained (stale or wrong "
                       f"weights, another precision or engine)", value=gap,
                       threshold=cfg.max_logprob_gap)
    masked = cur.get("is_masked_fraction")
    if masked is not None and masked > cfg.max_masked_fraction:
        return Finding(f"the off-policy correction dropped {masked:.1%} of the step's tokens "
                       f"(> {cfg.max_masked_fraction:.1%}): their sampler / trainer ratio left "
                       f"the trusted range, so the update learns from a biased subset (lower "
                       f"grpo.max_staleness, or check the rollout's weights)", value=masked,
                       threshold=cfg.max_masked_fraction)
    return None

"""Configuration of the training health checks (``health:`` in a run config). The field docs
are the user documentation; every threshold has a documented default.

Each check has an ``action``: ``warn`` (an alert in ``alerts.jsonl`` and on the console),
``stop`` (the alert, then the run ends cleanly: final validation, checkpoint, results) or
``rollback`` (the alert, then the policy and optimizer go back to the last good checkpoint, the
learning rate is multiplied by ``health.rollback_lr_factor`` and training continues).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from rlvr.configio import ConfigModel
from rlvr.limits import MAX_BATCH, MAX_COEF, MAX_REPEATS, MAX_ROWS, MAX_STEPS

Action = Literal["warn", "stop", "rollback"]


class _Section(ConfigModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CheckConfig(_Section):
    enabled: bool = Field(True, description="Run this check.")
    action: Action = Field("warn", description="warn, stop or rollback.")


class NonFiniteCheck(CheckConfig):
    """R38. A step with a non-finite log-prob, advantage, loss or gradient never updates the
    policy (that is unconditional); this check reports it, and stops the run after
    ``max_consecutive`` such steps in a row."""

    max_consecutive: int = Field(3, ge=1, le=MAX_STEPS,
        description="Skipped updates in a row that stop the run (whatever `action` says).")


class RewardCollapseCheck(CheckConfig):
    """R21. The step's mean reward falls far below its recent average."""

    action: Action = Field("rollback", description="warn, stop or rollback.")
    drop: float = Field(0.5, gt=0, le=1, description="Alert when reward_mean < (1 - drop) x "
                        "the mean of the previous `health.window` steps ...")
    min_drop: float = Field(0.15, ge=0, le=MAX_COEF,
        description="... and the fall is at least this much reward (absolute), so a noisy "
        "low-reward start does not alert ...")
    min_z: float = Field(3.0, ge=0, le=MAX_COEF,
        description="... and the fall is at least this many standard errors of the mean of "
        "the fallen steps' groups (the spread of the earlier steps' per-prompt mean rewards "
        "over the square root of the groups in this step and the low steps right before it), "
        "so a step that drew few prompts does not alert on the luck of the draw. 0: off.")


class KLSpikeCheck(CheckConfig):
    """R21, R37. KL to the reference jumps (only when the KL term is on)."""

    action: Action = Field("rollback", description="warn, stop or rollback.")
    factor: float = Field(5.0, gt=1, le=MAX_COEF,
        description="Alert when kl > factor x the mean of the previous `health.window` steps ...")
    min_kl: float = Field(0.05, ge=0, le=MAX_COEF, description="... and kl > min_kl (nats/token).")
    max_kl: float = Field(1.0, gt=0, le=MAX_COEF,
        description="Alert whenever kl > max_kl (nats/token).")


class LengthInflationCheck(CheckConfig):
    """R36. Completions grow (a known failure: the policy pads or loops) or hit the cap."""

    ratio: float = Field(1.5, gt=1, le=MAX_COEF,
        description="Alert when the mean completion length of the last `health.window` steps "
        "exceeds ratio x that of the first `health.window` GRPO steps and is still rising ...")
    max_truncation: float = Field(0.25, ge=0, le=1, description="... or when the truncation "
                                  "rate of the last 3 steps exceeds this and the first window's "
                                  "by 0.1.")


class ZeroVarianceCheck(CheckConfig):
    """R35. Groups whose completions all got the same reward carry no gradient."""

    max_fraction: float = Field(0.9, ge=0, le=1, description="Alert when the zero-variance "
                                "group fraction, averaged over the last 3 steps, is at least "
                                "this (tasks too easy or too hard for the policy).")
    constant_steps: int = Field(2, ge=1, le=MAX_STEPS,
        description="Alert when every completion of the batch got the same reward this many steps "
        "in a row (a reward function that returns a constant).")


class FormatErrorCheck(CheckConfig):
    """The share of completions without the required answer format jumps."""

    rise: float = Field(0.25, gt=0, le=1, description="Alert when format_error_rate exceeds "
                        "the mean of the previous window by this much ...")
    min_rate: float = Field(0.3, ge=0, le=1, description="... and is at least this.")


class FormatCollapseCheck(CheckConfig):
    """The answer format breaks within a step or two (an exploding policy: a far too high
    learning rate). Needs one step of history only, so it fires on the step the broken policy
    first samples, even when no row trains and KL is not measured."""

    action: Action = Field("rollback", description="warn, stop or rollback.")
    max_rate: float = Field(0.9, gt=0, le=1, description="Alert when format_error_rate is at "
                            "least this ...")
    rise: float = Field(0.4, gt=0, le=1, description="... and exceeds the mean of the "
                        "previous steps (up to `health.window`, at least one, since the start "
                        "or the last rollback) by at least this.")


class EntropyJumpCheck(CheckConfig):
    """The policy's per-token entropy as sampled in the rollout (``rollout_entropy``,
    nats/token, measured on every completion) jumps: the distribution has been blown flat.
    Needs one step of history only and no trained row."""

    action: Action = Field("rollback", description="warn, stop or rollback.")
    factor: float = Field(2.0, gt=1, le=MAX_COEF,
        description="Alert when rollout_entropy > factor x the mean of the previous steps (up to "
        "`health.window`, at least one, since the start or the last rollback) ...")
    min_rise: float = Field(1.0, gt=0, le=MAX_COEF,
        description="... and exceeds it by at least this many nats/token.")


class ValidationCollapseCheck(CheckConfig):
    """A validation during GRPO falls far below the validation of the model that entered
    GRPO (``before_grpo``), in pass@1 or in answer format rate."""

    action: Action = Field("rollback", description="warn, stop or rollback.")
    drop: float = Field(0.5, gt=0, le=1, description="Alert when pass@1 (or the format rate) "
                        "< (1 - drop) x its value before GRPO ...")
    min_drop: float = Field(0.2, gt=0, le=1, description="... and the fall is at least this "
                            "much (absolute), so a weak baseline's noise does not alert ...")
    min_z: float = Field(3.0, ge=0, le=MAX_COEF, description="... and the fall is at least this "
                         "many standard errors of the difference of the two shares (each "
                         "adjusted by one success and one failure, Agresti-Caffo), so a "
                         "validation on a handful of tasks does not alert on chance. 0: off.")


class VerifierErrorCheck(CheckConfig):
    """Verifier failures (the verifier raised, returned no valid verdict, or timed out): such
    rows score 0 and train nothing, so a failing verifier looks like a hard task set."""

    max_rate: float = Field(0.1, ge=0, le=1, description="Alert when more than this share of "
                            "a step's completions got a verifier error or timeout.")


class CategoryBiasCheck(CheckConfig):
    """R10. Per category (or source): a parse-failure or zero-reward rate that stands out
    from the other categories over the last window, e.g. a verifier that cannot read one
    category's answers and so punishes the whole category."""

    parse_gap: float = Field(0.3, gt=0, le=1, description="Alert when a category's parse-"
                             "failure rate exceeds the other categories' by this much ...")
    zero_reward_gap: float = Field(0.6, gt=0, le=1, description="... or its zero-reward rate "
                                   "exceeds theirs by this much ...")
    min_samples: int = Field(32, ge=1, le=MAX_ROWS,
        description="... with at least this many completions of the category in the window.")


class DegenerationCheck(CheckConfig):
    """R37. Repetition loops, garbled characters, language mixing."""

    max_repetition: float = Field(0.35, ge=0, le=1, description="Mean share of repeated "
                                  "4-grams per completion.")
    max_garbled: float = Field(0.02, ge=0, le=1, description="Mean share of garbled "
                               "characters (U+FFFD, control, unassigned code points).")
    max_script_mix: float = Field(0.1, ge=0, le=1, description="Mean share of letters "
                                  "outside the prompt's script.")


class RewardHackingCheck(CheckConfig):
    """R34. The training reward rises while validation accuracy (always scored by each task
    type's own verifier) does not; or the reward credits what the reference verifier rejects;
    or multiple-answer / format-only rewards grow. The top-reward completions of the window
    are dumped to ``spot_check/`` for a human."""

    reward_rise: float = Field(0.1, gt=0, le=MAX_COEF,
        description="Training reward_mean rise (mean of the last window minus mean of the window "
        "before) that counts as rising ...")
    val_tolerance: float = Field(0.0, ge=0, le=MAX_COEF,
        description="... while validation pass@1 changed by at most this much over the same steps.")
    max_audit_rejected: float = Field(0.05, ge=0, le=1, description="Alert when more than "
                                      "this share of the completions the training reward "
                                      "credits are rejected by the task type's own verifier "
                                      "over the window (audited only when `reward.verifiers` "
                                      "overrides one) ...")
    min_audited: int = Field(8, ge=1, le=MAX_ROWS,
        description="... once at least this many credited completions were audited in the window.")
    max_gaming_rise: float = Field(0.15, gt=0, le=1, description="Alert when the share of "
                                   "multiple-answer plus format-only-rewarded completions "
                                   "rose by this much since the first window.")


class OverfittingCheck(CheckConfig):
    """R32. Validation pass@1 rose and then fell."""

    drop: float = Field(0.05, gt=0, le=1, description="Alert when validation pass@1 is this "
                        "far below its best so far (the best being above the first).")


class OffPolicyCheck(CheckConfig):
    """The sampler and the trainer disagree about the sampled tokens (``rollout_logprob_gap``)
    or an off-policy correction drops many of them (``is_masked_fraction``)."""

    max_logprob_gap: float = Field(0.3, gt=0, le=MAX_COEF,
        description="Alert when rollout_logprob_gap (mean |log pi_trainer - log pi_sampler|, "
        "nats/token) exceeds this: 2x an int8 sampler's gap on the default model; a "
        "synchronous fp32 run's is ~1e-6 ...")
    max_masked_fraction: float = Field(0.1, ge=0, le=1,
        description="... or when is_masked_fraction (tokens the `mis`, `icepop` or "
        "`decoupled` correction dropped) exceeds this.")


class HealthConfig(_Section):
    """All health checks of a GRPO run; see each check's fields."""

    enabled: bool = Field(True, description="Run the checks (metrics are logged regardless).")
    window: int = Field(10, ge=2, le=MAX_STEPS,
        description="Steps in the rolling window that baselines and category statistics use.")
    min_history: int = Field(5, ge=1, le=MAX_STEPS,
        description="Steps of history a trend check needs before it can alert (since the start or "
        "the last rollback).")
    cooldown: int = Field(10, ge=0, le=MAX_STEPS,
        description="Steps after an alert during which the same check does not alert again (a "
        "rollback ends every cooldown: the restored policy is judged afresh).")
    rollback_lr_factor: float = Field(0.5, gt=0, le=1, description="Learning-rate multiplier "
                                      "applied at each rollback (cumulative).")
    rollback_margin: int = Field(3, ge=0, le=MAX_STEPS,
        description="A rollback restores the newest checkpoint at least this many steps older than "
        "the alert (an anomaly builds up for a few steps before a check fires); with none, the "
        "model that entered GRPO.")
    max_rollbacks: int = Field(2, ge=0, le=MAX_REPEATS,
        description="Rollbacks allowed; the next one stops the run.")
    repeat_rollback: Literal["stop", "rollback"] = Field(
        "stop", description="A rollback that would restore a state no newer than the previous "
        "rollback's (the checkpoint it restored, or one written since that holds no newer "
        "policy: the policy broke again from the same point although the learning rate was "
        "lowered): `stop` ends the run (exit 3; the message names the checkpoint, the step of "
        "the earlier rollback and the learning rate), `rollback` restores it again and lowers "
        "the learning rate once more (up to `max_rollbacks`).")
    spot_check_top_k: int = Field(8, ge=0, le=MAX_BATCH,
        description="Top-reward completions of the window written to spot_check/step-N.jsonl at "
        "each validation and with each reward_hacking alert (R34).")
    nonfinite: NonFiniteCheck = Field(
        default_factory=NonFiniteCheck,
        description="Non-finite log-probs, advantages, loss or gradients (R38): the update is "
        "always skipped; this reports it.")
    reward_collapse: RewardCollapseCheck = Field(
        default_factory=RewardCollapseCheck,
        description="The step's mean reward falls far below its recent average (R21).")
    kl_spike: KLSpikeCheck = Field(
        default_factory=KLSpikeCheck,
        description="KL to the reference jumps (R21, R37; only when the KL term is on).")
    length_inflation: LengthInflationCheck = Field(
        default_factory=LengthInflationCheck,
        description="Completions grow or hit the length cap (R36).")
    zero_variance: ZeroVarianceCheck = Field(
        default_factory=ZeroVarianceCheck,
        description="Too many groups whose completions all got the same reward (R35).")
    format_errors: FormatErrorCheck = Field(
        default_factory=FormatErrorCheck,
        description="The share of completions without the required answer format jumps.")
    format_collapse: FormatCollapseCheck = Field(
        default_factory=FormatCollapseCheck,
        description="The answer format breaks within a step or two (an exploding policy).")
    entropy_jump: EntropyJumpCheck = Field(
        default_factory=EntropyJumpCheck,
        description="The rollout's per-token entropy jumps (the distribution blown flat).")
    validation_collapse: ValidationCollapseCheck = Field(
        default_factory=ValidationCollapseCheck,
        description="A validation during GRPO falls far below the one before GRPO.")
    verifier_errors: VerifierErrorCheck = Field(
        default_factory=VerifierErrorCheck,
        description="Verifier failures (raised, no valid verdict, timed out) above a share.")
    category_bias: CategoryBiasCheck = Field(
        default_factory=CategoryBiasCheck,
        description="A category's parse-failure or zero-reward rate stands out from the others "
        "(R10).")
    degeneration: DegenerationCheck = Field(
        default_factory=DegenerationCheck,
        description="Repetition loops, garbled characters, language mixing (R37).")
    reward_hacking: RewardHackingCheck = Field(
        default_factory=RewardHackingCheck,
        description="Training reward rises while validation does not, or the reward credits what "
        "the reference verifier rejects (R34).")
    off_policy: OffPolicyCheck = Field(
        default_factory=OffPolicyCheck,
        description="Sampler / trainer log-prob gap or the corrections' masked fraction too "
        "large (docs/guides/async.md#off-policy-corrections).")
    overfitting: OverfittingCheck = Field(
        default_factory=OverfittingCheck,
        description="Validation pass@1 rose and then fell (R32).")

    def check_config(self, name: str) -> CheckConfig:
        """The config of the check called ``name``."""
        return getattr(self, name)

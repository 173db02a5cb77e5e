"""Configuration of the reward pipeline. The field docs are the user documentation."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from rlvr.configio import ConfigModel
from rlvr.limits import MAX_COEF, MAX_TIMEOUT_S, MAX_WORKERS
from rlvr.registry import did_you_mean, load_plugins
from rlvr.rewards.registry import FORMAT_RULES, REWARD_AGGREGATORS, VERIFIERS

# The components the pipeline itself computes (a verifier may add its own, e.g. a rubric's).
BUILTIN_COMPONENTS = ("outcome", "format", "process")


def _did_you_mean(name: str, known) -> str:
    return did_you_mean(name, list(known), cutoff=0.75)


class RewardConfig(ConfigModel):
    """How completions are scored (R1-R3, R8).

    Example (YAML, under ``reward:`` in a run config)::

        weights: {outcome: 1.0, format: 0.1}
        format_rule: {math: hash_line}
        timeout_s: 2.0
        verifier_options: {math: {allow_last_number: false}}
    """

    model_config = ConfigDict(extra="forbid")

    weights: dict[str, float] = Field(
        default_factory=lambda: {"outcome": 1.0, "format": 0.1},
        description=(
            "Weight of each reward component in the aggregated reward (finite numbers, "
            "at most 1e6 in absolute value). "
            "`outcome` (R3, 1.0/0.0) must outweigh all other weights together in absolute "
            "value, so that a wrong answer in perfect format always scores below a right "
            "answer in any format. `format` (R2) "
            "defaults to 0.1 (the documents' range is 0.05-0.2). `process` (R4, off by "
            "default) is the share of the completion's written calculation steps that are "
            "right, in [0, 1] (`48/2 = 24`, GSM8K `<<48/2=24>>`; math tasks only; see "
            "`rlvr.rewards.process`); a completion that writes no calculation scores 0. "
            "Example: `{outcome: 1.0, format: 0.1, process: 0.2}`."
        ),
    )
    aggregator: str = Field(
        "weighted_sum",
        description=f"Name of the reward aggregator, {REWARD_AGGREGATORS.one_of()} "
        "(`outcome_gated`: format counts only when the answer is right).",
    )
    format_rule: dict[str, str] = Field(
        default_factory=dict,
        description=f"Task type -> format rule name, {FORMAT_RULES.one_of()}. Unlisted task "
        "types use their verifier's default rule (math: `marked_answer`).",
    )
    format_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Task type -> keyword options of its format rule, e.g. "
        "`{json: {required_keys: [answer]}}` or `{logic: {pattern: '...'}}`.",
    )
    verifier_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Task type -> keyword options of its verifier, e.g. "
        "`{math: {allow_last_number: true}}`.",
    )
    verifiers: dict[str, str] = Field(
        default_factory=dict,
        description="Task type -> name of another registered verifier that scores it in "
        "training (default: the verifier registered under the task type's own name; "
        f"{VERIFIERS.one_of()}). "
        "Validation, pass@k and the reward audit of `health.reward_hacking` always use the task "
        "type's own verifier, so a lenient or buggy training verifier shows up as a gap between "
        "training reward and validation accuracy instead of silently teaching the policy.",
    )
    timeout_s: float = Field(
        2.0,
        gt=0, le=MAX_TIMEOUT_S,
        description="Wall-time bound of one verifier call in seconds (code tasks add their own "
        "sandbox limits on top). A call that exceeds it gets status `timeout` and reward 0.",
    )
    timeout_overrides_s: dict[str, float] = Field(
        default_factory=lambda: {"code": 75.0},
        description="Task type -> verifier wall-time bound in seconds (in (0, 86400]), "
        "overriding `timeout_s`. "
        "Task types whose verifier registers its own bound keep it unless listed here: "
        "`reasoning_gym` 60 s and `verifiers` 60 s (a worker's first call imports the library, "
        "1-7 s / ~6 s, and loads the environment; a reasoning-gym call outside the reward "
        "pipeline's batches may also start a sandbox).",
    )
    workers: int = Field(
        1,
        ge=0, le=MAX_WORKERS,
        description="Verifier worker processes. Every call runs in a worker so that a timeout "
        "can kill it; 0 runs verifiers in the calling process with no hard time bound "
        "(debugging only).",
    )

    plugins: list[str] = Field(
        default_factory=list,
        description="Python modules to import, in the trainer and in every verifier worker, "
        "so that the task types, format rules and aggregators they register "
        "(`@register_verifier(...)`) can be used by name.",
    )

    @field_validator("weights")
    @classmethod
    def _outcome_dominates(cls, weights: dict[str, float]) -> dict[str, float]:
        for name, w in weights.items():
            if not math.isfinite(w):
                raise ValueError(f"weights.{name}: {w!r} is not a finite number")
            if abs(w) > MAX_COEF:
                raise ValueError(f"weights.{name}: {w:g} is out of range (at most {MAX_COEF:g} "
                                 f"in absolute value)")
        outcome = weights.get("outcome", 0.0)
        if outcome <= 0:
            raise ValueError("weights.outcome must be > 0: the outcome reward is the signal")
        # A negative weight moves the reward as much as a positive one: format -5 makes a
        # right answer in perfect format score below a wrong one without it.
        others = sum(abs(w) for name, w in weights.items() if name != "outcome")
        if others >= outcome:
            raise ValueError(
                f"weights: non-outcome components sum to {others:g} in absolute value >= "
                f"outcome {outcome:g}; a wrong answer could tie or beat a right one (R2)"
            )
        return weights

    @field_validator("weights")
    @classmethod
    def _no_misspelt_component(cls, weights: dict[str, float]) -> dict[str, float]:
        for name in weights:
            # a verifier's own components may have any name; one a letter or two away from a
            # built-in one is a typo that would silently weigh nothing
            hint = _did_you_mean(name, BUILTIN_COMPONENTS)
            if name not in BUILTIN_COMPONENTS and hint:
                raise ValueError(f"weights.{name}: not a reward component{hint}")
        return weights

    @field_validator("timeout_overrides_s")
    @classmethod
    def _positive_timeouts(cls, timeouts: dict[str, float]) -> dict[str, float]:
        for task_type, seconds in timeouts.items():
            if seconds <= 0:  # as timeout_s (gt=0): 0 s would time every call out
                raise ValueError(f"{task_type}: expected seconds > 0, got {seconds:g}")
            if seconds > MAX_TIMEOUT_S:
                raise ValueError(f"{task_type}: expected seconds <= {MAX_TIMEOUT_S:g} (one "
                                 f"day), got {seconds:g}")
        return timeouts

    @model_validator(mode="after")
    def _names_exist(self) -> RewardConfig:
        try:
            load_plugins(self.plugins)
        except ImportError as exc:
            raise ValueError(f"plugins: cannot import {exc.name or exc}") from None
        REWARD_AGGREGATORS.check(self.aggregator, "aggregator")
        for task_type, name in self.verifiers.items():
            VERIFIERS.check(name, f"verifiers.{task_type}")
        for field in ("format_rule", "format_options", "verifiers", "timeout_overrides_s"):
            for task_type in getattr(self, field):
                # a task type with no verifier is a typo: its setting would apply to nothing
                VERIFIERS.check(task_type, f"{field}.{task_type}")
        for task_type, options in self.verifier_options.items():
            _check_verifier_options(task_type, self.verifiers.get(task_type, task_type), options)
        for task_type, rule in self.format_rule.items():
            FORMAT_RULES.check(rule, f"format_rule.{task_type}")
        return self

    def reference_config(self) -> RewardConfig:
        """This config with every ``verifiers`` override removed: each task type scored by its
        own registered verifier (what validation and the reward audit use)."""
        return self.model_copy(update={"verifiers": {}})

    def timeout_for(self, task_type: str) -> float:
        """Wall-time bound in seconds of one verifier call for ``task_type``: its override,
        else the bound its verifier registered (``register_verifier(..., timeout_s=)``), else
        ``timeout_s``."""
        if task_type in self.timeout_overrides_s:
            return self.timeout_overrides_s[task_type]
        own = VERIFIERS.meta(task_type).timeout_s if task_type in VERIFIERS else None
        return self.timeout_s if own is None else own


def _check_verifier_options(task_type: str, verifier: str, options: dict[str, Any]) -> None:
    """``ValueError`` naming ``verifier_options.<task_type>.<key>`` for a task type with no
    verifier, or an option its verifier does not have (with the closest name) or whose value
    is not of its default's type (bool / int / float / str)."""
    VERIFIERS.check(verifier, f"verifier_options.{task_type}")
    schema = VERIFIERS.meta(verifier).options
    if schema is None:
        return
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for key, value in options.items():
        if key not in fields:
            raise ValueError(f"verifier_options.{task_type}.{key}: not an option of the "
                             f"{verifier} verifier{_did_you_mean(key, fields)} (options: "
                             f"{sorted(fields)})")
        default = fields[key].default
        kind = type(default) if default is not dataclasses.MISSING else None
        ok = (kind is None or (kind is bool and isinstance(value, bool))
              or (kind is int and isinstance(value, int) and not isinstance(value, bool))
              or (kind is float and isinstance(value, (int, float))
                  and not isinstance(value, bool))
              or (kind not in (bool, int, float) and isinstance(value, kind)))
        if not ok:
            raise ValueError(f"verifier_options.{task_type}.{key}: expected {kind.__name__}, "
                             f"got {value!r}")

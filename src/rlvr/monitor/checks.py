"""The health checks (R10, R21, R32, R34-R38): small pure functions in a registry.

A check reads a :class:`CheckContext` (the metrics history, the completions of the last window,
the validation history) and its own config section, and returns a :class:`Finding` or
``None``. It never acts: :class:`rlvr.monitor.health.HealthMonitor` turns findings into alerts
and the run applies the configured action. A new check is one decorated function plus a config
section in :class:`rlvr.monitor.config.HealthConfig`::

    @health_check("my_check")
    def my_check(ctx: CheckContext, cfg) -> Finding | None: ...
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr.monitor.degeneration import (
    dominant_script,
    garbled_share,
    repetition_rate,
    script_mix_share,
)
from rlvr.monitor.reward_fall import (
    category_expected_reward,
    fall_in_standard_errors,
    mean,
    proportion_fall_in_standard_errors,
)
from rlvr.rewards.summary import is_measured


@dataclass(frozen=True)
class CompletionRecord:
    """One completion of the recent window, as the checks see it.

    Attributes:
        step: GRPO step.
        category: the task's category, else its source (R10).
        difficulty: the task's difficulty tier, or ``None``.
        status: reward status (``correct``, ``wrong``, ``unparsed`` ...).
        reward: aggregated training reward.
        outcome: the outcome component in [0, 1].
        text: the completion.
        prompt: the task's question (for the script of the prompt).
        audit: the task type's own verifier's status when the training verifier is
            overridden and credited this completion, else ``None``.
    """

    step: int
    category: str
    difficulty: str | None
    status: str
    reward: float
    outcome: float
    text: str
    prompt: str = ""
    audit: str | None = None


@dataclass
class CheckContext:
    """What a check may read.

    Attributes:
        step: the current GRPO step.
        history: metric rows (``metrics.jsonl`` rows) since the start of GRPO or the last
            rollback, oldest first; the current step's row is last.
        rows: completions of the last ``window`` steps (current step included).
        validation: validation rows during GRPO (``before_grpo``, ``grpo`` ...), oldest first:
            ``step``, ``label``, ``pass_at_1`` and (rows recorded since the collapse checks)
            ``format_rate``, ``mean_reward``.
        window: rolling window in steps; min_history: steps a trend check needs.
    """

    step: int
    history: list[dict]
    rows: list[CompletionRecord]
    validation: list[dict]
    window: int
    min_history: int

    @property
    def current(self) -> dict:
        return self.history[-1]

    def previous(self, key: str) -> list[float]:
        """``key`` over the ``window`` steps before the current one (rows that have it)."""
        return [r[key] for r in self.history[-1 - self.window:-1] if r.get(key) is not None]


@dataclass(frozen=True)
class Finding:
    """A check's result: what it saw. ``force_action`` overrides the configured action
    (e.g. too many non-finite steps in a row always stop the run)."""

    message: str
    value: float | None = None
    threshold: float | None = None
    examples: list[str] = field(default_factory=list)
    force_action: str | None = None


Check = Callable[[CheckContext, object], "Finding | None"]
HEALTH_CHECKS: dict[str, Check] = {}
#: checks that report every occurrence (no cooldown)
NO_COOLDOWN: set[str] = set()


def health_check(name: str, *, cooldown: bool = True) -> Callable[[Check], Check]:
    """Register a check under ``name`` (the name of its section in ``health:``).

    Raises:
        ValueError: ``name`` is already registered.
    """

    def decorator(fn: Check) -> Check:
        if name in HEALTH_CHECKS:
            raise ValueError(f"health check {name!r} is already registered")
        HEALTH_CHECKS[name] = fn
        if not cooldown:
            NO_COOLDOWN.add(name)
        return fn

    return decorator


def _clip(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n] + " ..."


# -- step-level checks -----------------------------------------------------------------------
@health_check("nonfinite", cooldown=False)
def nonfinite(ctx: CheckContext, cfg) -> Finding | None:
    """R38: the step's update was skipped for a non-finite value; N in a row stop the run."""
    cur = ctx.current
    if not cur.get("update_skipped_nonfinite"):
        return None
    run = 0
    for row in reversed(ctx.history):
        if not row.get("update_skipped_nonfinite"):
            break
        run += 1
    where = ", ".join(k.removeprefix("nonfinite_") for k in sorted(cur)
                      if k.startswith("nonfinite_") and cur[k]) or "values"
    message = (f"non-finite {where}: update skipped, the policy is unchanged this step "
               f"({run} in a row, {cfg.max_consecutive} stop the run)")
    force = "stop" if run >= cfg.max_consecutive else None
    return Finding(message, value=run, threshold=cfg.max_consecutive, force_action=force)


@health_check("reward_collapse")
def reward_collapse(ctx: CheckContext, cfg) -> Finding | None:
    """R21: reward_mean < (1 - drop) x the previous window's mean, by at least min_drop and
    by at least min_z standard errors of the fall (:mod:`rlvr.monitor.reward_fall`).

    When the window's completions span several categories, "the previous window's mean" is
    what the previous steps scored *on this step's categories* (each of this step's
    completions counts the recent mean reward of its own category): a step that happened to
    draw mostly hard problems scores low without anything having collapsed (a run that
    weights its hardest category, ``data.train_mixture``, draws such steps often)."""
    prev = ctx.previous("reward_mean")
    if len(prev) < ctx.min_history:
        return None
    base, cur = mean(prev), ctx.current.get("reward_mean")
    if cur is None:
        return None
    expected = category_expected_reward(ctx.rows, ctx.step)
    what = f"mean of the previous {len(prev)} steps"
    if expected is not None:
        base = expected
        what = f"what the previous {len(prev)} steps scored on this step's categories"
    if cur >= (1 - cfg.drop) * base or base - cur < cfg.min_drop:
        return None
    errors = fall_in_standard_errors(ctx.rows, ctx.history, base, (1 - cfg.drop) * base)
    if errors is not None and errors < cfg.min_z:  # the luck of the draw (reward_fall)
        return None
    return Finding(f"mean reward fell to {cur:.3f} from {base:.3f} ({what})", value=cur,
                   threshold=(1 - cfg.drop) * base)


@health_check("kl_spike")
def kl_spike(ctx: CheckContext, cfg) -> Finding | None:
    """R21/R37: kl > max_kl, or kl > factor x the previous window's mean and > min_kl."""
    kl = ctx.current.get("kl")
    if kl is None:
        return None
    if kl > cfg.max_kl:
        return Finding(f"KL to the reference is {kl:.3f} nats/token (> {cfg.max_kl})",
                       value=kl, threshold=cfg.max_kl)
    prev = ctx.previous("kl")
    if len(prev) >= ctx.min_history:
        base = mean(prev)
        if kl > cfg.factor * base and kl > cfg.min_kl:
            return Finding(f"KL jumped to {kl:.4f} from a recent mean of {base:.4f} nats/token",
                           value=kl, threshold=cfg.factor * base)
    return None


def _slope(values: list[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    x_mean, y_mean = (n - 1) / 2, mean(values)
    num = sum((i - x_mean) * (v - y_mean) for i, v in enumerate(values))
    return num / sum((i - x_mean) ** 2 for i in range(n))


@health_check("length_inflation")
def length_inflation(ctx: CheckContext, cfg) -> Finding | None:
    """R36: mean length of the last window > ratio x the first window's and rising; or the
    truncation rate of the last 3 steps > max_truncation and 0.1 above the first window's."""
    w = ctx.window
    hist = [r for r in ctx.history if r.get("length_mean") is not None]
    if len(hist) < w + ctx.min_history:
        return None
    first, recent = hist[:w], hist[max(w, len(hist) - w):]
    base = mean([r["length_mean"] for r in first])
    lengths = [r["length_mean"] for r in recent]
    if mean(lengths) > cfg.ratio * base and _slope(lengths) > 0:
        return Finding(f"completions are growing: mean length {mean(lengths):.1f} tokens over "
                       f"the last {len(recent)} steps vs {base:.1f} in the first {w} (still "
                       f"rising {_slope(lengths):+.1f} tokens/step)", value=mean(lengths),
                       threshold=cfg.ratio * base, examples=_longest(ctx))
    trunc = mean([r.get("truncation_rate", 0.0) for r in hist[-3:]])
    trunc_base = mean([r.get("truncation_rate", 0.0) for r in first])
    if trunc > cfg.max_truncation and trunc > trunc_base + 0.1:
        return Finding(f"{trunc:.0%} of completions hit the length cap (first {w} steps: "
                       f"{trunc_base:.0%})", value=trunc, threshold=cfg.max_truncation,
                       examples=_longest(ctx))
    return None


def _longest(ctx: CheckContext) -> list[str]:
    rows = sorted((r for r in ctx.rows if r.step == ctx.step), key=lambda r: -len(r.text))
    return [_clip(r.text) for r in rows[:3]]


@health_check("zero_variance")
def zero_variance(ctx: CheckContext, cfg) -> Finding | None:
    """R35: the zero-variance group fraction (mean of the last 3 steps) >= max_fraction, or
    one reward for every completion of the batch for constant_steps steps."""
    last = ctx.history[-cfg.constant_steps:]
    if len(last) == cfg.constant_steps and all(r.get("reward_std", 1) == 0 for r in last):
        value = ctx.current.get("reward_mean", 0.0)
        return Finding(f"every completion got reward {value:g} for {len(last)} steps in a row: "
                       "the reward function looks constant, no gradient signal",
                       value=0.0, threshold=0.0)
    recent = [r["zero_variance_fraction"] for r in ctx.history[-3:]
              if r.get("zero_variance_fraction") is not None]
    if len(recent) == 3 and mean(recent) >= cfg.max_fraction:
        tiers = {k.split("/", 1)[1]: v for k, v in ctx.current.items()
                 if k.startswith("zero_variance_fraction/")}
        by_tier = ("; by tier: " + ", ".join(f"{t} {v:.0%}" for t, v in sorted(tiers.items()))
                   if tiers else "")
        return Finding(f"{mean(recent):.0%} of groups had zero reward variance over the last 3 "
                       f"steps (all right or all wrong: no learning signal){by_tier}",
                       value=mean(recent), threshold=cfg.max_fraction)
    return None


@health_check("format_errors")
def format_errors(ctx: CheckContext, cfg) -> Finding | None:
    """Format error rate > previous window's mean + rise, and >= min_rate."""
    prev = ctx.previous("format_error_rate")
    if len(prev) < ctx.min_history:
        return None
    cur, base = ctx.current.get("format_error_rate"), mean(prev)
    if cur is None:
        return None
    if cur > base + cfg.rise and cur >= cfg.min_rate:
        bad = [_clip(r.text) for r in ctx.rows if r.step == ctx.step and r.status == "unparsed"]
        return Finding(f"{cur:.0%} of completions miss the answer format (recent mean "
                       f"{base:.0%})", value=cur, threshold=base + cfg.rise, examples=bad[:3])
    return None


@health_check("format_collapse")
def format_collapse(ctx: CheckContext, cfg) -> Finding | None:
    """format_error_rate >= max_rate and >= rise above the mean of the previous steps (at
    least one): the step a broken policy first samples, whether or not any row trains."""
    prev = ctx.previous("format_error_rate")
    cur = ctx.current.get("format_error_rate")
    if not prev or cur is None:
        return None
    base = mean(prev)
    if cur >= cfg.max_rate and cur - base >= cfg.rise:
        bad = [_clip(r.text) for r in ctx.rows if r.step == ctx.step and r.status == "unparsed"]
        return Finding(f"the answer format collapsed: {cur:.0%} of completions miss it (mean "
                       f"of the previous {len(prev)} steps {base:.0%})", value=cur,
                       threshold=max(cfg.max_rate, base + cfg.rise), examples=bad[:3])
    return None


@health_check("entropy_jump")
def entropy_jump(ctx: CheckContext, cfg) -> Finding | None:
    """rollout_entropy (nats/token of the sampled tokens) > factor x the mean of the previous
    steps (at least one) and above it by min_rise: measured on every completion, so it fires
    when no row trains and KL is not measured."""
    prev = ctx.previous("rollout_entropy")
    cur = ctx.current.get("rollout_entropy")
    if not prev or cur is None:
        return None
    base = mean(prev)
    if cur > cfg.factor * base and cur - base >= cfg.min_rise:
        rows = [r for r in ctx.rows if r.step == ctx.step]
        return Finding(f"the policy's entropy jumped to {cur:.2f} nats/token from {base:.2f} "
                       f"(mean of the previous {len(prev)} steps): the sampling distribution "
                       f"has been flattened (learning rate too high?)", value=cur,
                       threshold=max(cfg.factor * base, base + cfg.min_rise),
                       examples=[_clip(r.text) for r in rows[:3]])
    return None


@health_check("verifier_errors")
def verifier_errors(ctx: CheckContext, cfg) -> Finding | None:
    """The share of the step's completions whose verifier failed (status ``error`` or
    ``timeout``) exceeds max_rate: a broken plugin or an overloaded sandbox, not the policy.
    The same for a validation of this step (its tasks' greedy completions): its pass@1 counts
    them wrong, so it measures the verifier rather than the model."""
    rows = [r for r in ctx.rows if r.step == ctx.step]
    failed = [r for r in rows if r.status in ("error", "timeout")]
    if not rows or len(failed) / len(rows) <= cfg.max_rate:
        return _validation_errors(ctx, cfg)
    rate = len(failed) / len(rows)
    return Finding(f"{rate:.0%} of completions ({len(failed)} of {len(rows)}) got a verifier "
                   f"error or timeout: their reward is 0 and they train nothing (a broken "
                   f"verifier plugin or an overloaded sandbox?)", value=rate,
                   threshold=cfg.max_rate, examples=[_clip(r.text) for r in failed[:3]])


def _validation_errors(ctx: CheckContext, cfg) -> Finding | None:
    """A validation of this step with a share of verifier errors / timeouts over max_rate."""
    val = ctx.validation[-1] if ctx.validation else None
    if val is None or val["step"] != ctx.step or not val.get("n"):
        return None
    errors, n = val.get("verifier_errors") or 0, val["n"]
    return None if errors / n <= cfg.max_rate else Finding(
        f"validation {val.get('label') or ''} (step {ctx.step}): {errors} of {n} tasks got a "
        f"verifier error or timeout; its pass@1 {val['pass_at_1']:.1%} counts them wrong and "
        f"measures the verifier, not the model (a broken verifier plugin or an overloaded "
        f"sandbox?)", value=errors / n, threshold=cfg.max_rate)


def _steps(rows: list[CompletionRecord]) -> str:
    """The steps ``rows`` span, as an alert says it: "step S" or "the last N steps" (early in
    a run the window holds fewer steps than configured)."""
    steps = {r.step for r in rows}
    return f"step {next(iter(steps))}" if len(steps) == 1 else f"the last {len(steps)} steps"


# -- completion-level checks over the window -------------------------------------------------
@health_check("category_bias")
def category_bias(ctx: CheckContext, cfg) -> Finding | None:
    """R10: a category whose parse-failure (or zero-reward) rate over the window exceeds the
    pooled rate of the other categories by parse_gap (zero_reward_gap)."""
    by_cat: dict[str, list[CompletionRecord]] = defaultdict(list)
    for r in ctx.rows:
        by_cat[r.category].append(r)
    if len(by_cat) < 2:
        return None
    worst = None
    for cat, rows in by_cat.items():
        others = [r for c, rs in by_cat.items() if c != cat for r in rs]
        if len(rows) < cfg.min_samples or not others:
            continue
        for label, pred, gap in (("parse-failure", lambda r: r.status == "unparsed", cfg.parse_gap),
                                 ("zero-reward", lambda r: r.outcome <= 0, cfg.zero_reward_gap)):
            rate = mean([float(pred(r)) for r in rows])
            rest = mean([float(pred(r)) for r in others])
            if rate - rest >= gap and (worst is None or rate - rest > worst[0]):
                examples = [f"[{r.status}] {_clip(r.text, 200)}" for r in rows if pred(r)][:3]
                worst = (rate - rest, Finding(
                    f"category {cat!r}: {label} rate {rate:.0%} over {_steps(ctx.rows)} "
                    f"vs {rest:.0%} for the other categories ({len(rows)} completions); check "
                    f"its verifier / reference format before training punishes the category",
                    value=rate, threshold=rest + gap, examples=examples))
    return worst[1] if worst else None


@health_check("degeneration")
def degeneration(ctx: CheckContext, cfg) -> Finding | None:
    """R37: the step's mean repetition, garbled-character or script-mixing share is above its
    threshold; the worst completions are the examples."""
    cur, rows = ctx.current, [r for r in ctx.rows if r.step == ctx.step]
    for key, limit, score, what in (
            ("repetition_rate", cfg.max_repetition, lambda r: repetition_rate(r.text),
             "repeated 4-grams"),
            ("garbled_rate", cfg.max_garbled, lambda r: garbled_share(r.text),
             "garbled characters"),
            ("script_mix_rate", cfg.max_script_mix,
             lambda r: script_mix_share(r.text, dominant_script(r.prompt)),
             "letters outside the prompt's script")):
        value = cur.get(key)
        if value is not None and value > limit:
            worst = sorted(rows, key=score, reverse=True)[:3]
            return Finding(f"degenerate completions: {value:.1%} {what} on average (limit "
                           f"{limit:.0%})", value=value, threshold=limit,
                           examples=[_clip(r.text) for r in worst])
    return None


@health_check("reward_hacking")
def reward_hacking(ctx: CheckContext, cfg) -> Finding | None:
    """R34: (1) credited completions that the task type's own verifier rejects; (2) training
    reward rising while validation pass@1 does not, between the last two validations; (3)
    multiple-answer + format-only-rewarded completions growing since the first window."""
    audited = [r for r in ctx.rows if r.audit is not None]
    rejected = [r for r in audited if r.audit != "correct"]
    share = len(rejected) / len(audited) if audited else 0.0
    if len(audited) >= cfg.min_audited and share > cfg.max_audit_rejected:
        bad = [f"[reward {r.reward:g}, own verifier: {r.audit}] {_clip(r.text, 200)}"
               for r in reversed(rejected)]
        return Finding(f"since step {audited[0].step} the training verifier credited "
                       f"{len(audited)} completions and the task type's own verifier rejects "
                       f"{share:.0%} of them: the reward is being gamed or is too lenient",
                       value=share, threshold=cfg.max_audit_rejected, examples=bad[:3])
    finding = _reward_vs_validation(ctx, cfg)
    if finding:
        return finding
    gaming = [r["gaming_rate"] for r in ctx.history if "gaming_rate" in r]
    if len(gaming) >= ctx.window + ctx.min_history:
        base, recent = mean(gaming[:ctx.window]), mean(gaming[-ctx.min_history:])
        if recent - base > cfg.max_gaming_rise:
            return Finding(f"multiple-answer and format-only rewards grew to {recent:.0%} of "
                           f"completions from {base:.0%}", value=recent,
                           threshold=base + cfg.max_gaming_rise)
    return None


def _reward_vs_validation(ctx: CheckContext, cfg) -> Finding | None:
    vals = ctx.validation
    if len(vals) < 2 or vals[-1]["step"] != ctx.step:
        return None  # only judged when a new validation point arrives
    v0, v1 = vals[-2], vals[-1]
    steps = {r["step"]: r["reward_mean"] for r in ctx.history if "reward_mean" in r}

    def window_mean(end: int) -> float | None:
        got = [steps[s] for s in range(end - ctx.window + 1, end + 1) if s in steps]
        return mean(got) if got else None

    first = min(steps) if steps else None
    r0 = window_mean(v0["step"]) if v0["step"] in steps else (
        window_mean(first + ctx.window - 1) if first is not None else None)
    r1 = window_mean(v1["step"])
    if r0 is None or r1 is None:
        return None
    rise, dval = r1 - r0, v1["pass_at_1"] - v0["pass_at_1"]
    if rise >= cfg.reward_rise and dval <= cfg.val_tolerance:
        return Finding(f"training reward rose {rise:+.3f} (to {r1:.3f}) between steps "
                       f"{v0['step']} and {v1['step']} while validation pass@1 moved "
                       f"{dval:+.1%} (to {v1['pass_at_1']:.1%}): the policy may be exploiting "
                       "the reward; see spot_check/", value=rise, threshold=cfg.reward_rise)
    return None


@health_check("validation_collapse")
def validation_collapse(ctx: CheckContext, cfg) -> Finding | None:
    """At a validation of this step: pass@1 or the format rate < (1 - drop) x its value in
    the validation before GRPO (the first one recorded), by at least min_drop and by at least
    min_z standard errors (:func:`~rlvr.monitor.reward_fall.proportion_fall_in_standard_errors`
    over the two validations' task counts)."""
    vals = ctx.validation
    if len(vals) < 2 or vals[-1]["step"] != ctx.step or not is_measured(
            vals[-1].get("verifier_errors") or 0, vals[-1].get("n") or 1):
        return None  # an unmeasured validation is the verifier_errors check's to report
    first, cur = vals[0], vals[-1]
    for key, what in (("pass_at_1", "pass@1"), ("format_rate", "format rate")):
        base, now = first.get(key), cur.get(key)
        if base is None or now is None:
            continue
        if (now < (1 - cfg.drop) * base and base - now >= cfg.min_drop
                and proportion_fall_in_standard_errors(
                    base, now, first.get("n") or 1, cur.get("n") or 1) >= cfg.min_z):
            return Finding(f"validation {what} collapsed to {now:.1%} from {base:.1%} before "
                           f"GRPO (step {first['step']})", value=now,
                           threshold=min((1 - cfg.drop) * base, base - cfg.min_drop))
    return None


@health_check("overfitting")
def overfitting(ctx: CheckContext, cfg) -> Finding | None:
    """R32: validation pass@1 rose above its first value and then fell by more than drop."""
    vals = ctx.validation
    if len(vals) < 3 or vals[-1]["step"] != ctx.step:
        return None
    scores = [v["pass_at_1"] for v in vals]
    best = max(range(len(scores)), key=lambda i: scores[i])
    if scores[best] > scores[0] and scores[best] - scores[-1] > cfg.drop:
        return Finding(f"validation pass@1 fell to {scores[-1]:.1%} from its best "
                       f"{scores[best]:.1%} at step {vals[best]['step']}", value=scores[-1],
                       threshold=scores[best] - cfg.drop)
    return None

"""The health monitor of a GRPO run: turns each step's completions into health metrics, keeps
the rolling window the checks read, runs the checks and emits alerts (R10, R21, R32, R34-R38).

Per step, the GRPO loop (:mod:`rlvr.train.loop`, through :class:`rlvr.train.hooks.HealthHook`)
calls::

    metrics.update(monitor.observe(step, batch))     # degeneration, per-category, audit ...
    alerts = monitor.check(step, metrics)            # after any validation of this step
    # the run applies strongest(alerts).action: warn / rollback / stop

The monitor's state (``state_dict``) is part of every checkpoint, so a resumed run raises the
same alerts as an uninterrupted one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from rlvr.io import atomic_write, json_text, make_dirs, record_output
from rlvr.monitor import off_policy  # noqa: F401  (registers its check)
from rlvr.monitor.alerts import Alert, AlertLog
from rlvr.monitor.checks import HEALTH_CHECKS, NO_COOLDOWN, CheckContext, CompletionRecord
from rlvr.monitor.config import HealthConfig
from rlvr.monitor.degeneration import degeneration_metrics
from rlvr.monitor.reward_fall import mean
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest


def _std(values) -> float:
    values = list(values)
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5


class HealthMonitor:
    """Runs the health checks of one run.

    Args:
        config: the ``health`` section.
        run_dir: where ``alerts.jsonl`` and ``spot_check/`` go.
        audit: the reward pipeline with each task type's own verifier, used to re-check the
            completions the training reward credits; ``None`` when training uses those same
            verifiers (nothing to audit).
        print_fn: console printer.

    Attributes:
        rollback_target: set by the run: ``fn(step) -> (checkpoint name, its step)``, the
            checkpoint a rollback at ``step`` would restore; with it a rollback to a state no
            newer than the previous rollback's is a repeat (``health.repeat_rollback``).
        rollback_log: the rollbacks done, oldest first: ``{"step", "check", "to", "to_step",
            "lr"}`` (alert step, the check, the checkpoint restored, its step, the learning
            rate after the rollback).
    """

    def __init__(self, config: HealthConfig, run_dir: Path, audit: RewardPipeline | None = None,
                 print_fn=print):
        self.config, self.run_dir, self.audit = config, Path(run_dir), audit
        self.log = AlertLog(self.run_dir / "alerts.jsonl", print_fn)
        created = make_dirs(self.log.path.parent)
        self.log.path.touch()  # an empty file means "checked, no alerts"
        record_output(self.log.path, created)
        self.history: list[dict] = []
        self.rows: list[CompletionRecord] = []
        self.validation: list[dict] = []
        self.last_alert: dict[str, int] = {}
        self.rollbacks = 0
        self.rollback_log: list[dict] = []
        self.rollback_target: Callable[[int], tuple[str, int]] | None = None

    # -- per step -----------------------------------------------------------------------------
    def observe(self, step: int, batch) -> dict[str, float]:
        """Health metrics of a step's completions (added to its metrics row) and the window.

        Args:
            batch: a :class:`rlvr.train.batch.StepRollouts` (tasks, rollout.prompt_index,
                texts, results, rewards, zero_variance; ``scored_texts`` when present, for
                the audit).

        Returns: ``repetition_rate``, ``garbled_rate``, ``script_mix_rate``,
            ``repetitive_fraction``, ``gaming_rate`` (share of multiple-answer or format-only
            rewarded completions); per category (R10, when there are several):
            ``reward_mean/<c>``, ``reward_std/<c>``, ``parse_failure_rate/<c>``; per difficulty
            tier (R35, when there are several) ``zero_variance_fraction/<tier>``; with an audit,
            ``audit_credited`` (count) and ``audit_rejected_rate``.
        """
        index = batch.rollout.prompt_index.tolist()
        tasks = [batch.tasks[i] for i in index]
        # the audit re-scores what the training verifier judged (an episode: its final answer,
        # not the whole trajectory in ``texts``)
        audit = self._audit(tasks, getattr(batch, "scored_texts", batch.texts), batch.results)
        records = [CompletionRecord(step, t.category or t.source, t.difficulty, r.status.value,
                                    float(r.reward), float(r.components.get("outcome", 0.0)),
                                    text, t.prompt, a)
                   for t, text, r, a in zip(tasks, batch.texts, batch.results, audit)]
        self.rows = [r for r in self.rows if r.step > step - self.config.window] + records
        metrics = degeneration_metrics(batch.texts, [t.prompt for t in tasks])
        metrics["gaming_rate"] = mean(r.status == "multiple_answers" or
                                       (r.reward > 0 and r.outcome <= 0) for r in records)
        metrics.update(_by_category(records))
        metrics.update(_zero_variance_by_tier(batch.tasks, batch.zero_variance.tolist()))
        credited = [a for a in audit if a is not None]
        if credited:
            metrics["audit_credited"] = float(len(credited))
            metrics["audit_rejected_rate"] = mean(a != "correct" for a in credited)
        return metrics

    def observe_validation(self, row: dict) -> None:
        """Record a validation row (``step``, ``pass_at_1`` ...) for the validation checks and
        write the spot-check dump of the window's top-reward completions (R34)."""
        self.validation.append({"step": row["step"], "pass_at_1": row["pass_at_1"],
                                "label": row.get("label"),
                                "format_rate": row.get("format_rate"),
                                "mean_reward": row.get("mean_reward"),
                                "n": row.get("n"),
                                "verifier_errors": row.get("verifier_errors", 0)})
        if row["step"] > 0:
            self.spot_check(row["step"])

    def check(self, step: int, metrics: dict) -> list[Alert]:
        """Append the step's metrics to the history, run every enabled check, emit alerts.

        Returns the alerts of this step (their ``action`` already resolved: the configured one,
        or a check's forced one; a rollback beyond ``max_rollbacks``, or with
        ``repeat_rollback: stop`` one that would restore a state no newer than the previous
        rollback's, becomes ``stop``, its message saying why)."""
        self.history.append(dict(metrics, step=step))
        if not self.config.enabled:
            return []
        ctx = CheckContext(step, self.history, self.rows, self.validation,
                           self.config.window, self.config.min_history)
        alerts = []
        for name, check in HEALTH_CHECKS.items():
            cfg = self.config.check_config(name)
            if not cfg.enabled or self._cooling(name, step):
                continue
            finding = check(ctx, cfg)
            if finding is None:
                continue
            action = finding.force_action or cfg.action
            refusal = self._refuse_rollback(step) if action == "rollback" else None
            if refusal:
                action = "stop"
                finding = replace(finding, message=f"{finding.message} ({refusal})")
            alert = Alert(step, name, action, finding.message, finding.value,
                          finding.threshold, finding.examples)
            self.last_alert[name] = step
            self.log.emit(alert)
            alerts.append(alert)
            if name == "reward_hacking":
                self.spot_check(step)
        return alerts

    def _refuse_rollback(self, step: int) -> str | None:
        """Why a rollback at ``step`` must stop the run instead, or None."""
        if self.rollbacks >= self.config.max_rollbacks:
            return f"rollback limit {self.config.max_rollbacks} reached: stopping"
        if (self.config.repeat_rollback != "stop" or not self.rollback_log
                or self.rollback_target is None):
            return None
        last = self.rollback_log[-1]
        name, to_step = self.rollback_target(step)
        if to_step > last["step"]:
            return None  # the policy got past the restored state and was checkpointed
        lr = f" with the learning rate lowered to {last['lr']:.3g}" if last.get("lr") else ""
        return (f"the policy broke again after the rollback at step {last['step']} to "
                f"{last.get('to') or 'a checkpoint'}{lr}; a rollback now would restore {name}, "
                f"no newer than that state: stopping; lower grpo.learning_rate, or set "
                f"health.repeat_rollback: rollback to lower it again")

    def _cooling(self, name: str, step: int) -> bool:
        last = self.last_alert.get(name)
        return (name not in NO_COOLDOWN and last is not None
                and step - last <= self.config.cooldown)

    # -- actions and dumps ----------------------------------------------------------------------
    def after_rollback(self, step: int, check: str | None = None, to: str | None = None,
                       to_step: int | None = None, lr: float | None = None) -> None:
        """Forget the baselines and end every cooldown: the restored policy starts a new
        history and is judged afresh. Records the rollback (alert ``step``, the ``check``,
        the checkpoint restored ``to`` / ``to_step``, the learning rate ``lr`` after it) in
        :attr:`rollback_log`."""
        self.rollbacks += 1
        self.history, self.rows, self.last_alert = [], [], {}
        self.rollback_log.append({"step": step, "check": check, "to": to, "to_step": to_step,
                                  "lr": lr})

    def spot_check(self, step: int) -> Path | None:
        """Write the ``spot_check_top_k`` highest-reward completions of the window to
        ``spot_check/step-NNNNNN.jsonl`` (atomically) for a human to read (R34)."""
        k = self.config.spot_check_top_k
        if not k or not self.rows:
            return None
        top = sorted(self.rows, key=lambda r: (-r.reward, r.step))[:k]
        path = self.run_dir / "spot_check" / f"step-{step:06d}.jsonl"
        with atomic_write(path) as f:
            for r in top:
                f.write(json_text(asdict(r)) + "\n")
        return path

    # -- checkpointing --------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """JSON-serialisable state for a checkpoint."""
        return {"history": self.history, "rows": [asdict(r) for r in self.rows],
                "validation": self.validation, "last_alert": self.last_alert,
                "rollbacks": self.rollbacks, "rollback_log": self.rollback_log}

    def load_state_dict(self, state: dict) -> None:
        self.history = state["history"]
        self.rows = [CompletionRecord(**r) for r in state["rows"]]
        self.validation = state["validation"]
        self.last_alert = state["last_alert"]
        self.rollbacks = state["rollbacks"]
        self.rollback_log = state.get("rollback_log", [])

    # -- internals ------------------------------------------------------------------------------
    def _audit(self, tasks, texts, results) -> list[str | None]:
        """The own verifier's status for each credited completion (outcome > 0), else None."""
        if self.audit is None:
            return [None] * len(texts)
        credited = [i for i, r in enumerate(results) if r.components.get("outcome", 0) > 0]
        verdicts = self.audit.score_batch([ScoreRequest(texts[i], tasks[i].reference,
                                                        tasks[i].task_type) for i in credited])
        out: list[str | None] = [None] * len(texts)
        for i, v in zip(credited, verdicts):
            out[i] = v.status.value
        return out


def _by_category(records: list[CompletionRecord]) -> dict[str, float]:
    groups: dict[str, list[CompletionRecord]] = defaultdict(list)
    for r in records:
        groups[r.category].append(r)
    if len(groups) < 2:
        return {}
    out = {}
    for cat, rows in sorted(groups.items()):
        out[f"reward_mean/{cat}"] = mean(r.reward for r in rows)
        out[f"reward_std/{cat}"] = _std([r.reward for r in rows])
        out[f"parse_failure_rate/{cat}"] = mean(r.status == "unparsed" for r in rows)
    return out


def _zero_variance_by_tier(tasks, zero_variance: list[bool]) -> dict[str, float]:
    tiers: dict[str, list[bool]] = defaultdict(list)
    for task, zero in zip(tasks, zero_variance):
        tiers[task.difficulty or "-"].append(zero)
    if len(tiers) < 2:
        return {}
    return {f"zero_variance_fraction/{t}": mean(v) for t, v in sorted(tiers.items())}

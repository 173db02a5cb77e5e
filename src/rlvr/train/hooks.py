"""What the GRPO loop (:mod:`rlvr.train.loop`) calls around each step: health monitoring,
logging, KL-reference refresh, periodic validation, rollback and checkpoints. Each hook reads
and changes the run's :class:`~rlvr.train.state.TrainingState`; the loop fixes their order."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from rlvr.io import record_output
from rlvr.models.loader import save_model
from rlvr.monitor.alerts import strongest
from rlvr.train.batch import StepRollouts
from rlvr.train.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint
from rlvr.train.logs import append_log, console
from rlvr.train.rundir import REFERENCES_DIR, load_policy, plain_policy, step_of
from rlvr.train.schedule import warmup_schedule
from rlvr.train.state import TrainingState
from rlvr.train.weight_average import restore_average, trainable_state


def rollback_target(run_dir: Path, config, step: int) -> Path:
    """The checkpoint a rollback at ``step`` restores: the newest one at least
    ``health.rollback_margin`` steps old (step 0, the model that entered GRPO, when none
    is)."""
    return latest_checkpoint(run_dir, max_step=step - config.health.rollback_margin)


class HealthHook:
    """The health monitor's part of a step: its metrics, the checks and their alerts
    (logged to the sinks as text)."""

    def __init__(self, state: TrainingState):
        self.state = state

    def observe(self, step: int, rollouts: StepRollouts) -> dict:
        """The step's health metrics (degeneration, per category, audit ...)."""
        return self.state.monitor.observe(step, rollouts)

    def check(self, step: int, metrics: dict):
        """Run the checks after the step (and any validation of it); returns the strongest
        alert or ``None``."""
        alerts = self.state.monitor.check(step, metrics)
        for a in alerts:
            self.state.sinks.log_text(step, f"alerts/{a.check}", f"{a.action}: {a.message}")
        return strongest(alerts)


class LoggingHook:
    """A step's metrics to metrics.jsonl and the sinks, a quarter of its samples to
    samples.jsonl (multi-turn: with each episode's trajectory, its trained and not-trained
    segments, turns, tool calls and finish reason), and its summary line (with per-category
    rewards, R10) to the console."""

    def __init__(self, config, run_dir: Path, state: TrainingState):
        self.config, self.run_dir, self.state = config, run_dir, state

    def log_step(self, step: int, m: dict, rollouts: StepRollouts, eta: str = "") -> None:
        append_log(self.run_dir / "metrics.jsonl", [m])
        self.state.sinks.log(step, m)
        tasks, results = rollouts.tasks, rollouts.results
        index = rollouts.rollout.prompt_index.tolist()
        episodes = rollouts.episodes  # multi-turn: each row's trajectory, turns, tool calls
        append_log(self.run_dir / "samples.jsonl", [
            {"step": step, "id": tasks[index[r]].id,
             "reference": tasks[index[r]].reference, "completion": rollouts.texts[r],
             "reward": res.reward, "components": res.components, "status": res.status.value,
             "extracted": res.extracted, "detail": res.detail,
             "category": tasks[index[r]].category,
             **({} if episodes is None else episodes.record(r))}
            for r, res in list(enumerate(results))[:: max(1, len(results) // 4)]])
        console.print(f"step {step}/{self.config.grpo.steps} reward {m['reward_mean']:.3f} acc "
                      f"{m['accuracy']:.1%} zero-var {m['zero_variance_fraction']:.0%} "
                      f"len {m['length_mean']:.0f} kl {m.get('kl', 0):.4f} clip "
                      f"{m.get('clip_frac', 0):.3f} | rollout {m['seconds_rollout']:.1f}s "
                      f"reward {m['seconds_reward']:.1f}s update {m['seconds_update']:.1f}s"
                      + (f" | {eta}" if eta else "")
                      + (f" | [bold red]verifier errors {m['verifier_errors']}[/]"
                         if m.get("verifier_errors") else ""))
        if "episode_turns_mean" in m:  # multi-turn: turns, tools, how episodes ended
            ends = ", ".join(f"{k.split('/', 1)[1]} {v:.0%}" for k, v in m.items()
                             if k.startswith("finish_rate/") and v)
            console.print(f"  episodes: {m['episode_turns_mean']:.2f} turns, "
                          f"{m['episode_tool_calls_mean']:.2f} tool calls (errors "
                          f"{m['tool_error_rate']:.0%}, {m['tool_seconds']:.1f} s); {ends}")
        cats = sorted(k.split("/", 1)[1] for k in m if k.startswith("reward_mean/"))
        if cats:  # R10: per-category reward and parse failures, printed as well as logged
            console.print("  by category: " + ", ".join(
                f"{c} {m[f'reward_mean/{c}']:.2f} (parse fail {m[f'parse_failure_rate/{c}']:.0%})"
                for c in cats))


class ReferenceRefreshHook:
    """Every ``algo.ref_refresh_every`` steps: reference <- current policy, saved as
    ``references/step-N`` (the newest two kept) so a resumed run reloads the same
    reference."""

    def __init__(self, config, run_dir: Path, state: TrainingState):
        self.config, self.run_dir, self.state = config, run_dir, state

    def after_step(self, step: int) -> None:
        every = self.config.algo.ref_refresh_every
        if every and step % every == 0:
            self.refresh(step)

    def refresh(self, step: int) -> None:
        m = self.state.models
        m.reference.load_state_dict(plain_policy(m.policy).state_dict())
        root = self.run_dir / REFERENCES_DIR
        save_model(root / f"step-{step:06d}", m.reference, m.tokenizer)
        for old in sorted(root.glob("step-*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)
            record_output(old, removed=True)
        console.print(f"reference refreshed from the policy at step {step}")


class ValidationHook:
    """Validation every ``eval.every`` steps and at the last step (labelled ``trained``):
    the row goes to the history, the health monitor and the sinks (``val/...``)."""

    def __init__(self, config, state: TrainingState, evaluator):
        self.config, self.state, self.evaluator = config, state, evaluator

    def after_step(self, step: int) -> None:
        c = self.config
        if step == c.grpo.steps or (c.eval.every and step % c.eval.every == 0):
            row = self.evaluator.validate("trained" if step == c.grpo.steps else "grpo", step)
            self.state.progress.history["validation"].append(row)
            self.state.monitor.observe_validation(row)
            self.state.sinks.log(step, {f"val/{k}": v for k, v in row.items()
                                        if isinstance(v, (int, float)) and k != "step"})


class RollbackHook:
    """A rollback (a health check's ``rollback`` action): restore the checkpoint of
    :func:`rollback_target` (policy, optimizer and the scheduler's position; the data stream
    and step counter go on), multiply the LR scale by ``health.rollback_lr_factor`` and
    re-create the LR schedule with it at the restored position, reset the health baselines
    and cooldowns, and record the rollback (check, checkpoint, learning rate) in the
    monitor's ``rollback_log`` (results.json ``rollbacks``)."""

    def __init__(self, config, run_dir: Path, state: TrainingState):
        self.config, self.run_dir, self.state = config, run_dir, state

    def rollback(self, step: int, check: str | None = None) -> None:
        s, h, g = self.state, self.config.health, self.config.grpo
        m, o = s.models, s.optim
        target = rollback_target(self.run_dir, self.config, step)
        restored = load_policy(self.run_dir, self.config, target)
        m.policy.load_state_dict(restored.state_dict())
        del restored
        # the optimizer state and the scheduler's position (its step count) at the target
        saved = load_trainer_state(target, o.optimizer, o.scheduler, rng=False)
        # the files held the target's average (if kept): it restarts from them
        m.average = restore_average(m.policy, saved["policy_weights"], g.ema_decay,
                                    step_of(target))
        o.lr_scale *= h.rollback_lr_factor
        # the step reads the schedule from the state: replacing it here is all it takes
        o.scheduler = warmup_schedule(o.optimizer, g, o.lr_scale, o.scheduler.last_epoch)
        if o.update_group is not None:
            o.update_group.sync()  # the other ranks load the same state
        discard = getattr(s.source, "discard", None)
        if discard is not None:  # asynchronous rollouts sampled by the replaced weights
            discard()
        lr = g.learning_rate * o.lr_scale
        s.monitor.after_rollback(step, check, target.name, step_of(target), lr)
        console.print(f"[bold magenta]rollback[/] at step {step} ({check or 'health check'}) "
                      f"to {target.name}; learning rate now {lr:.3g} (grpo.learning_rate "
                      f"{g.learning_rate:g} x{o.lr_scale:g})")


class CheckpointHook:
    """Checkpoints: at GRPO's start (step 0, the rollback anchor), every ``checkpoint.every``
    steps and at the last step, keeping ``checkpoint.keep``. The model files are the run's
    output (the weight average with ``grpo.ema_decay``; the policy's own weights then go into
    the trainer state)."""

    def __init__(self, config, run_dir: Path, state: TrainingState):
        self.config, self.run_dir, self.state = config, run_dir, state

    def after_step(self, step: int) -> None:
        c = self.config
        if c.checkpoint.every and step % c.checkpoint.every == 0 or step == c.grpo.steps:
            self.save(step)

    def save(self, step: int) -> None:
        """Write ``checkpoints/step-N`` now."""
        s, m = self.state, self.state.models
        own = None if m.average is None else trainable_state(m.policy)
        save_checkpoint(self.run_dir, step, s.output_model, m.tokenizer, s.optim.optimizer,
                        s.optim.scheduler, s.trainer_extra(), keep=self.config.checkpoint.keep,
                        prompt=s.prompt, policy_weights=own,
                        source_state=s.source.state_dict() if s.source is not None else None)


@dataclass
class LoopHooks:
    """The hooks of one run's GRPO loop."""

    health: HealthHook
    logging: LoggingHook
    reference: ReferenceRefreshHook
    validation: ValidationHook
    rollback: RollbackHook
    checkpoint: CheckpointHook

    @classmethod
    def build(cls, config, run_dir: Path, state: TrainingState, evaluator) -> LoopHooks:
        """Every hook over the same ``state``; ``evaluator``: the run's
        :class:`rlvr.train.evaluation.Evaluator`."""
        return cls(HealthHook(state), LoggingHook(config, run_dir, state),
                   ReferenceRefreshHook(config, run_dir, state),
                   ValidationHook(config, state, evaluator),
                   RollbackHook(config, run_dir, state), CheckpointHook(config, run_dir, state))

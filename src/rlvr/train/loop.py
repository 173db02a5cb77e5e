"""The GRPO loop: per step, draw prompts, run the step (rollout, reward, update), then the
hooks in a fixed order: health metrics, logging, reference refresh, validation, health checks
(stop or rollback), checkpoint."""

from __future__ import annotations

import time

from rlvr.progress import Phase, step_eta
from rlvr.train.hooks import LoopHooks
from rlvr.train.logs import console
from rlvr.train.sampler import sampling_metrics
from rlvr.train.state import TrainingState


def grpo_loop(config, state: TrainingState, hooks: LoopHooks):
    """GRPO steps ``state.step + 1 .. grpo.steps`` with ``state.step_fn`` on
    ``state.data``'s training tasks drawn by ``state.sampler``; ``state.step`` follows.

    Returns:
        The alert whose action is ``stop`` (recorded as ``history["stopped"]``; the caller
        validates and checkpoints the stopped policy), or ``None`` after the last step.
    """
    c, s = config, state
    start_step = s.step
    loop_start = time.perf_counter()
    for step in range(start_step + 1, c.grpo.steps + 1):
        skipped, counts = s.sampler.skipped, dict(s.sampler.counts)
        idx = s.sampler.next(c.grpo.prompts_per_step)
        s.step_fn.refill = _refill(s, idx)  # dynamic sampling's extra rounds draw here
        # a spinner with the part running (terminal), a line after 30 s (log): the first
        # rollout can take minutes
        with Phase(f"step {step}/{c.grpo.steps}", None, console) as phase:
            s.step_fn.on_phase = phase.status
            try:
                rollouts = s.step_fn.run([s.data.train_tasks[i] for i in idx],
                                         [s.data.train_prompts[i] for i in idx], step)
            finally:
                s.step_fn.on_phase = None
        s.step = step
        if s.average is not None:  # grpo.ema_decay: average in the step's weights
            s.average.update(s.policy)
        s.sampler.record(idx, rollouts.zero_variance.tolist())  # idx: every drawn task
        m = {"step": step, **rollouts.metrics, **hooks.health.observe(step, rollouts),
             **sampling_metrics(s.sampler, skipped, counts)}
        elapsed = time.perf_counter() - loop_start
        hooks.logging.log_step(step, m, rollouts, step_eta(step - start_step,
                                                           c.grpo.steps - start_step, elapsed))
        hooks.reference.after_step(step)
        hooks.validation.after_step(step)
        alert = hooks.health.check(step, m)
        if alert and alert.action == "stop":
            s.history["stopped"] = alert.to_dict()
            return alert
        if alert and alert.action == "rollback":
            hooks.rollback.rollback(step, alert.check)
        hooks.checkpoint.after_step(step)
    return None


def _refill(state: TrainingState, drawn: list[int]):
    """``refill(k)`` for :meth:`rlvr.train.grpo.GRPOStep.run`: the next ``k`` training tasks
    from the run's sampler (appended to ``drawn``) and their prompts."""
    def refill(k: int):
        more = state.sampler.next(k)
        drawn.extend(more)
        return ([state.data.train_tasks[i] for i in more],
                [state.data.train_prompts[i] for i in more])
    return refill

"""The GRPO loop: per step, run the step (collect, reward, update; :mod:`rlvr.train.grpo`),
then the hooks in a fixed order: health metrics, logging, reference refresh, validation,
health checks (stop or rollback), checkpoint."""

from __future__ import annotations

import time

from rlvr.progress import Phase, step_eta
from rlvr.train.grpo import GRPOStep
from rlvr.train.hooks import LoopHooks
from rlvr.train.logs import console
from rlvr.train.sampler import sampling_metrics
from rlvr.train.state import TrainingState


def grpo_loop(config, state: TrainingState, hooks: LoopHooks, step_fn: GRPOStep):
    """GRPO steps ``state.progress.step + 1 .. grpo.steps`` with ``step_fn`` over ``state``
    (its rollout source draws the training tasks from ``state.progress.sampler``); the
    progress's step follows.

    Returns:
        The alert whose action is ``stop`` (recorded as ``history["stopped"]``; the caller
        validates and checkpoints the stopped policy), or ``None`` after the last step.
    """
    c, s, p = config, state, state.progress
    start_step = p.step
    loop_start = time.perf_counter()
    for step in range(start_step + 1, c.grpo.steps + 1):
        skipped, counts = p.sampler.skipped, dict(p.sampler.counts)
        # a spinner with the part running (terminal), a line after 30 s (log): the first
        # rollout can take minutes
        with Phase(f"step {step}/{c.grpo.steps}", None, console):
            rollouts = step_fn.run(s, step)
        p.advance(step)
        if s.models.average is not None:  # grpo.ema_decay: average in the step's weights
            s.models.average.update(s.models.policy)
        p.sampler.record(rollouts.task_indices, rollouts.zero_variance.tolist())
        m = {"step": step, **rollouts.metrics, **hooks.health.observe(step, rollouts),
             **sampling_metrics(p.sampler, skipped, counts)}
        elapsed = time.perf_counter() - loop_start
        hooks.logging.log_step(step, m, rollouts, step_eta(step - start_step,
                                                           c.grpo.steps - start_step, elapsed))
        hooks.reference.after_step(step)
        hooks.validation.after_step(step)
        alert = hooks.health.check(step, m)
        if alert and alert.action == "stop":
            p.history["stopped"] = alert.to_dict()
            return alert
        if alert and alert.action == "rollback":
            hooks.rollback.rollback(step, alert.check)
        hooks.checkpoint.after_step(step)
    return None

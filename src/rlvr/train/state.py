"""The explicit state of a training run: what :mod:`rlvr.train.setup` builds, the phases and
the GRPO loop (:mod:`rlvr.train.loop`) read and change, a checkpoint saves and
:mod:`rlvr.train.resume` restores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.train.sampler import TaskSampler
from rlvr.train.taskdata import RunData


def _new_history() -> dict:
    return {"validation": []}


@dataclass
class TrainingState:
    """One run's models, optimizer and progress. Fields are ``None`` until the setup step
    that makes them has run.

    Attributes:
        data: the tasks and their prompts (:class:`rlvr.train.taskdata.RunData`).
        policy: the trained model (a LoRA-wrapped one with ``model.lora_rank`` in GRPO).
        tokenizer: its tokenizer.
        stop_ids: token ids that end a completion.
        prompt: the prompt settings saved with every checkpoint
            (:func:`rlvr.tasks.prompting.prompt_settings`).
        engine: the rollout engine (its own weight snapshot, synced from ``policy``).
        optimizer, scheduler: GRPO's AdamW and LR schedule (:mod:`rlvr.train.schedule`).
        lr_scale: factor on ``grpo.learning_rate`` (``health.rollback_lr_factor`` per
            rollback); the scheduler is built with it.
        sampler: draws each step's prompts.
        step: the last GRPO step done (the checkpoint's step on resume).
        reference: the frozen KL reference model (``None`` when ``algo.kl_coef`` is 0).
        step_fn: the :class:`rlvr.train.grpo.GRPOStep` running the steps (owns the KL
            controller).
        kl_coef: the adaptive KL controller's coefficient restored from a checkpoint,
            applied when ``step_fn`` is built; ``None`` on a fresh run.
        history: validation rows, SFT report, pass@k, ``stopped`` (saved in checkpoints).
        monitor: the :class:`rlvr.monitor.health.HealthMonitor`.
        sinks: the metric sinks (:class:`rlvr.monitor.sinks.SinkGroup`).
        average: the EMA of the policy's weights
            (:class:`rlvr.train.weight_average.PolicyAverage`, ``grpo.ema_decay`` > 0): what
            validation measures and checkpoints save; ``None`` without one (the policy).
    """

    data: RunData = field(default_factory=RunData)
    policy: Any = None
    tokenizer: Any = None
    stop_ids: tuple[int, ...] = ()
    prompt: dict | None = None
    engine: Any = None
    optimizer: Any = None
    scheduler: Any = None
    lr_scale: float = 1.0
    sampler: TaskSampler | None = None
    step: int = 0
    reference: Any = None
    step_fn: Any = None
    kl_coef: float | None = None
    history: dict = field(default_factory=_new_history)
    monitor: Any = None
    sinks: Any = None
    average: Any = None

    @property
    def output_model(self):
        """The model the run delivers (validated, checkpointed): the weight average, or the
        policy without one."""
        return self.policy if self.average is None else self.average.model

    @property
    def kl_ctl(self):
        """The KL controller of the running steps, or ``None`` before they are built."""
        return None if self.step_fn is None else self.step_fn.kl_ctl

    def trainer_extra(self) -> dict:
        """What a checkpoint saves beside the model, optimizer and scheduler: the sampler's
        position, the history, the LR scale, the KL coefficient and the monitor's state."""
        return {"sampler": self.sampler.state_dict(), "history": self.history,
                "lr_scale": self.lr_scale,
                "kl_coef": self.kl_ctl.value if self.step_fn else None,
                "monitor": self.monitor.state_dict()}

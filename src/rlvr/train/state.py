"""The explicit state of a training run, its one owner: what :mod:`rlvr.train.setup` builds,
:mod:`rlvr.train.resume` restores and a rollback (:class:`rlvr.train.hooks.RollbackHook`)
replaces; everything else reads it.

The fields are grouped by lifetime:

- :class:`ModelState`, the models: the policy, its KL reference, the rollout engines, the
  tokenizer, the weight average. Replaced by setup (load, SFT's reload, LoRA), resume and
  rollback (the weights).
- :class:`OptimState`, the optimisation: the optimizer, the LR schedule and its scale, the KL
  controller, the data-parallel update group. Built when GRPO starts (or resumes); a rollback
  rebuilds the schedule.
- :class:`Progress`: the step, the task sampler, the history (validation rows, SFT report,
  pass@k, ``stopped``). The step advances only through :meth:`Progress.advance`.

The GRPO step (:class:`rlvr.train.grpo.GRPOStep`) holds none of these objects: it reads them
from the state on every call, so replacing one (a rollback's schedule, a refreshed reference)
is one assignment here. ``tests/train/test_state_ownership.py`` checks that no other module
assigns a field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rlvr.train.taskdata import RunData

if TYPE_CHECKING:
    from torch import nn
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LRScheduler

    from rlvr.algo.kl import AdaptiveKLController, FixedKLController
    from rlvr.distributed.update_group import UpdateGroup
    from rlvr.monitor.health import HealthMonitor
    from rlvr.monitor.sinks import SinkGroup
    from rlvr.rollout.engine import RolloutEngine
    from rlvr.train.rollouts import RolloutSource
    from rlvr.train.sampler import TaskSampler
    from rlvr.train.weight_average import PolicyAverage

    KLController = AdaptiveKLController | FixedKLController


def _new_history() -> dict:
    return {"validation": []}


@dataclass
class ModelState:
    """The run's models. ``None`` until the setup step that makes them has run.

    Attributes:
        policy: the trained model (a LoRA-wrapped one with ``model.lora_rank`` in GRPO).
        reference: the frozen KL reference (``None`` when ``algo.kl_coef`` is 0).
        engine: the rollout engine of validation and pass@k (its own weight snapshot,
            synced from ``policy``).
        rollout_engine: the engine that samples GRPO's rollouts: ``engine`` itself, or with
            ``rollout.quantization: int8`` a second one (:func:`rlvr.train.setup.
            grpo_rollout_engine`).
        tokenizer: the policy's tokenizer.
        average: the EMA of the policy's weights (``grpo.ema_decay`` > 0): what validation
            measures and checkpoints save; ``None`` without one (the policy).
    """

    policy: nn.Module | None = None
    reference: nn.Module | None = None
    engine: RolloutEngine | None = None
    rollout_engine: RolloutEngine | None = None
    tokenizer: object | None = None
    average: PolicyAverage | None = None


@dataclass
class OptimState:
    """GRPO's optimisation. ``None`` until GRPO starts.

    Attributes:
        optimizer: AdamW over the policy's trainable parameters (:mod:`rlvr.train.schedule`).
        scheduler: its LR schedule (built with ``lr_scale``).
        lr_scale: factor on ``grpo.learning_rate`` (``health.rollback_lr_factor`` per
            rollback).
        kl: the KL controller (fixed or adaptive, :mod:`rlvr.algo.kl`); its ``value`` is the
            coefficient the next step uses.
        update_group: the data-parallel update processes (``grpo.update_processes`` > 1),
            else ``None``.
    """

    optimizer: Optimizer | None = None
    scheduler: LRScheduler | None = None
    lr_scale: float = 1.0
    kl: KLController | None = None
    update_group: UpdateGroup | None = None


@dataclass
class Progress:
    """How far the run is.

    Attributes:
        step: the last GRPO step done (the checkpoint's step on resume).
        sampler: draws the training tasks of each step.
        history: validation rows, SFT report, pass@k, ``stopped`` (saved in checkpoints).
    """

    step: int = 0
    sampler: TaskSampler | None = None
    history: dict = field(default_factory=_new_history)

    def advance(self, step: int) -> None:
        """Record that GRPO step ``step`` is done.

        Raises:
            ValueError: ``step`` is not the next one.
        """
        if step != self.step + 1:
            raise ValueError(f"step {step} done after step {self.step}: expected {self.step + 1}")
        self.step = step


@dataclass
class TrainingState:
    """One run's data, models, optimisation and progress.

    Attributes:
        data: the tasks and their prompts (:class:`rlvr.train.taskdata.RunData`).
        models: :class:`ModelState`.
        optim: :class:`OptimState`.
        progress: :class:`Progress`.
        stop_ids: token ids that end a completion.
        prompt: the prompt settings saved with every checkpoint
            (:func:`rlvr.tasks.prompting.prompt_settings`).
        source: where the GRPO step's scored rollouts come from
            (:class:`rlvr.train.rollouts.RolloutSource`; chosen by
            :func:`rlvr.train.setup.step_runner`).
        monitor: the health monitor (:class:`rlvr.monitor.health.HealthMonitor`).
        sinks: the metric sinks (:class:`rlvr.monitor.sinks.SinkGroup`).
    """

    data: RunData = field(default_factory=RunData)
    models: ModelState = field(default_factory=ModelState)
    optim: OptimState = field(default_factory=OptimState)
    progress: Progress = field(default_factory=Progress)
    stop_ids: tuple[int, ...] = ()
    prompt: dict | None = None
    source: RolloutSource | None = None
    monitor: HealthMonitor | None = None
    sinks: SinkGroup | None = None

    @property
    def output_model(self) -> nn.Module:
        """The model the run delivers (validated, checkpointed): the weight average, or the
        policy without one."""
        m = self.models
        return m.policy if m.average is None else m.average.model

    def trainer_extra(self) -> dict:
        """What a checkpoint saves beside the model, optimizer and scheduler: the sampler's
        position, the history, the LR scale, the KL coefficient (``None`` before GRPO's
        steps start) and the monitor's state."""
        kl = self.optim.kl
        return {"sampler": self.progress.sampler.state_dict(),
                "history": self.progress.history, "lr_scale": self.optim.lr_scale,
                "kl_coef": kl.value if kl is not None else None,
                "monitor": self.monitor.state_dict()}

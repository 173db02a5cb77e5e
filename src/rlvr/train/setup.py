"""Building a run's :class:`~rlvr.train.state.TrainingState`: tasks and model, rollout
engine, monitoring and sinks, GRPO's optimizer, and the step runner with its KL reference."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch

from rlvr.distributed.update_group import UpdateGroup
from rlvr.models import load_model_and_tokenizer
from rlvr.models.loader import ModelLoadError
from rlvr.monitor.health import HealthMonitor
from rlvr.monitor.sinks import SinkGroup, build_sinks
from rlvr.progress import Phase
from rlvr.rollout import create_engine
from rlvr.tasks.prompting import prompt_settings, stop_token_ids
from rlvr.train.episode_step import episode_runner
from rlvr.train.errors import RunInputError
from rlvr.train.grpo import GRPOStep
from rlvr.train.hooks import rollback_target
from rlvr.train.logs import console
from rlvr.train.rundir import REFERENCES_DIR, SFT_MODEL_DIR, load_policy, plain_policy, step_of
from rlvr.train.schedule import grpo_optimizer as adamw, warmup_schedule
from rlvr.train.state import TrainingState
from rlvr.train.taskdata import load_run_data


def load(state: TrainingState, config, eval_rewards) -> None:
    """Tasks first (cheap, and the likelier mistake), then the model; fills ``state.data``
    (with encoded prompts), ``policy``, ``tokenizer``, ``stop_ids`` and ``prompt``.

    Raises:
        RunInputError: bad data (``data: ...``) or a model that does not load
            (``model.name: ...``).
    """
    c = config
    try:
        state.data = load_run_data(c, eval_rewards, console.print)
    except ValueError as exc:
        raise RunInputError(f"data: {exc}") from exc
    t0 = time.perf_counter()
    try:
        with Phase(f"loading model {c.model.name}", None, console):
            state.policy, state.tokenizer = load_model_and_tokenizer(c.model.name, seed=c.seed)
    except ModelLoadError as exc:
        raise RunInputError(f"model.name: {exc}") from exc
    console.print(f"model {c.model.name}: {sum(p.numel() for p in state.policy.parameters()):,}"
                  f" parameters, loaded in {time.perf_counter() - t0:.1f} s")
    state.data.encode(state.tokenizer, c.data.one_shot)
    state.stop_ids = stop_token_ids(state.tokenizer)
    state.prompt = prompt_settings(c.data, state.tokenizer)  # saved with every checkpoint
    label = (" + ".join(f"{s.name or s.source} ({s.weight:g})" for s in c.data.sources)
             or c.data.source)
    console.print(f"data {label}: {len(state.data.train_tasks)} train, "
                  f"{len(state.data.val_tasks)} validation tasks")


def make_engine(config, policy, tokenizer):
    """The rollout engine of ``rollout.engine`` (Ray actors with ``rollout.ray_address``). A
    LoRA policy is sampled from a plain merged copy, re-synced before every rollout."""
    model = plain_policy(policy)
    if config.rollout.ray_address:  # R22: rollout actors (rlvr.distributed)
        # optional dependency: ray (extra `ray`), imported by rlvr.distributed.ray_workers
        from rlvr.distributed.ray_workers import RayRolloutEngine

        return RayRolloutEngine.from_run_config(config, model, tokenizer.pad_token_id)
    return create_engine(config.rollout.engine, model, pad_token_id=tokenizer.pad_token_id,
                         precision=config.model.precision)


def grpo_rollout_engine(config, policy, tokenizer, engine):
    """The engine that samples GRPO's rollouts: the run's ``engine`` (validation's and
    pass@k's too), or, with ``rollout.quantization: int8``, a second ``torch`` engine over the
    same policy whose decode steps run int8 weights in fp32 compute
    (:mod:`rlvr.rollout.decoder.int8`; re-quantised at every step's weight sync), so that
    validation and pass@k keep measuring the policy itself.

    Raises:
        Int8Unavailable: this torch build has no fbgemm quantized engine.
    """
    quantization = config.rollout.quantization
    if quantization == "none":
        return engine
    return create_engine("torch", plain_policy(policy), pad_token_id=tokenizer.pad_token_id,
                         dtype=torch.float32, quantization=quantization)


def open_monitoring(state: TrainingState, config, run_dir: Path, eval_rewards,
                    checkpoint: Path | None) -> None:
    """``state.monitor`` (the health checks; the audit re-scores with each task type's own
    verifier when ``reward.verifiers`` swaps the training one) and ``state.sinks`` (a resume
    from ``checkpoint`` continues the sinks' step axis)."""
    audit = eval_rewards if config.reward.verifiers else None
    state.monitor = HealthMonitor(config.health, run_dir, audit, console.print)

    def target(step: int) -> tuple[str, int]:
        path = rollback_target(run_dir, config, step)
        return path.name, step_of(path)

    state.monitor.rollback_target = target
    resume_step = step_of(checkpoint) if checkpoint is not None else None
    state.sinks = SinkGroup(build_sinks(config.logging, run_dir, config.model_dump(mode="json"),
                                        resume_step))


def grpo_optimizer(state: TrainingState, config) -> None:
    """``state.optimizer`` and a fresh ``state.scheduler`` for GRPO over the current policy."""
    state.optimizer = adamw(state.policy, config.grpo)
    state.scheduler = warmup_schedule(state.optimizer, config.grpo)


def initial_reference(state: TrainingState, config, run_dir: Path, resume: bool,
                      start_step: int = 0):
    """The frozen KL reference: the model that entered GRPO, or the newest refreshed one at
    or before ``start_step``. Fresh runs copy the policy (GRPO has not started yet); resumed
    runs reload it from ``references/`` or ``sft_model/``, or the configured base model when
    SFT is disabled."""
    if not resume:
        return copy.deepcopy(plain_policy(state.policy)).eval().requires_grad_(False)
    refreshed = [p for p in (run_dir / REFERENCES_DIR).glob("step-*")
                 if (p / "config.json").is_file() and int(p.name[5:]) <= start_step]
    if refreshed:
        model, _ = load_model_and_tokenizer(str(max(refreshed)))
        return model.eval().requires_grad_(False)
    saved = run_dir / SFT_MODEL_DIR
    if saved.is_dir():
        model = load_policy(run_dir, config, saved)
    else:
        model, _ = load_model_and_tokenizer(config.model.name, seed=config.seed)
    return model.eval().requires_grad_(False)


def step_runner(state: TrainingState, config, run_dir: Path, rewards, resume: bool):
    """``state.reference`` (when ``algo.kl_coef`` > 0) and ``state.step_fn``, the
    :class:`rlvr.train.grpo.GRPOStep` from ``state.step`` on: the adaptive KL coefficient a
    resume restored, and a data-parallel update group with ``grpo.update_processes`` > 1
    (close it with :func:`close_step_runner`); its rollouts come from
    :func:`grpo_rollout_engine`; with an ``env`` section it plays episodes
    (:func:`episode_runner`, scoring with ``rewards``). Returns the step runner."""
    c = config
    state.reference = (initial_reference(state, c, run_dir, resume, state.step)
                       if c.algo.kl_coef > 0 else None)
    engine = grpo_rollout_engine(c, state.policy, state.tokenizer, state.engine)
    step_fn = state.step_fn = GRPOStep(c, state.policy, state.reference, engine,
                                       state.tokenizer, rewards, state.optimizer,
                                       state.scheduler, state.stop_ids)
    step_fn.episodes = episode_runner(state, c, rewards)
    if state.kl_coef is not None and c.algo.kl_controller == "adaptive":
        # the adaptive controller's state; a fixed coefficient is the config's (so a
        # `--set algo.kl_coef` on --resume applies)
        step_fn.kl_ctl.value = state.kl_coef
    if c.grpo.update_processes > 1:
        step_fn.update_group = UpdateGroup(c, state.policy, state.optimizer)
        console.print(f"policy update data-parallel over {c.grpo.update_processes} "
                      f"processes ({step_fn.update_group.update_threads} threads each)")
    return step_fn


def close_step_runner(step_fn) -> None:
    """Stop the step runner's data-parallel update group, if any."""
    if step_fn.update_group is not None:
        step_fn.update_group.close()
        step_fn.update_group = None

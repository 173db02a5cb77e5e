"""Building a run's :class:`~rlvr.train.state.TrainingState`: tasks and model, rollout
engine, monitoring and sinks, GRPO's optimizer, and the step runner with its KL reference and
rollout source. With :mod:`rlvr.train.resume` and a rollback
(:class:`rlvr.train.hooks.RollbackHook`), the only code that assigns the state's fields."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import torch

from rlvr.algo.kl import AdaptiveKLController, FixedKLController
from rlvr.distributed.update_group import UpdateGroup
from rlvr.models import load_model_and_tokenizer
from rlvr.models.loader import ModelLoadError
from rlvr.models.lora import apply_lora as wrap_lora
from rlvr.monitor.health import HealthMonitor
from rlvr.monitor.sinks import SinkGroup, build_sinks
from rlvr.progress import Phase
from rlvr.rollout import create_engine
from rlvr.rollout.engine import ENGINES, samples_lora
from rlvr.tasks.prompting import prompt_settings, stop_token_ids
from rlvr.train.async_source import AsyncSource
from rlvr.train.checkpoint import load_source_state
from rlvr.train.errors import RunInputError
from rlvr.train.grpo import GRPOStep
from rlvr.train.hooks import rollback_target
from rlvr.train.logs import console
from rlvr.train.rollouts import rollout_source
from rlvr.train.rundir import REFERENCES_DIR, SFT_MODEL_DIR, load_policy, plain_policy, step_of
from rlvr.train.sampler import run_sampler
from rlvr.train.schedule import grpo_optimizer as adamw
from rlvr.train.schedule import warmup_schedule
from rlvr.train.state import TrainingState
from rlvr.train.taskdata import load_run_data
from rlvr.train.weight_average import new_average


def load(state: TrainingState, config, eval_rewards) -> None:
    """Tasks first (cheap, and the likelier mistake), then the model; fills ``state.data``
    (with encoded prompts), ``models.policy``, ``models.tokenizer``, ``stop_ids`` and
    ``prompt``.

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
            policy, tokenizer = load_model_and_tokenizer(c.model.name, seed=c.seed)
        state.models.policy, state.models.tokenizer = policy, tokenizer
    except ModelLoadError as exc:
        raise RunInputError(f"model.name: {exc}") from exc
    console.print(f"model {c.model.name}: {sum(p.numel() for p in policy.parameters()):,}"
                  f" parameters, loaded in {time.perf_counter() - t0:.1f} s")
    state.data.encode(tokenizer, c.data.one_shot)
    state.stop_ids = stop_token_ids(tokenizer)
    state.prompt = prompt_settings(c.data, tokenizer)  # saved with every checkpoint
    label = (" + ".join(f"{s.name or s.source} ({s.weight:g})" for s in c.data.sources)
             or c.data.source)
    console.print(f"data {label}: {len(state.data.train_tasks)} train, "
                  f"{len(state.data.val_tasks)} validation tasks")


def make_engine(config, policy, tokenizer):
    """The rollout engine of ``rollout.engine`` (Ray actors with ``rollout.ray_address``).

    The local ``torch`` engine keeps a reference to ``policy`` itself, LoRA-wrapped or not
    (:func:`rlvr.rollout.engine.samples_lora`: its snapshot merges each layer's adapters;
    :func:`rlvr.train.policy.sync_engine` re-snapshots it before a rollout). The engines that
    run a plain module (``hf``, ``vllm``, Ray's actors) get a LoRA policy as a plain merged
    copy, loaded with merged weights at every sync; a plain policy itself.

    Raises:
        UnknownEngineError: ``rollout.engine`` is not registered.
    """
    if config.rollout.ray_address:  # R22: rollout actors (rlvr.distributed)
        # optional dependency: ray (extra `ray`), imported by rlvr.distributed.ray_workers
        from rlvr.distributed.ray_workers import RayRolloutEngine

        return RayRolloutEngine.from_run_config(config, plain_policy(policy),
                                                tokenizer.pad_token_id)
    name = config.rollout.engine
    model = policy if samples_lora(ENGINES.get(name)) else plain_policy(policy)
    return create_engine(name, model, pad_token_id=tokenizer.pad_token_id,
                         precision=config.model.precision)


def open_engine(state: TrainingState, config) -> None:
    """``state.models.engine``: a new rollout engine over the current policy
    (:func:`make_engine`)."""
    state.models.engine = make_engine(config, state.models.policy, state.models.tokenizer)


def follow_policy(state: TrainingState) -> None:
    """Point the state's engines that sample the policy object itself (``engine``,
    ``rollout_engine``: :func:`rlvr.rollout.engine.samples_lora`) at the current
    ``state.models.policy``, once it was replaced or wrapped in adapters, so that they
    neither sample a stale model nor keep it alive; the next rollout snapshots the policy."""
    m = state.models
    for engine in (m.engine, m.rollout_engine):
        if samples_lora(engine) and engine.model is not m.policy:
            engine.set_model(m.policy)


def replace_policy(state: TrainingState, policy) -> None:
    """``state.models.policy`` <- ``policy`` (a checkpoint's, SFT's saved or merged model);
    everything that uses the policy reads it from the state, and an engine that samples the
    policy object itself follows it (:func:`follow_policy`)."""
    state.models.policy = policy
    follow_policy(state)


def apply_lora(state: TrainingState, config, stage: str) -> None:
    """Wrap the policy in fresh LoRA adapters (``model.lora_rank``); only they train from
    here on. ``stage`` names what they are for in the log line (GRPO, or SFT with
    ``sft.full_finetune: false``).

    peft wraps the model in place. With no engine yet, or an engine that samples the policy
    itself (the ``torch`` engine: :func:`follow_policy` points it at the wrapped policy, whose
    layers it merges as it snapshots them), that is all: no second copy of the model. An
    engine that runs a plain module (``hf``, ``vllm``, Ray's actors) keeps the one it was
    given: the adapters then go on a copy, and the engine is synced with merged weights."""
    c, m = config, state.models
    keeps_plain = m.engine is not None and not samples_lora(m.engine)
    plain = copy.deepcopy(m.policy) if keeps_plain else m.policy
    m.policy = wrap_lora(plain, c.model.lora_rank, c.model.lora_alpha)
    follow_policy(state)
    trainable = sum(p.numel() for p in m.policy.parameters() if p.requires_grad)
    console.print(f"LoRA rank {c.model.lora_rank}: {trainable:,} trainable parameters "
                  f"({stage})")


def open_sampler(state: TrainingState, config, saved: dict | None = None) -> None:
    """``state.progress.sampler`` over the training tasks
    (:func:`rlvr.train.sampler.run_sampler`), at ``saved``'s position when given (a
    checkpoint's)."""
    sampler = run_sampler(config, state.data.train_tasks, state.data.pool_of, console.print)
    if saved is not None:
        sampler.load_state_dict(saved)
    state.progress.sampler = sampler


def grpo_rollout_engine(config, policy, tokenizer, engine):
    """The engine that samples GRPO's rollouts: the run's ``engine`` (validation's and
    pass@k's too), or, with ``rollout.quantization: int8``, a second ``torch`` engine over the
    same policy whose decode steps run int8 weights in fp32 compute
    (:mod:`rlvr.rollout.decoder.int8`; re-quantised at every step's weight sync), so that
    validation and pass@k keep measuring the policy itself. That engine samples the policy
    object itself, a LoRA one too (no merged copy).

    Raises:
        Int8Unavailable: this torch build has no fbgemm quantized engine.
    """
    quantization = config.rollout.quantization
    if quantization == "none":
        return engine
    return create_engine("torch", policy, pad_token_id=tokenizer.pad_token_id,
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
    """``state.optim.optimizer`` and a fresh ``scheduler`` for GRPO over the current
    policy."""
    o = state.optim
    o.optimizer = adamw(state.models.policy, config.grpo)
    o.scheduler = warmup_schedule(o.optimizer, config.grpo)


def weight_average(state: TrainingState, config) -> None:
    """``state.models.average``: a new EMA of the policy's weights (``grpo.ema_decay`` > 0),
    else ``None``."""
    state.models.average = new_average(state.models.policy, config.grpo.ema_decay)


def kl_controller(config, restored: float | None = None):
    """The KL controller of ``algo.kl_controller``, starting at ``algo.kl_coef``; an adaptive
    one at ``restored`` (the coefficient a checkpoint saved) when given. A fixed coefficient
    is always the config's (so a ``--set algo.kl_coef`` on ``--resume`` applies)."""
    a = config.algo
    if a.kl_controller != "adaptive":
        return FixedKLController(a.kl_coef)
    ctl = AdaptiveKLController(a.kl_coef, a.kl_target)
    if restored is not None:
        ctl.value = restored
    return ctl


def initial_reference(state: TrainingState, config, run_dir: Path, resume: bool,
                      start_step: int = 0):
    """The frozen KL reference: the model that entered GRPO, or the newest refreshed one at
    or before ``start_step``. Fresh runs copy the policy (GRPO has not started yet); resumed
    runs reload it from ``references/`` or ``sft_model/``, or the configured base model when
    SFT is disabled."""
    if not resume:
        return copy.deepcopy(plain_policy(state.models.policy)).eval().requires_grad_(False)
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


def step_runner(state: TrainingState, config, run_dir: Path, rewards, resume: bool) -> GRPOStep:
    """What GRPO's steps need, into ``state``, from ``state.progress.step`` on: the KL
    reference (``models.reference``, when ``algo.kl_coef`` > 0), the engine that samples the
    rollouts (``models.rollout_engine``, :func:`grpo_rollout_engine`), the rollout source
    (``source``: :func:`rlvr.train.rollouts.rollout_source`, episodes with an ``env``
    section, scoring with ``rewards``; with ``grpo.max_staleness`` >= 1 the asynchronous
    :class:`rlvr.train.async_source.AsyncSource`, on resume with the state its checkpoint
    saved), the KL controller (``optim.kl``, unless a resume restored it) and a data-parallel
    update group with ``grpo.update_processes`` > 1 (close them with
    :func:`close_step_runner`). Returns the step runner."""
    c, m, o = config, state.models, state.optim
    m.reference = (initial_reference(state, c, run_dir, resume, state.progress.step)
                   if c.algo.kl_coef > 0 else None)
    m.rollout_engine = grpo_rollout_engine(c, m.policy, m.tokenizer, m.engine)
    state.source = (AsyncSource(c, state, rewards) if c.grpo.max_staleness
                    else rollout_source(state, c, rewards))
    if resume and state.progress.step:  # an asynchronous source's groups and jobs in flight
        saved = run_dir / "checkpoints" / f"step-{state.progress.step:06d}"
        state.source.load_state_dict(load_source_state(saved))
    if o.kl is None:
        o.kl = kl_controller(c)
    if c.grpo.update_processes > 1:
        o.update_group = UpdateGroup(c, m.policy, o.optimizer)
        console.print(f"policy update data-parallel over {c.grpo.update_processes} "
                      f"processes ({o.update_group.update_threads} threads each)")
    return GRPOStep(c)


def close_step_runner(state: TrainingState) -> None:
    """Stop the rollout source and the data-parallel update group, if any."""
    if state.source is not None:
        state.source.close()
    if state.optim.update_group is not None:
        state.optim.update_group.close()
        state.optim.update_group = None

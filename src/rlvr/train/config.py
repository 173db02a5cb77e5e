"""The run config: one YAML file describes a run (R41). Field docs are the user documentation.

Sections: ``model``, ``data``, ``sft`` (cold start, R17), ``grpo`` (loop sizes, optimiser,
sampling), ``algo`` (the pure-function choices: advantage, policy loss, KL), ``rollout``,
``reward`` (:class:`rlvr.rewards.config.RewardConfig`), ``env`` (multi-turn episodes,
:class:`rlvr.envs.EnvConfig`; absent: single-turn completions), ``eval``, ``checkpoint``, ``health``
(:class:`rlvr.monitor.config.HealthConfig`: checks, thresholds, actions) and ``logging``
(:class:`rlvr.monitor.sinks.LoggingConfig`: TensorBoard, W&B, MLflow). The training sections
(``model``, ``sft``, ``grpo``, ``algo``, ``rollout``, ``eval``, ``checkpoint``) are in
:mod:`rlvr.train.sections`, ``data`` in :mod:`rlvr.tasks.config`. Here: :class:`RunConfig`
and its cross-section checks, the hints for foreign keys, what a resumed run cannot change
(:func:`resume_conflicts`) and the console summary (:func:`config_summary`).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from rlvr.algo.importance import DEFAULT_TIS_CAP
from rlvr.algo.registry import ADVANTAGE_ESTIMATORS
from rlvr.configio import override_for
from rlvr.envs.config import EnvConfig
from rlvr.limits import MAX_SEED, MAX_WORKERS
from rlvr.monitor.config import HealthConfig
from rlvr.monitor.sinks import LoggingConfig
from rlvr.registry import load_plugins
from rlvr.rewards.config import RewardConfig
from rlvr.rollout import ENGINES
from rlvr.tasks.config import (  # noqa: F401
    DEFAULT_INSTRUCTION,
    ConfigSection,
    DataConfig,
    DataSource,
    SourceName,
    carry_instruction,
    check_mixture,
    default_instruction,
)
from rlvr.tasks.registry import in_process, needs_data_path, task_source
from rlvr.tasks.verifiers_source import verifiers_data
from rlvr.train.sections import (
    AlgoConfig,
    CheckpointConfig,
    EvalConfig,
    GRPOConfig,
    ModelConfig,
    RolloutConfig,
    SFTConfig,
)


def _trl(name: str, ours: str) -> str:
    return f"TRL's {name} is rlvr's {ours}"


# Names from TRL's GRPOConfig (and a few from verl / OpenRLHF) that users bring along, with
# what rlvr calls them: an unknown key among them gets this hint (rlvr.configio). Names that
# are rlvr fields in another section (learning_rate, temperature, top_p, warmup_steps, ...)
# need no entry: the error names that section's field.
FOREIGN_KEYS: dict[str, str] = {
    "beta": _trl("beta", "algo.kl_coef"),
    "num_generations": _trl("num_generations", "grpo.group_size"),
    "max_completion_length": _trl("max_completion_length", "grpo.max_new_tokens"),
    "epsilon": _trl("epsilon", "algo.clip_eps"),
    "epsilon_high": _trl("epsilon_high", "algo.clip_eps_high (with algo.policy_loss: "
                         "clip_higher)"),
    "num_iterations": _trl("num_iterations", "grpo.mu (policy updates per rollout batch)"),
    "loss_type": _trl("loss_type", "algo.loss_agg (grpo, bnpo, dapo, dr_grpo)"),
    "scale_rewards": _trl("scale_rewards", "algo.std_scale (group, batch, none)"),
    "lr_scheduler_type": _trl("lr_scheduler_type", "grpo.lr_schedule (constant, linear, "
                              "cosine)"),
    "per_device_train_batch_size": "TRL's per_device_train_batch_size counts completions per "
    "device and step; an rlvr step samples grpo.prompts_per_step x grpo.group_size "
    "completions, grpo.micro_batch_size per forward/backward",
    "gradient_accumulation_steps": "rlvr accumulates gradients over all of a step's "
    "completions (TRL's gradient_accumulation_steps); grpo.micro_batch_size sets the chunk",
    "max_prompt_length": "rlvr does not truncate prompts (TRL's max_prompt_length); "
    "completions are capped by grpo.max_new_tokens, SFT sequences by sft.max_length",
    "max_steps": _trl("max_steps", "grpo.steps"),
    "num_train_epochs": "rlvr trains for grpo.steps steps (TRL's num_train_epochs), drawing "
    "grpo.prompts_per_step prompts per step",
    "model_name_or_path": _trl("model_name_or_path", "model.name"),
    "use_peft": "rlvr uses LoRA when model.lora_rank > 0 (TRL's use_peft)",
    "lora_r": _trl("lora_r", "model.lora_rank"),
    "bf16": "TRL's bf16 is rlvr's model.precision (auto | bf16 | fp32)",
    "fp16": "rlvr computes in model.precision: auto | bf16 | fp32 (no fp16)",
    "use_vllm": "TRL's use_vllm is rlvr's rollout.engine: vllm",
    "mask_truncated_completions": _trl("mask_truncated_completions", "algo.mask_truncated"),
    "sync_ref_model": "TRL's sync_ref_model / ref_model_sync_steps is rlvr's "
    "algo.ref_refresh_every (steps; 0 = never)",
    "ref_model_sync_steps": _trl("ref_model_sync_steps", "algo.ref_refresh_every"),
    "reward_weights": _trl("reward_weights", "reward.weights (by component: outcome, format)"),
    "eval_steps": _trl("eval_steps", "eval.every"),
    "save_steps": _trl("save_steps", "checkpoint.every"),
    "save_total_limit": _trl("save_total_limit", "checkpoint.keep"),
    "report_to": "TRL's report_to is rlvr's logging section (logging.tensorboard, "
    "logging.wandb_project, logging.mlflow_tracking_uri)",
    "logging_steps": "rlvr logs every step (metrics.jsonl and the logging sinks; TRL's "
    "logging_steps)",
    "top_k": "rlvr's training sampler has temperature and top-p only: grpo.temperature, "
    "grpo.top_p (TRL's top_k)",
    "min_p": "rlvr's training sampler has temperature and top-p only: grpo.temperature, "
    "grpo.top_p (TRL's min_p)",
    "repetition_penalty": "rlvr's training sampler has temperature and top-p only: "
    "grpo.temperature, grpo.top_p (TRL's repetition_penalty)",
    # verl / OpenRLHF
    "kl_loss_coef": "verl's kl_loss_coef is rlvr's algo.kl_coef",
    "init_kl_coef": "OpenRLHF's init_kl_coef is rlvr's algo.kl_coef",
    "kl_loss_type": "verl's kl_loss_type is rlvr's algo.kl_estimator (k1, k2, k3)",
    "clip_ratio": "verl's clip_ratio is rlvr's algo.clip_eps",
    "eps_clip": "OpenRLHF's eps_clip is rlvr's algo.clip_eps",
    "ppo_epochs": "verl's ppo_epochs is rlvr's grpo.mu",
    "n_samples_per_prompt": "OpenRLHF's n_samples_per_prompt is rlvr's grpo.group_size",
    "advantage_estimator": "verl's / OpenRLHF's advantage_estimator is rlvr's algo.advantage",
}


class RunConfig(ConfigSection):
    """A whole run. Load with :func:`rlvr.configio.load_config`; saved resolved as
    ``config.yaml`` in the run directory."""

    foreign_keys: ClassVar[dict[str, str]] = FOREIGN_KEYS  # hints for unknown keys (configio)
    # A preset's generator mixtures belong to its task source: `--set data.source=...` on it
    # drops them (the new source's defaults apply), `--set data.path=...` its training
    # mixture, unless they are set too (rlvr.configio).
    bound_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        "data.source": ("data.mixture", "data.train_mixture"),
        "data.path": ("data.train_mixture",)}

    name: str = Field("arithmetic", description="Run name (used in the default run dir).")
    seed: int = Field(0, ge=0, le=MAX_SEED,
                      description="Seeds data, sampling and initialisation: the same seed on "
                      "the same machine gives the same numbers. At most 2**32 - 1 (what "
                      "`random`, `torch` and numpy all accept as a seed).")
    output_dir: str | None = Field(None, description="Run directory; default "
                                   "runs/<name>-<timestamp>.")
    threads: int = Field(0, ge=0, le=MAX_WORKERS,
        description="torch intra-op threads (0 = all cores).")
    plugins: list[str] = Field(
        default_factory=list,
        description="Python modules imported before the rest of the config is validated, so "
        "that what they register can be named in it: a task source of your own "
        "(`@register_source`) as `data.source`, or anything else registered at import. "
        "Modules the verifier workers must import too go in `reward.plugins`.")
    model: ModelConfig = Field(
        default_factory=ModelConfig,
        description="The policy model: which one, its compute precision, LoRA.")
    data: DataConfig = Field(
        default_factory=DataConfig,
        description="Where the tasks come from: a generator or files, mixtures, sizes, tiers, the "
        "prompt's instruction.")
    sft: SFTConfig = Field(
        default_factory=SFTConfig,
        description="The SFT cold start on verified worked solutions before GRPO (R17).")
    grpo: GRPOConfig = Field(
        default_factory=GRPOConfig,
        description="The GRPO loop: sizes, optimizer, sampling, the update's micro-batches and "
        "processes.")
    algo: AlgoConfig = Field(
        default_factory=AlgoConfig,
        description="The GRPO-family choices: advantage estimator, policy loss, loss aggregation, "
        "KL, length shaping.")
    rollout: RolloutConfig = Field(
        default_factory=RolloutConfig,
        description="How completions are generated: the rollout engine and the Ray scale-out "
        "(R22).")
    reward: RewardConfig = Field(
        default_factory=RewardConfig,
        description="How completions are scored: components and weights, format rules, verifier "
        "options, time limits (rlvr.rewards.config.RewardConfig).")
    env: EnvConfig | None = Field(
        None,
        description="Multi-turn episodes (rlvr.envs.EnvConfig): with this section every GRPO "
        "rollout, validation and pass@k plays episodes of the named environment (`tool`: the "
        "model may call tools; `single_turn`: today's one turn, through the episode path); the "
        "loss, KL, entropy and length statistics count only the sampled tokens, never the "
        "inserted observations. `grpo.max_new_tokens` / `eval.max_new_tokens` cap each turn; "
        "length shaping (`algo.overlong_buffer`, `length_penalty`) measures an episode's sampled "
        "tokens against `env.max_episode_tokens`, else `max_turns` x `grpo.max_new_tokens`. "
        "Absent or null (default): single-turn completions.")
    eval: EvalConfig = Field(
        default_factory=EvalConfig,
        description="Validation during and after training, and the pass@k evaluation (R28, R29, "
        "R32).")
    checkpoint: CheckpointConfig = Field(
        default_factory=CheckpointConfig,
        description="How often checkpoints are written and how many are kept (R21).")
    health: HealthConfig = Field(
        default_factory=HealthConfig,
        description="Training health checks, their thresholds and actions: warn, stop or roll "
        "back (R21, R34-R38; rlvr.monitor.config.HealthConfig).")
    logging: LoggingConfig = Field(
        default_factory=LoggingConfig,
        description="Where metrics go besides the run's JSONL logs: TensorBoard, W&B, MLflow "
        "(R40).")

    @model_validator(mode="before")
    @classmethod
    def _import_plugins(cls, data):
        # Before the sections are validated: data.source is checked against the task source
        # registry, which a plugin's @register_source adds to when it is imported.
        plugins = data.get("plugins") if isinstance(data, dict) else None
        if isinstance(plugins, list) and all(isinstance(m, str) for m in plugins):
            try:
                load_plugins(plugins)
            except ImportError as exc:
                raise ValueError(f"plugins: cannot import {exc.name or exc}") from None
        return data

    @model_validator(mode="before")
    @classmethod
    def _env_tasks(cls, data):
        # env.source: verifiers supplies the tasks: data.source / data.mixture follow from it
        # (source verifiers_episodes, the module with its kwargs) and may be left out.
        if not isinstance(data, dict):
            return data
        env = data.get("env")
        env = env.model_dump() if isinstance(env, EnvConfig) else env
        if not isinstance(env, dict) or env.get("source") != "verifiers" \
                or not isinstance(env.get("module"), str):
            return data
        section = data.get("data")
        model = isinstance(section, DataConfig)  # a built config (e.g. on assignment)
        fields = section.model_dump(exclude_unset=True) if model else dict(section or {})
        fields = verifiers_data(fields, env["module"], env.get("kwargs") or {})
        data = dict(data)
        data["data"] = DataConfig(**fields) if model else fields
        return data

    @model_validator(mode="after")
    def _check_names(self) -> RunConfig:
        # (the algo names are checked by AlgoConfig against the rlvr.algo registries)
        ENGINES.check(self.rollout.engine)
        self._check_quantization()
        self._check_async()
        if needs_data_path(self.data.source) and not self.data.path and not self.data.sources:
            raise ValueError(f"data.path: required for data.source={self.data.source!r}")
        for i, spec in enumerate(self.data.sources):
            if needs_data_path(spec.source) and not spec.path:
                raise ValueError(f"data.sources.{i}.path: required for source {spec.source!r}")
        sources = [s.source for s in self.data.sources] or [self.data.source]
        options = self.reward.verifier_options
        options.setdefault("math", {})  # always present in the resolved config, as it was
        for name in sources:  # a source's verifier defaults (arithmetic, gsm8k: math's
            for task_type, defaults in task_source(name).verifier_defaults.items():
                for key, value in defaults.items():  # accept_unevaluated off)
                    options.setdefault(task_type, {}).setdefault(key, value)
        return self

    def _check_async(self) -> None:
        """``grpo.max_staleness`` >= 1 samples single-turn completions in worker processes or
        Ray actors: no episodes, no int8 rollout engine in this process, no vLLM worker
        process (vLLM samples on a GPU through Ray only)."""
        if not self.grpo.max_staleness:
            return
        k = self.grpo.max_staleness
        if self.env is not None:
            raise ValueError(f"grpo.max_staleness: {k} (asynchronous rollouts) samples "
                             f"single-turn completions; it cannot be combined with an env "
                             f"section (multi-turn episodes); set grpo.max_staleness: 0")
        if self.rollout.quantization != "none":
            raise ValueError(f"grpo.max_staleness: {k} samples in rollout worker processes; "
                             f"rollout.quantization: {self.rollout.quantization} runs in this "
                             f"process only; set one of them to its default (0 / none)")
        if self.rollout.engine not in ("torch", "hf") and not self.rollout.ray_address:
            raise ValueError(f"grpo.max_staleness: {k}: the local rollout worker process runs "
                             f"the torch or hf engine, not rollout.engine "
                             f"{self.rollout.engine!r}; use rollout.ray_address for it")

    def _check_quantization(self) -> None:
        """``rollout.quantization: int8`` needs the torch engine in this process (no Ray) and
        fp32 compute; it turns on truncated importance sampling (``algo.tis_cap``
        :data:`~rlvr.algo.importance.DEFAULT_TIS_CAP`) unless a cap is set (0: off)."""
        if self.rollout.quantization == "none":
            return
        if self.rollout.engine != "torch":
            raise ValueError(f"rollout.quantization: {self.rollout.quantization} is implemented "
                             f"by the torch engine only, not rollout.engine "
                             f"{self.rollout.engine!r}; set rollout.quantization: none")
        if self.rollout.ray_address:
            raise ValueError("rollout.quantization: int8 runs in this process's torch engine; "
                             "it cannot be combined with rollout.ray_address (Ray rollout "
                             "workers); set rollout.quantization: none")
        if self.model.precision == "bf16":
            raise ValueError("rollout.quantization: int8 runs fp32 activations; it cannot be "
                             "combined with model.precision: bf16 (use fp32 or auto)")
        if self.algo.tis_cap is None:
            self.algo.tis_cap = DEFAULT_TIS_CAP


# Settings a resumed run cannot change (``rlvr train --resume RUN --set KEY=VALUE``): what the
# checkpoint or the run's start already fixed. A prefix covers its whole section.
RESUME_FIXED: dict[str, str] = {
    "name": "it only names a new run's directory; a resumed run continues in its --resume "
            "directory",
    "output_dir": "a resumed run continues in its --resume directory",
    "seed": "the data, the sampler's position and the RNG states come from the saved run and "
            "its checkpoint",
    "model.name": "the policy (and a LoRA run's base model) comes from the checkpoint",
    "model.lora_rank": "the checkpoint holds the run's weights as they were trained (full "
                       "weights, or an adapter of the saved rank)",
    "model.lora_alpha": "the checkpoint's adapter keeps the scaling it was trained with",
    "data": "the training and validation tasks and the sampler's position are the saved "
            "run's",
    "sft": "SFT ran before the first checkpoint",
    "grpo.learning_rate": "the optimizer and scheduler state restored from the checkpoint "
                          "carry the learning rate (and any rollback's scaling)",
    "grpo.weight_decay": "the optimizer state restored from the checkpoint carries it",
    "eval.base_model": "the base model is validated (or not) when the run starts",
    "eval.no_tool_baseline": "the model before SFT is validated without the tool (or not) "
                             "when the run starts",
    "eval.max_new_tokens": "the baseline validation ran with the saved value; later "
                           "validations must match it to be comparable",
    "eval.pass_at_k_samples": "the baseline pass@k was sampled with the saved value; the "
                              "trained one must match it to be comparable",
    "eval.temperature": "the baseline pass@k was sampled with the saved value; the trained "
                        "one must match it to be comparable",
}
RESUME_HINT = ("to change it, start a new run from a checkpoint: rlvr train --set "
               "model.name=RUN/checkpoints/step-N --set sft.enabled=false ...")


def _leaves(data, prefix: str = "") -> dict[str, object]:
    if isinstance(data, dict) and data:
        out: dict[str, object] = {}
        for key, value in data.items():
            out.update(_leaves(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def resume_conflicts(saved: RunConfig, resumed: RunConfig, overrides: list[str]) -> list[str]:
    """Why the ``--set`` overrides given with ``--resume`` cannot apply: one message per
    setting they change that the checkpoint or the run's start fixed (:data:`RESUME_FIXED`;
    also ``algo.kl_coef`` under the adaptive controller, whose current value is restored
    from the checkpoint). ``saved`` is the run's ``config.yaml``, ``resumed`` the same with
    the overrides; empty when everything they change applies."""
    before, after = _leaves(saved.model_dump(mode="json")), _leaves(resumed.model_dump(mode="json"))
    fixed = dict(RESUME_FIXED)
    if saved.algo.kl_controller == "adaptive" and resumed.algo.kl_controller == "adaptive":
        fixed["algo.kl_coef"] = ("the adaptive KL controller's current coefficient is "
                                 "restored from the checkpoint (algo.kl_coef is only its "
                                 "starting value)")
    problems = []
    for path in sorted(set(before) | set(after)):
        if before.get(path) == after.get(path):
            continue
        rule = next((k for k in fixed if path == k or path.startswith(k + ".")), None)
        if rule is None:
            continue
        text = override_for(tuple(path.split(".")), overrides)
        origin = f"--set {text!r}" if text else "--set"
        problems.append(f"{origin}: {path} cannot change on --resume ({before.get(path)!r} in "
                        f"the run): {fixed[rule]}")
    return problems


def _advantage_options(config: RunConfig) -> dict:
    return ADVANTAGE_ESTIMATORS.options(config.algo.advantage, config)


def config_summary(config: RunConfig, full: str | None = None) -> list[str]:
    """The run's main settings in about a dozen short lines, one per section (what a console
    shows at the start; ``config.yaml`` keeps every field). ``full`` names where the whole
    resolved config is (the run's ``config.yaml``) in the first line."""
    c = config
    where = f"; every setting: {full}" if full else ""
    lines = [f"config {c.name} (seed {c.seed}){where}"]

    def row(section: str, text: str) -> None:
        lines.append(f"  {section:<10} {text}")

    m = c.model
    row("model", f"{m.name}, precision {m.precision}, "
        + (f"LoRA rank {m.lora_rank} (alpha {m.lora_alpha:g})" if m.lora_rank
           else "full fine-tuning"))
    d = c.data
    if d.sources:
        row("data", ", ".join(f"{s.name or s.source} {s.weight:g}" for s in d.sources)
            + f"; {d.train_size} train, {d.val_size} validation per source by default")
    else:
        if in_process(d):
            sizes = f"{d.mixture}: {d.train_size} train"
            if d.train_mixture:
                sizes = (f"{d.train_size} train ({d.train_mixture}), validation mixture "
                         f"{d.mixture}")
        else:   # a file: its own tasks (train_size does not apply)
            sizes = f"{d.path or '?'}: the file's tasks"
        if d.val_path:
            sizes += f", validation {d.val_path}" + (f" (first {d.val_size})" if d.val_size else "")
        else:
            sizes += f", {d.val_size or 'a default number of'} validation"
        row("data", f"{d.source} {sizes}" + (", one-shot" if d.one_shot else ""))
    s = c.sft
    # as cold_start.sft picks them: from sft.mixture (a source with sft_mixture: arithmetic),
    # else the training tasks
    what = (f"{s.examples} examples ({s.mixture})" if s.mixture
            and task_source(d.source).sft_mixture and not d.sources
            else f"the first {s.examples} training tasks' solutions")
    if s.demonstrations == "tool":
        what += " as tool-use demonstrations"
    row("sft", "off" if not s.enabled else
        f"{what} x {s.epochs} epoch{'s' if s.epochs > 1 else ''}, batch {s.batch_size}, "
        f"lr {s.learning_rate:g}, max length {s.max_length}")
    g = c.grpo
    row("grpo", f"{g.steps} steps x {g.prompts_per_step} prompts x {g.group_size} "
        f"completions, lr {g.learning_rate:g}, T {g.temperature:g}, top-p {g.top_p:g}, "
        f"max {g.max_new_tokens} new tokens"
        + (f", mu {g.mu}" if g.mu > 1 else "")
        + (f", {g.update_processes} update processes" if g.update_processes > 1 else "")
        + (f"; output: EMA of the weights, decay {g.ema_decay:g}" if g.ema_decay else ""))
    a = c.algo
    kl = ("no KL" if a.kl_coef == 0 else
          f"KL {a.kl_coef:g} ({a.kl_estimator} in the {a.kl_in}, {a.kl_controller})")
    shaping = [f"{name} {value:g}" for name, value in (
        ("overlong_buffer", a.overlong_buffer), ("length_penalty", a.length_penalty),
        ("concise_bonus", a.concise_bonus), ("entropy_coef", a.entropy_coef),
        ("reward_noise", a.reward_noise), ("ref_refresh_every", a.ref_refresh_every),
        ("tis_cap", a.tis_cap)) if value]
    row("algo", f"advantage {a.advantage}"
        + (f" (std {a.std_scale})" if "std_scale" in _advantage_options(c) else "")
        + (f" (negatives x {a.negative_advantage_scale:g})"
           if a.negative_advantage_scale != 1.0 else "")
        + f", loss {a.policy_loss}, agg {a.loss_agg}, {kl}"
        + "".join(f", {x}" for x in shaping + (["mask_truncated"] if a.mask_truncated else [])))
    r = c.rollout
    row("rollout", f"{r.engine} engine"
        + (f", {r.quantization} weights" if r.quantization != "none" else "") + (
        f", Ray {r.ray_address}: {r.ray_rollout_workers} rollout / {r.ray_reward_workers} "
        f"reward workers" if r.ray_address else ""))
    v = c.env
    if v is not None:
        row("env", f"{v.name}" + (f" {v.module}" + (f" {v.kwargs}" if v.kwargs else "")
                                   if v.source == "verifiers" else "")
            + f", max {v.max_turns} turns"
            + (f", {v.max_episode_tokens} tokens" if v.max_episode_tokens else "")
            + (f", tools {', '.join(v.tools)} ({v.tool_timeout_s:g} s, "
               f"{v.tool_output_bytes} bytes)" if v.name == "tool" else ""))
    w = c.reward
    row("reward", " + ".join(f"{k} {v:g}" for k, v in w.weights.items())
        + f" ({w.aggregator}), {w.workers} verifier worker{'s' if w.workers > 1 else ''}, "
        f"timeout {w.timeout_s:g} s"
        + "".join(f" ({t} {v:g} s)" for t, v in w.timeout_overrides_s.items())
        + (f", verifiers {w.verifiers}" if w.verifiers else "")
        + (f", plugins {', '.join(w.plugins)}" if w.plugins else ""))
    e = c.eval
    row("eval", (f"every {e.every} steps" if e.every else "at the start and the end")
        + f", greedy, {e.max_new_tokens} new tokens; "
        + (f"pass@k n = {e.pass_at_k_samples} at T {e.temperature:g}"
           if e.pass_at_k_samples else "no pass@k")
        + ("; base model too" if e.base_model else ""))
    k = c.checkpoint
    row("checkpoint", (f"every {k.every} steps" if k.every else "at the end")
        + f", keep {k.keep}")
    h = c.health
    checks = [getattr(h, name) for name, f in type(h).model_fields.items()
              if hasattr(getattr(h, name), "action")]
    on = [x for x in checks if x.enabled]
    actions = {act: sum(x.action == act for x in on) for act in ("warn", "rollback", "stop")}
    row("health", "off" if not h.enabled else
        f"{len(on)} checks (" + ", ".join(f"{n} {act}" for act, n in actions.items() if n) + ")")
    log = c.logging
    sinks = (["tensorboard"] if log.tensorboard else []) + (
        [f"wandb {log.wandb_project}"] if log.wandb_project else []) + (
        [f"mlflow {log.mlflow_tracking_uri}"] if log.mlflow_tracking_uri else [])
    row("logging", ", ".join(["metrics.jsonl", *sinks]))
    return lines

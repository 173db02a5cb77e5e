"""The run config: one YAML file describes a run (R41). Field docs are the user documentation.

Sections: ``model``, ``data``, ``sft`` (cold start, R17), ``grpo`` (loop sizes, optimiser,
sampling), ``algo`` (the pure-function choices: advantage, policy loss, KL), ``rollout``,
``reward`` (:class:`rlvr.rewards.config.RewardConfig`), ``eval``, ``checkpoint``, ``health``
(:class:`rlvr.monitor.config.HealthConfig`: checks, thresholds, actions) and ``logging``
(:class:`rlvr.monitor.sinks.LoggingConfig`: TensorBoard, W&B, MLflow).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlvr.models.loader import DEFAULT_MODEL
from rlvr.models.precision import Precision, resolve_precision
from rlvr.monitor.config import HealthConfig
from rlvr.monitor.sinks import LoggingConfig
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.registry import load_plugins
from rlvr.tasks.config import (DEFAULT_INSTRUCTION, ConfigSection, DataConfig,  # noqa: F401
                               DataSource, SourceName, carry_instruction, check_mixture,
                               default_instruction)

_Section = ConfigSection


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



class ModelConfig(_Section):
    name: str = Field(DEFAULT_MODEL, description="`smollm2-135m-instruct` (embedded default), "
                      "`tiny-random` (tests), or any Hugging Face causal LM path / hub id.")
    precision: Precision = Field(
        "auto", description="Compute precision of every path (SFT, the GRPO update, the "
        "rollout engine's weight snapshot and kernels, the KL reference, validation, `rlvr "
        "eval` / `serve` / `data stratify`): `bf16` (autocast; bf16 weight snapshots), `fp32`, "
        "or `auto` (default): bf16 where the device computes it natively (a CPU with "
        "AVX512-BF16 or AMX, a CUDA GPU with bf16), fp32 elsewhere (AVX2-only CPUs emulate "
        "bf16 ~85x slower than fp32). Master weights, log-probs, advantages and KL are fp32 "
        "in both (R13). The run prints and saves the choice and why (results.json "
        "`precision`); `config.yaml` records the resolved value.")
    lora_rank: int = Field(0, ge=0, description="LoRA rank via peft; 0 = full fine-tuning.")
    lora_alpha: float = Field(32.0, gt=0, description="LoRA alpha (scaling = alpha / rank).")

    @property
    def bf16(self) -> bool:
        """Whether compute runs in bf16: ``precision`` resolved against this machine
        (:func:`rlvr.models.precision.resolve_precision`; a run stores the resolved value)."""
        return resolve_precision(self.precision).bf16

    @model_validator(mode="before")
    @classmethod
    def _renamed_bf16(cls, data):
        if isinstance(data, dict) and "bf16" in data:
            value = data["bf16"]
            raise ValueError(f"model.bf16 was replaced by model.precision (auto | bf16 | fp32); "
                             f"use model.precision: {'bf16' if value else 'fp32'} (or auto)")
        return data


class SFTConfig(_Section):
    enabled: bool = Field(True, description="Run the SFT cold start before GRPO (R17).")
    examples: int = Field(1000, ge=1, description="Worked solutions to train on (only those "
                          "whose final answer verifies are kept).")
    mixture: str | None = Field(None, description="Arithmetic only: draw the SFT examples from "
                                "this difficulty mixture (e.g. easy `1dop1d`, to teach the output "
                                "format and leave the skill to RL) instead of the training set. "
                                "Problems come from the train split, never validation.")
    epochs: int = Field(1, ge=1, description="Passes over the SFT examples.")
    batch_size: int = Field(16, ge=1, description="Sequences per optimizer step.")
    learning_rate: float = Field(5e-5, gt=0, description="Peak LR (linear warm-up over 5% "
                                 "of steps, then linear decay). Higher than GRPO's (R20).")
    max_length: int = Field(320, ge=16, description="Max tokens of prompt + solution; longer "
                            "examples are cut (counted and logged), those left without an "
                            "answer token dropped; none left is refused.")
    checkpoint_every: int = Field(50, ge=0, description="`rlvr train`: write the SFT state "
                                  "(model, optimizer, scheduler, data position, RNG) to "
                                  "RUN/sft_checkpoint.pt every K optimizer steps, so `--resume` "
                                  "after a kill during SFT continues it (the same result as an "
                                  "uninterrupted SFT); removed once sft_model/ is saved. 0 = "
                                  "none: a resume restarts SFT from its first step.")
    full_finetune: bool = Field(True, description="With `model.lora_rank` set: SFT trains all "
                                "weights (default: a few hundred adapter steps do not teach a "
                                "small model the answer format), GRPO then trains fresh LoRA "
                                "adapters on top of the SFT model, which is also the frozen KL "
                                "reference. false: SFT trains its own adapters (no AdamW "
                                "moments for the full weights: less memory), merged into "
                                "sft_model/ before GRPO's fresh adapters.")


class GRPOConfig(_Section):
    steps: int = Field(40, ge=0, description="GRPO steps (each: rollout, reward, update).")
    prompts_per_step: int = Field(8, ge=1, description="Prompts (groups) per step.")
    group_size: int = Field(8, ge=2, description="G completions per prompt (R12: 4-8 math, "
                            "8-16 code). Must be >= 2 for a group-relative advantage.")
    learning_rate: float = Field(2e-6, gt=0, description="AdamW LR (constant after warm-up).")
    warmup_steps: int = Field(0, ge=0, description="Optimizer steps of linear learning-rate "
                              "warm-up of the GRPO update (0 = none).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of the GRPO "
                                "update.")
    max_grad_norm: float = Field(1.0, gt=0, description="Global gradient-norm clip.")
    micro_batch_size: int = Field(16, ge=1, description="Completions per forward/backward; "
                                  "gradients are accumulated over the step's completions.")
    shared_prefix: bool = Field(True, description="Compute each prompt once per micro-batch "
                                "and share its KV cache (with gradients) across the group's "
                                "completions: same loss, far fewer tokens when prompts are "
                                "longer than completions (src/rlvr/models/forward.py).")
    update_processes: int = Field(1, ge=1, description="Processes for the policy update (data "
                                  "parallel, accelerate DDP over gloo). This process (rank 0) "
                                  "runs rollouts, rewards, evaluation and checkpoints; each step "
                                  "it sends the trainable rows to the other ranks, every rank "
                                  "computes the gradient of its contiguous shard, DDP averages "
                                  "them and all take the same optimizer step: the update of one "
                                  "process up to float summation order. Each rank gets "
                                  "`threads / update_processes` threads for the update "
                                  "(src/rlvr/distributed/update_group.py). 1 = single process.")
    mu: int = Field(1, ge=1, description="Policy updates per rollout batch (with mu > 1 the "
                    "old log-probs are kept from before the first update).")
    temperature: float = Field(1.0, gt=0, description="Training sampling temperature (R18 "
                               "suggests 1.2-1.5 for exploration on large models).")
    top_p: float = Field(1.0, gt=0, le=1, description="Training nucleus-sampling top_p "
                         "(R18: 0.9 for exploration; 1 = off).")
    max_new_tokens: int = Field(96, ge=1, description="Completion length cap in tokens; a "
                                "completion that hits it is 'truncated' (R19).")
    filter_groups_after: int = Field(0, ge=0, description="Dynamic sampling (DAPO sec. 3.2, "
                                     "verl's filter_groups): a prompt whose group was all-correct "
                                     "or all-wrong on each of its last m visits is skipped when "
                                     "drawn and replaced by the next prompt (counted as "
                                     "`data/skipped`). 0 = off.")


class AlgoConfig(_Section):
    """The GRPO-family choices (rlvr.algo registries; formulas and papers in each function's
    docstring and in docs/algorithms.md)."""

    advantage: str = Field("grpo", description="Advantage estimator: grpo (Shao et al. 2024), "
                           "dr_grpo (Liu et al. 2025: no std scaling), rloo (leave-one-out "
                           "baseline, Ahmadian et al. 2024), reinforce_pp_baseline (Hu 2025).")
    std_scale: Literal["group", "batch", "none"] = Field("group", description="Std used by "
                                                         "the grpo advantage.")
    policy_loss: str = Field("clip", description="clip (PPO, symmetric eps), clip_higher "
                             "(DAPO: eps_low / eps_high), dual_clip (Ye et al. 2020).")
    clip_eps: float = Field(0.2, gt=0, description="Clip epsilon (eps_low for clip_higher).")
    clip_eps_high: float = Field(0.28, gt=0, description="eps_high of clip_higher (DAPO).")
    loss_agg: str = Field("grpo", description="grpo (per-sequence token mean, then mean), "
                          "bnpo (token mean over the micro-batch), dapo (token mean over the "
                          "step), dr_grpo (sum / constant max length).")
    kl_coef: float = Field(0.01, ge=0, description="beta of the KL penalty to the frozen "
                           "reference (R15: sweep 0.001, 0.003, 0.01, 0.03). 0 = no reference.")
    kl_estimator: str = Field("k3", description="Schulman's KL "
                              "estimators (k3: unbiased, >= 0).")
    kl_in: Literal["loss", "reward"] = Field("loss", description="`loss`: + beta * KL per "
                                             "token in the loss (GRPO); `reward`: R - beta * "
                                             "sum_t KL folded into the reward before the "
                                             "advantage (PPO / REINFORCE++ style).")
    kl_controller: Literal["fixed", "adaptive"] = Field("fixed", description="`adaptive`: "
                                                        "beta steered toward `kl_target` "
                                                        "(Ziegler et al. 2019), logged as "
                                                        "`kl_coef`.")
    kl_target: float = Field(0.02, gt=0, description="Target token-mean KL (nats) of the "
                             "adaptive controller.")
    ref_refresh_every: int = Field(0, ge=0, description="Replace the reference by the current "
                                   "policy every K steps (a periodic reference reset); 0 = never.")
    reward_noise: float = Field(0.0, ge=0, description="Gaussian reward noise sigma (R14).")
    overlong_buffer: int = Field(0, ge=0, description="DAPO soft overlong punishment: "
                                 "completions within this many tokens of `grpo.max_new_tokens` "
                                 "lose up to `overlong_penalty` reward linearly, truncated ones "
                                 "all of it (R19); 0 = off.")
    overlong_penalty: float = Field(1.0, ge=0, description="Scale of that punishment.")
    mask_truncated: bool = Field(False, description="Truncated completions (hit the cap) get "
                                 "no gradient (DAPO overlong filtering); they still count in "
                                 "their group's statistics.")
    length_penalty: float = Field(0.0, ge=0, description="Linear length penalty coef * "
                                  "|y| / max_new_tokens subtracted from the reward (R19).")
    concise_bonus: float = Field(0.0, ge=0, description="Kimi k1.5 group-relative length "
                                 "reward: + up to coef/2 for the shortest correct answers of a "
                                 "group, - for long ones (wrong answers only penalised).")
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus weight (subtracted from "
                                "the loss); entropy is logged always.")

    @field_validator("advantage", "policy_loss", "loss_agg", "kl_estimator")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        # Checked against the rlvr.algo registries, not a Literal: a newly registered
        # variant is selectable with no edit here. Imported lazily (rlvr.algo needs torch).
        from rlvr.algo import registry

        table = {"advantage": registry.ADVANTAGE_ESTIMATORS,
                 "policy_loss": registry.POLICY_LOSSES,
                 "loss_agg": registry.LOSS_AGGREGATIONS,
                 "kl_estimator": registry.KL_ESTIMATORS}[info.field_name]
        if name not in table:
            # a custom error type: its message is shown as is (no "Value error, " prefix)
            raise PydanticCustomError("unregistered", "{message}",
                                      {"message": table.unknown_message(name)})
        return name

    @model_validator(mode="after")
    def _kl_settings(self) -> "AlgoConfig":
        if self.kl_controller == "adaptive" and self.kl_coef <= 0:
            raise ValueError("kl_controller: adaptive needs kl_coef > 0 (its starting value)")
        if self.ref_refresh_every and self.kl_coef <= 0:
            raise ValueError("ref_refresh_every needs kl_coef > 0 (there is no reference)")
        return self


class RolloutConfig(_Section):
    engine: str = Field("torch", description="Rollout engine: `torch` (fast CPU decoder), "
                        "`hf` (transformers generate) or `vllm` (CUDA GPU, `pip install "
                        "rlvr[vllm]`).")
    ray_address: str | None = Field(None, description="Scale-out (R22): run rollouts and "
                                    "reward scoring in Ray actors (`pip install rlvr[ray]`). "
                                    "Unset (default): no Ray, everything in this process. "
                                    "`local`: start a private in-process Ray cluster on this "
                                    "machine (shut down when the run ends). Anything else is "
                                    "an existing cluster's address (e.g. `auto` or "
                                    "`ray://host:10001`), left running. Each rollout worker runs "
                                    "`engine` on its own copy of the policy, refreshed before "
                                    "every rollout; the prompts of a call are split into "
                                    "contiguous shards, one per worker, shard k sampled with a "
                                    "seed derived from (seed, its first prompt's index), so a "
                                    "run is reproducible for a given worker count and with one "
                                    "rollout worker equals the single-process run, while with "
                                    "several it matches it in distribution, not sample for "
                                    "sample (src/rlvr/distributed/ray_workers.py).")
    ray_rollout_workers: int = Field(2, ge=1, description="Rollout actors. Each asks Ray for "
                                     "1 CPU and runs `threads` torch threads when set, else an "
                                     "equal share of this machine's cores (`ray_address: "
                                     "local`) or Ray's default (one per CPU it was given). Only "
                                     "used with `ray_address`.")
    ray_reward_workers: int = Field(1, ge=1, description="Reward actors; each runs a reward "
                                    "pipeline with `reward.workers` verifier processes, and a "
                                    "batch of completions is split over them in contiguous "
                                    "chunks. Verifiers that tests or scripts register at "
                                    "runtime must come from `reward.plugins` to exist in the "
                                    "actors. Only used with `ray_address`.")


class EvalConfig(_Section):
    every: int = Field(10, ge=0, description="Validate every K GRPO steps (0 = start and end "
                       "only). Greedy pass@1 and mean reward on the validation set.")
    max_new_tokens: int = Field(128, ge=1, description="Completion length cap in tokens of "
                                "validation and pass@k evaluation.")
    batch_size: int = Field(64, ge=1, description="Prompts per generation call.")
    base_model: bool = Field(False, description="Also evaluate the model before SFT.")
    pass_at_k_samples: int = Field(16, ge=0, description="Samples per validation problem for "
                                   "the baseline vs trained pass@k / maj@k at k = 1, 4, 8, 16 "
                                   "(R29; n of them, k <= n); 0 disables.")
    temperature: float = Field(0.7, ge=0, description="Sampling temperature of that pass@k "
                               "evaluation (R18: 0.6-0.8).")


class CheckpointConfig(_Section):
    every: int = Field(0, ge=0, description="Checkpoint every K GRPO steps (0 = at the end).")
    keep: int = Field(2, ge=1, description="Checkpoints kept (oldest removed first).")


class RunConfig(_Section):
    """A whole run. Load with :func:`rlvr.configio.load_config`; saved resolved as
    ``config.yaml`` in the run directory."""

    foreign_keys: ClassVar[dict[str, str]] = FOREIGN_KEYS  # hints for unknown keys (configio)

    name: str = Field("arithmetic", description="Run name (used in the default run dir).")
    seed: int = Field(0, description="Seeds data, sampling and initialisation: the same seed "
                      "on the same machine gives the same numbers.")
    output_dir: str | None = Field(None, description="Run directory; default "
                                   "runs/<name>-<timestamp>.")
    threads: int = Field(0, ge=0, description="torch intra-op threads (0 = all cores).")
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

    @model_validator(mode="after")
    def _check_names(self) -> "RunConfig":
        from rlvr.rollout import engine_names

        # (the algo names are checked by AlgoConfig against the rlvr.algo registries)
        engines = engine_names()
        if self.rollout.engine not in engines:
            raise ValueError(f"rollout.engine: {self.rollout.engine!r} is unknown; choose from "
                             f"{sorted(engines)}")
        from rlvr.tasks.registry import needs_data_path, task_source

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
    from rlvr.configio import override_for

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
    from rlvr.algo.registry import ADVANTAGE_ESTIMATORS

    return ADVANTAGE_ESTIMATORS.options(config.algo.advantage, config)


def config_summary(config: RunConfig, full: str | None = None) -> list[str]:
    """The run's main settings in about a dozen short lines, one per section (what a console
    shows at the start; ``config.yaml`` keeps every field). ``full`` names where the whole
    resolved config is (the run's ``config.yaml``) in the first line."""
    from rlvr.tasks.registry import in_process, task_source

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
    row("sft", "off" if not s.enabled else
        f"{what} x {s.epochs} epoch{'s' if s.epochs > 1 else ''}, batch {s.batch_size}, "
        f"lr {s.learning_rate:g}, max length {s.max_length}")
    g = c.grpo
    row("grpo", f"{g.steps} steps x {g.prompts_per_step} prompts x {g.group_size} "
        f"completions, lr {g.learning_rate:g}, T {g.temperature:g}, top-p {g.top_p:g}, "
        f"max {g.max_new_tokens} new tokens"
        + (f", mu {g.mu}" if g.mu > 1 else "")
        + (f", {g.update_processes} update processes" if g.update_processes > 1 else ""))
    a = c.algo
    kl = ("no KL" if a.kl_coef == 0 else
          f"KL {a.kl_coef:g} ({a.kl_estimator} in the {a.kl_in}, {a.kl_controller})")
    shaping = [f"{name} {value:g}" for name, value in (
        ("overlong_buffer", a.overlong_buffer), ("length_penalty", a.length_penalty),
        ("concise_bonus", a.concise_bonus), ("entropy_coef", a.entropy_coef),
        ("reward_noise", a.reward_noise), ("ref_refresh_every", a.ref_refresh_every)) if value]
    row("algo", f"advantage {a.advantage}"
        + (f" (std {a.std_scale})" if "std_scale" in _advantage_options(c) else "")
        + f", loss {a.policy_loss}, agg {a.loss_agg}, {kl}"
        + "".join(f", {x}" for x in shaping + (["mask_truncated"] if a.mask_truncated else [])))
    r = c.rollout
    row("rollout", f"{r.engine} engine" + (
        f", Ray {r.ray_address}: {r.ray_rollout_workers} rollout / {r.ray_reward_workers} "
        f"reward workers" if r.ray_address else ""))
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

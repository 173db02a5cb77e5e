"""The sections of the run config (:class:`rlvr.train.config.RunConfig`) that belong to
training: ``model``, ``sft`` (cold start, R17), ``grpo`` (loop sizes, optimiser, sampling),
``algo`` (the pure-function choices: advantage, policy loss, KL), ``rollout``, ``eval`` and
``checkpoint``. Field docs are the user documentation (docs/config.md). The other sections
live with their packages: ``data`` (:mod:`rlvr.tasks.config`), ``reward``
(:mod:`rlvr.rewards.config`), ``health`` (:mod:`rlvr.monitor.config`) and ``logging``
(:mod:`rlvr.monitor.sinks`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlvr.algo import registry
from rlvr.algo.corrections import check_correction_fields
from rlvr.limits import (
    MAX_BATCH,
    MAX_BATCH_TOKENS,
    MAX_COEF,
    MAX_GROUP,
    MAX_LORA_RANK,
    MAX_LR,
    MAX_REPEATS,
    MAX_ROWS,
    MAX_STEPS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_WORKERS,
)
from rlvr.models.loader import DEFAULT_MODEL
from rlvr.models.precision import Precision, resolve_precision
from rlvr.rollout import ENGINES
from rlvr.tasks.config import ConfigSection


class ModelConfig(ConfigSection):
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
    lora_rank: int = Field(0, ge=0, le=MAX_LORA_RANK,
        description="LoRA rank via peft; 0 = full fine-tuning.")
    lora_alpha: float = Field(32.0, gt=0, le=MAX_COEF,
        description="LoRA alpha (scaling = alpha / rank).")

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


class SFTConfig(ConfigSection):
    enabled: bool = Field(True, description="Run the SFT cold start before GRPO (R17).")
    examples: int = Field(1000, ge=1, le=MAX_ROWS,
        description="Worked solutions to train on (only those whose final answer verifies are "
        "kept).")
    mixture: str | None = Field(None, description="`arithmetic` and `tool_arithmetic` only: "
                                "draw the SFT examples from this difficulty mixture (e.g. easy "
                                "`1dop1d`, to teach the output format and leave the skill to RL; "
                                "or tool demonstrations on some problem kinds only) instead of "
                                "the training set. Problems come from the train split, never "
                                "validation.")
    epochs: int = Field(1, ge=1, le=MAX_REPEATS, description="Passes over the SFT examples.")
    batch_size: int = Field(16, ge=1, le=MAX_BATCH, description="Sequences per optimizer step.")
    learning_rate: float = Field(5e-5, gt=0, le=MAX_LR,
        description="Peak LR (linear warm-up over 5% of steps, then linear decay). Higher than "
        "GRPO's (R20).")
    max_length: int = Field(320, ge=16, le=MAX_TOKENS,
        description="Max tokens of prompt + solution; longer examples are cut (counted and "
        "logged), those left without an answer token dropped; none left is refused.")
    checkpoint_every: int = Field(50, ge=0, le=MAX_STEPS,
        description="`rlvr train`: write the SFT state (model, optimizer, scheduler, data "
        "position, RNG) to RUN/sft_checkpoint.pt every K optimizer steps, so `--resume` after a "
        "kill during SFT continues it (the same result as an uninterrupted SFT); removed once "
        "sft_model/ is saved. 0 = none: a resume restarts SFT from its first step.")
    full_finetune: bool = Field(True, description="With `model.lora_rank` set: SFT trains all "
                                "weights (default: a few hundred adapter steps do not teach a "
                                "small model the answer format), GRPO then trains fresh LoRA "
                                "adapters on top of the SFT model, which is also the frozen KL "
                                "reference. false: SFT trains its own adapters (no AdamW "
                                "moments for the full weights: less memory), merged into "
                                "sft_model/ before GRPO's fresh adapters.")
    demonstrations: Literal["solutions", "tool"] = Field(
        "solutions", description="What an SFT example is. `solutions`: the task's worked "
        "solution as one assistant turn. `tool`: a tool-use episode of the run's `env` (which "
        "must offer `calculator`), played with scripted turns: the assistant calls "
        "`<calculator>EXPR</calculator>` with the task's `metadata.expression` (generated "
        "arithmetic tasks), the environment really runs the calculator and inserts its result "
        "as GRPO's episodes get it, then the assistant answers `EXPR = <result>` and "
        "`#### <result>`; only "
        "demonstrations whose answer the reward pipeline verifies correct are kept. The loss "
        "covers the assistant turns only (the prompt and the observation tokens are masked), "
        "on exactly the token sequence GRPO samples (src/rlvr/train/demonstrations.py).")


class GRPOConfig(ConfigSection):
    steps: int = Field(40, ge=0, le=MAX_STEPS,
        description="GRPO steps (each: rollout, reward, update).")
    prompts_per_step: int = Field(8, ge=1, le=MAX_BATCH, description="Prompts (groups) per step.")
    group_size: int = Field(8, ge=2, le=MAX_GROUP,
        description="G completions per prompt (R12: 4-8 math, 8-16 code). Must be >= 2 for a "
        "group-relative advantage.")
    learning_rate: float = Field(2e-6, gt=0, le=MAX_LR, description="AdamW peak LR (after warm-up; "
                                 "constant or decaying per grpo.lr_schedule).")
    warmup_steps: int = Field(0, ge=0, le=MAX_STEPS,
        description="Optimizer steps of linear learning-rate warm-up of the GRPO update (0 = "
        "none).")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        "constant", description="LR after the warm-up (TRL's lr_scheduler_type): constant "
        "(verl's default), or decaying to 0 at step grpo.steps, linearly (TRL's default) or "
        "along a half cosine. A decay makes the last steps small, so the final policy is not "
        "caught mid-swing; on a resume with another grpo.steps it ends at the new total.")
    ema_decay: float = Field(
        0.0, ge=0, lt=1, description="Exponential moving average of the policy's weights "
        "(Polyak averaging; WARP, Ramé et al. 2024): after every step `avg = d * avg + (1 - d) "
        "* policy`, starting from the weights that entered GRPO. The average is what "
        "validation, pass@k and checkpoints measure and save (the run's trained model); "
        "rollouts and the update keep using the policy itself, so the trajectory is that of a "
        "run without it (its weights are in each checkpoint's trainer_state.pt, for "
        "`--resume`). About the last 1 / (1 - d) steps count (0.9: ~10). Measured on the "
        "default preset (the same trajectories, greedy pass@1 on 1000 problems): see "
        "configs/arithmetic.yaml. 0 = off: the last iterate (src/rlvr/train/weight_average.py).")
    weight_decay: float = Field(0.0, ge=0, le=MAX_COEF,
        description="AdamW weight decay of the GRPO update.")
    max_grad_norm: float = Field(1.0, gt=0, le=MAX_COEF, description="Global gradient-norm clip.")
    micro_batch_size: int = Field(16, ge=1, le=MAX_BATCH,
        description="Completions per forward/backward; gradients are accumulated over the step's "
        "completions.")
    micro_batch_tokens: int | None = Field(
        None, ge=1, le=MAX_BATCH_TOKENS,
        description="Also cut micro-batches by padded completion tokens: a "
        "micro-batch holds at most this many (its rows times its longest completion; one row "
        "longer than this still runs alone). With `shared_prefix: step` the rows are sorted by "
        "completion length first, so one runaway completion pads only the few long rows "
        "instead of the whole step (verl's dynamic batch size bounds tokens the same way). "
        "A step that fits one micro-batch runs as before, bit for bit. Measured on the default "
        "preset (64 rows of ~17 tokens, one ~57; AVX2-only EPYC Zen 2, fp32): such a step's "
        "update 46 s in one micro-batch, 14-17 s with 1536; the run 27.2 -> 24.5 min. "
        "null: rows only (`micro_batch_size`).")
    activation_checkpointing: bool = Field(
        False, description="Keep only each decoder layer's input for the update's backward "
        "and re-run the layer's forward there (Chen et al. 2016): activation memory per token "
        "drops from ~15 hidden-sized and ~4 MLP-sized fp32 tensors per layer to one hidden-"
        "sized one, for about one more forward pass of compute. Same loss and gradient up to "
        "float rounding; the shared-prefix KV cache is kept (src/rlvr/models/"
        "activation_memory.py). For long completions on bigger models: see the guide "
        "'Bigger models and longer completions'.")
    logprob_chunk_tokens: int | None = Field(
        None, ge=1, le=MAX_BATCH_TOKENS,
        description="Run the update's language-model head, log-softmax and gather over this "
        "many completion positions at a time, each chunk recomputed in the backward, so the "
        "[rows, tokens, vocabulary] fp32 logits (and their gradient) never exist whole: 2,048 "
        "tokens of a 151,936-token vocabulary are 1.2 GB per row. Costs a second head matmul. "
        "One update process only (with `update_processes > 1` the head runs whole). null: "
        "the head over all positions at once.")
    shared_prefix: Literal["step", "micro_batch", "off"] = Field(
        "step", description="How the update runs the G completions' shared prompt. `step`: "
        "each distinct prompt once per optimizer step, its KV cache (with gradients) reused "
        "by every micro-batch and its gradient pushed through once at the end, so the rows "
        "can be sorted by length and each micro-batch pads to its own lengths "
        "(src/rlvr/models/step_prefix.py; the prompts' activations stay in memory for the "
        "step; a step of one micro-batch and data-parallel updates, `update_processes > 1`, "
        "run `micro_batch`). Measured on the tool preset's shapes (64 rows of 20-90 tokens, "
        "16-row micro-batches, fp32): `step` 41 s, `micro_batch` 51 s, `off` 86 s "
        "(benchmarks/update_prefix.py). "
        "`micro_batch`: once per micro-batch, rows in group order "
        "(src/rlvr/models/forward.py). `off`: every row with its own copy of the prompt. "
        "Same loss and gradient in all three, up to float rounding; `true` / `false` read as "
        "`step` / `off`.")

    @field_validator("shared_prefix", mode="before")
    @classmethod
    def _shared_prefix_bool(cls, value):
        return {True: "step", False: "off"}.get(value, value) if isinstance(value, bool) else value

    update_processes: int = Field(1, ge=1, le=MAX_WORKERS,
        description="Processes for the policy update (data parallel, accelerate DDP over gloo). "
        "This process (rank 0) runs rollouts, rewards, evaluation and checkpoints; each step it "
        "sends the trainable rows to the other ranks, every rank computes the gradient of its "
        "contiguous shard, DDP averages them and all take the same optimizer step: the update of "
        "one process up to float summation order. Each rank gets `threads / update_processes` "
        "threads for the update (src/rlvr/distributed/update_group.py). 1 = single process.")
    mu: int = Field(1, ge=1, le=MAX_REPEATS,
        description="Policy updates per rollout batch (with mu > 1 the old log-probs are kept from "
        "before the first update).")
    temperature: float = Field(1.0, gt=0, le=MAX_TEMPERATURE,
        description="Training sampling temperature (R18 suggests 1.2-1.5 for exploration on large "
        "models).")
    top_p: float = Field(1.0, gt=0, le=1, description="Training nucleus-sampling top_p "
                         "(R18: 0.9 for exploration; 1 = off).")
    max_new_tokens: int = Field(96, ge=1, le=MAX_TOKENS,
        description="Completion length cap in tokens; a completion that hits it is 'truncated' "
        "(R19).")
    filter_groups_after: int = Field(0, ge=0, le=MAX_STEPS,
        description="Dynamic sampling (DAPO sec. 3.2, verl's filter_groups): a prompt whose group "
        "was all-correct or all-wrong on each of its last m visits is skipped when drawn and "
        "replaced by the next prompt (counted as `data/skipped`). 0 = off.")
    dynamic_sampling_rounds: int = Field(0, ge=0, le=MAX_REPEATS,
        description="Dynamic sampling within a step (DAPO sec. 3.2, verl's filter_groups with "
        "max_num_gen_batches): while fewer than `prompts_per_step` groups have reward variance, "
        "roll out and score another `prompts_per_step` prompts, at most this many extra rounds; "
        "the update trains the first `prompts_per_step` groups with variance (so its cost stays "
        "that of a full batch; `sampling_rounds`, `dropped_groups` logged). 0 = off.")
    max_staleness: int = Field(0, ge=0, le=MAX_STEPS,
        description="Asynchronous rollouts: with k >= 1 a rollout worker keeps generating the "
        "next steps' groups with the newest weights it has while the trainer updates, and a "
        "step trains only on groups sampled at most k updates ago (older ones are dropped, "
        "`dropped_stale`); at most the groups of the next k + 1 steps are in flight. The "
        "worker is a process on this machine with half of `threads` (the trainer keeps the "
        "rest), or `rollout.ray_rollout_workers` Ray actors with `rollout.ray_address`. "
        "Metrics per step: `staleness_mean`, `staleness_max`, `staleness_hist_<s>`, "
        "`dropped_stale`, `seconds_trainer_idle`, `seconds_rollout_idle`, "
        "`seconds_weight_sync`. A dead or silent worker stops the run with an error naming it. "
        "Which weights sample a group depends on timing, so an asynchronous run is not "
        "reproducible bit for bit. Single-turn rollouts only (no `env` section, no "
        "`rollout.quantization`). 0 = the synchronous loop: every step samples with the "
        "current weights (docs/guides/async.md).")


    @model_validator(mode="after")
    def _update_shards(self) -> GRPOConfig:
        rows = self.prompts_per_step * self.group_size
        if self.update_processes > rows:
            # each process trains a contiguous shard of the step's rows: some would get none
            raise ValueError(f"update_processes: {self.update_processes} processes for "
                             f"{rows} completions a step (prompts_per_step "
                             f"{self.prompts_per_step} x group_size {self.group_size}); use at "
                             f"most {rows}")
        return self


class AlgoConfig(ConfigSection):
    """The GRPO-family choices (rlvr.algo registries; formulas and papers in each function's
    docstring and in docs/algorithms.md)."""

    advantage: str = Field("grpo", description="Advantage estimator, "
                           f"{registry.ADVANTAGE_ESTIMATORS.one_of()}: grpo (Shao et al. 2024), "
                           "dr_grpo (Liu et al. 2025: no std scaling), rloo (leave-one-out "
                           "baseline, Ahmadian et al. 2024), reinforce_pp_baseline (Hu 2025).")
    std_scale: Literal["group", "batch", "none"] = Field("group", description="Std used by "
                                                         "the grpo advantage.")
    negative_advantage_scale: float = Field(
        1.0, ge=0, le=MAX_COEF, allow_inf_nan=False,
        description="Weight of the negative advantages (the "
        "completions below their group's baseline; the positive ones keep weight 1): 1 = the "
        "estimator as is, 0 = reinforce the above-baseline completions only, > 1 up-weights "
        "the negatives. Penalising wrong answers moves their probability toward the model's "
        "current mode, which deepens a wrong mode; below 1 favours greedy pass@1 (Zhu et al. "
        "2025, arXiv:2506.01347: positive vs negative sample reinforcement).")
    policy_loss: str = Field("clip", description="Policy loss, "
                             f"{registry.POLICY_LOSSES.one_of()}: clip (PPO, symmetric eps), "
                             "clip_higher (DAPO: eps_low / eps_high), dual_clip (Ye et al. "
                             "2020), cispo (MiniMax-M1: clipped importance weight, detached), "
                             "gspo (Zheng et al. 2025: one clipped ratio per completion, "
                             "`gspo_eps_low` / `gspo_eps_high`).")
    clip_eps: float = Field(0.2, gt=0, le=MAX_COEF,
        description="Clip epsilon (eps_low for clip_higher).")
    clip_eps_high: float = Field(0.28, gt=0, le=MAX_COEF,
        description="eps_high of clip_higher (DAPO) and of cispo's importance-weight clip.")
    loss_agg: str = Field("grpo", description="Loss aggregation, "
                          f"{registry.LOSS_AGGREGATIONS.one_of()}: grpo (per-sequence token "
                          "mean, then mean), bnpo (token mean over the micro-batch), dapo "
                          "(token mean over the step), dr_grpo (sum / constant max length).")
    kl_coef: float = Field(0.01, ge=0, le=MAX_COEF,
        description="beta of the KL penalty to the frozen reference (R15: sweep 0.001, 0.003, "
        "0.01, 0.03). 0 = no reference.")
    kl_estimator: str = Field("k3", description="Schulman's KL estimators, "
                              f"{registry.KL_ESTIMATORS.one_of()} (k3: unbiased, >= 0).")
    kl_in: Literal["loss", "reward"] = Field("loss", description="`loss`: + beta * KL per "
                                             "token in the loss (GRPO); `reward`: R - beta * "
                                             "sum_t KL folded into the reward before the "
                                             "advantage (PPO / REINFORCE++ style).")
    kl_controller: Literal["fixed", "adaptive"] = Field("fixed", description="`adaptive`: "
                                                        "beta steered toward `kl_target` "
                                                        "(Ziegler et al. 2019), logged as "
                                                        "`kl_coef`.")
    kl_target: float = Field(0.02, gt=0, le=MAX_COEF,
        description="Target token-mean KL (nats) of the adaptive controller.")
    ref_refresh_every: int = Field(0, ge=0, le=MAX_STEPS,
        description="Replace the reference by the current policy every K steps (a periodic "
        "reference reset); 0 = never.")
    reward_noise: float = Field(0.0, ge=0, le=MAX_COEF,
        description="Gaussian reward noise sigma (R14).")
    overlong_buffer: int = Field(0, ge=0, le=MAX_TOKENS,
        description="DAPO soft overlong punishment: completions within this many tokens of "
        "`grpo.max_new_tokens` lose up to `overlong_penalty` reward linearly, truncated ones all "
        "of it (R19); 0 = off.")
    overlong_penalty: float = Field(1.0, ge=0, le=MAX_COEF, description="Scale of that punishment.")
    mask_truncated: bool = Field(False, description="Truncated completions (hit the cap) get "
                                 "no gradient (DAPO overlong filtering); they still count in "
                                 "their group's statistics.")
    length_penalty: float = Field(0.0, ge=0, le=MAX_COEF,
        description="Linear length penalty coef * |y| / max_new_tokens subtracted from the reward "
        "(R19).")
    concise_bonus: float = Field(0.0, ge=0, le=MAX_COEF,
        description="Kimi k1.5 group-relative length reward: + up to coef/2 for the shortest "
        "correct answers of a group, - for long ones (wrong answers only penalised).")
    entropy_coef: float = Field(0.0, ge=0, le=MAX_COEF,
        description="Entropy bonus weight (subtracted from the loss); entropy is logged always.")
    tis_cap: float | None = Field(None, ge=0, le=MAX_COEF,
        description="Truncated importance sampling of a mismatched sampler (Yao et al. 2025; verl "
        "/ slime `tis_imp_ratio_cap`): each token's policy term is weighted by min(exp(log pi_old "
        "- log pi_rollout), tis_cap), detached, so an int8 rollout's completions train the fp32 "
        "policy without bias beyond the cap. Logs `tis_weight_mean` and `tis_clipped_fraction` "
        "(`rollout_logprob_gap` is logged always). Unset (default): no weight, except with "
        "`rollout.quantization: int8`, which sets it to 2.0 (the paper's cap; config.yaml records "
        "it). 0: off, also with int8.")
    off_policy_correction: str = Field(
        "auto", description="How the policy term weights a token the current policy did not "
        "sample (a stale policy version, another engine or precision), by rho = pi_old / "
        "pi_rollout, the trainer's policy before the update over the sampler "
        "(docs/guides/async.md#off-policy-corrections), `auto` or "
        f"{registry.OFF_POLICY_CORRECTIONS.one_of()}: `none` (w = 1), `tis` (min(rho, "
        "tis_cap): truncated IS, Yao et al. 2025), `mis` (rho, and 0 above `mis_cap`: masked "
        "IS), `icepop` (rho inside [`icepop_low`, `icepop_high`], else 0: IcePop), `decoupled` "
        "(rho, and 0 above `decoupled_cap`: AReaL's decoupled PPO objective, Fu et al. 2025). "
        "`auto` (default): `decoupled` with `grpo.max_staleness > 0`, `tis` when `tis_cap` is "
        "set (int8 rollouts), else `none` (a synchronous run is exactly on-policy GRPO). Logs "
        "`is_ratio_mean` / `is_ratio_max` always and, with a correction, `is_weight_mean`, "
        "`is_weight_max`, `is_truncated_fraction`, `is_masked_fraction`.")
    mis_cap: float = Field(2.0, gt=1, le=MAX_COEF,
        description="`mis`: tokens with rho above this get no gradient (verl's default "
        "threshold, 2.0).")
    icepop_low: float = Field(0.5, gt=0, lt=1,
        description="`icepop`: the band's lower edge alpha (the IcePop blog's 0.5).")
    icepop_high: float = Field(5.0, gt=1, le=MAX_COEF,
        description="`icepop`: the band's upper edge beta (the IcePop blog's 5.0).")
    decoupled_cap: float | None = Field(5.0, gt=1, le=MAX_COEF,
        description="`decoupled`: tokens whose behaviour weight pi_old / pi_rollout exceeds "
        "this are dropped (AReaL's `behav_imp_weight_cap`, 5.0 in its asynchronous example "
        "configs); null: no mask, the plain weight.")
    gspo_eps_low: float = Field(3e-4, gt=0, lt=1,
        description="`policy_loss: gspo`: lower clip of the sequence ratio s_i (1 - eps; the "
        "GSPO paper's 3e-4: s_i is a per-token geometric mean, so it stays near 1).")
    gspo_eps_high: float = Field(4e-4, gt=0, le=MAX_COEF,
        description="`policy_loss: gspo`: upper clip of s_i (1 + eps; the paper's 4e-4).")
    gspo_token: bool = Field(False, description="`policy_loss: gspo`: the GSPO-token form "
                             "(sg[s_i] * pi_theta / sg[pi_theta] per token): the same value "
                             "and, with one advantage per completion, the same gradient.")

    @field_validator("advantage", "policy_loss", "loss_agg", "kl_estimator")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        # Checked against the rlvr.algo registries, not a Literal: a newly registered
        # variant is selectable with no edit here.
        table = {"advantage": registry.ADVANTAGE_ESTIMATORS,
                 "policy_loss": registry.POLICY_LOSSES,
                 "loss_agg": registry.LOSS_AGGREGATIONS,
                 "kl_estimator": registry.KL_ESTIMATORS}[info.field_name]
        if name not in table:
            # a custom error type: its message is shown as is (no "Value error, " prefix);
            # the error's location already names the field
            raise PydanticCustomError("unregistered", "{message}",
                                      {"message": table.unknown_message(name, field="")})
        return name

    @model_validator(mode="after")
    def _clip_range(self) -> AlgoConfig:
        # What the clip fields mean depends on the loss: its registered options say which it
        # reads as what (clip / dual_clip: eps = clip_eps; clip_higher: eps_low = clip_eps,
        # eps_high = clip_eps_high; cispo: eps_high = clip_eps_high alone, an importance-weight
        # cap where any value > 0 is sound). A loss whose options read more than this section
        # (a plugin's) is not checked here.
        try:
            options = registry.POLICY_LOSSES.options(self.policy_loss, SimpleNamespace(algo=self))
        except (AttributeError, KeyError, TypeError):
            return self
        low = options.get("eps_low", options.get("eps"))
        if isinstance(low, float) and low >= 1:
            raise ValueError(f"clip_eps: {low:g} with policy_loss {self.policy_loss}: the ratio's "
                             f"lower clip 1 - clip_eps must stay above 0; use a value in (0, 1) "
                             f"(0.2 is usual)")
        high = options.get("eps_high")
        if isinstance(low, float) and isinstance(high, float) and high < low:
            raise ValueError(
                f"clip_eps_high: {high:g} < clip_eps {low:g} with policy_loss "
                f"{self.policy_loss}: clip-higher widens the upper clip (DAPO: eps_low 0.2, "
                f"eps_high 0.28); eps_high below eps_low clips improvements harder than "
                f"regressions. Set clip_eps_high >= clip_eps (equal: the symmetric clip)")
        return self

    @model_validator(mode="after")
    def _correction_settings(self) -> AlgoConfig:
        check_correction_fields(self)
        return self

    @model_validator(mode="after")
    def _kl_settings(self) -> AlgoConfig:
        if self.kl_controller == "adaptive" and self.kl_coef <= 0:
            raise ValueError("kl_controller: adaptive needs kl_coef > 0 (its starting value)")
        if self.ref_refresh_every and self.kl_coef <= 0:
            raise ValueError("ref_refresh_every needs kl_coef > 0 (there is no reference)")
        return self


class RolloutConfig(ConfigSection):
    engine: str = Field("torch", description=f"Rollout engine, {ENGINES.one_of()}: `torch` "
                        "(fast CPU decoder), `hf` (transformers generate), `vllm` (CUDA GPU, "
                        "`pip install rlvr[vllm]`).")
    quantization: Literal["none", "int8"] = Field(
        "none", description="`int8`: the `torch` engine samples the GRPO rollouts with int8 "
        "weights (decode steps' q/k/v, o, gate/up and down matmuls; per-output-channel scales, "
        "re-quantised from the policy every step; fbgemm dynamic quantisation of fp32 "
        "activations; prefill, embeddings and the LM head stay fp32): faster decoding on CPUs "
        "without native bf16 (src/rlvr/rollout/decoder/int8.py). Its log-probs differ from the "
        "policy's (`rollout_logprob_gap`: ~0.15 nats/token on the default model), so "
        "`algo.tis_cap` defaults to 2.0 with it. Validation and pass@k still sample the "
        "fp32 policy. Needs the `torch` engine in this process (not with `ray_address`), fp32 "
        "compute (refused with `model.precision: bf16`; `auto` samples in fp32) and an x86 "
        "torch build (fbgemm). `none` (default): the compute precision.")
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
    ray_rollout_workers: int = Field(2, ge=1, le=MAX_WORKERS,
        description="Rollout actors. Each asks Ray for 1 CPU and runs `threads` torch threads when "
        "set, else an equal share of this machine's cores (`ray_address: local`) or Ray's default "
        "(one per CPU it was given). Only used with `ray_address`.")
    ray_reward_workers: int = Field(1, ge=1, le=MAX_WORKERS,
        description="Reward actors; each runs a reward pipeline with `reward.workers` verifier "
        "processes, and a batch of completions is split over them in contiguous chunks. Verifiers "
        "that tests or scripts register at runtime must come from `reward.plugins` to exist in the "
        "actors. Only used with `ray_address`.")


class EvalConfig(ConfigSection):
    every: int = Field(10, ge=0, le=MAX_STEPS,
        description="Validate every K GRPO steps (0 = start and end only). Greedy pass@1 and mean "
        "reward on the validation set.")
    max_new_tokens: int = Field(128, ge=1, le=MAX_TOKENS,
        description="Completion length cap in tokens of validation and pass@k evaluation.")
    batch_size: int = Field(64, ge=1, le=MAX_BATCH, description="Prompts per generation call.")
    base_model: bool = Field(False, description="Also evaluate the model before SFT.")
    pass_at_k_samples: int = Field(16, ge=0, le=MAX_GROUP,
        description="Samples per validation problem for the baseline vs trained pass@k / maj@k at "
        "k = 1, 4, 8, 16 (R29; n of them, k <= n); 0 disables.")
    temperature: float = Field(0.7, ge=0, le=MAX_TEMPERATURE,
        description="Sampling temperature of that pass@k evaluation (R18: 0.6-0.8).")
    no_tool_baseline: bool = Field(True, description="With an environment other than "
                                   "`single_turn` (`env.name`): also validate the model before "
                                   "SFT without it: one turn, the plain prompt (no tool system "
                                   "message), greedy, on the same validation problems and "
                                   "`max_new_tokens`: the `no tool` row of the results table "
                                   "(results.json `no_tool`, `gain_over_no_tool`). Done once, "
                                   "saved as RUN/no_tool_validation.json (a resume reuses it).")


    @model_validator(mode="after")
    def _sampled_pass_at_k(self) -> EvalConfig:
        if self.temperature == 0 and self.pass_at_k_samples > 1:
            # greedy decoding gives n copies of one completion: pass@k = pass@1 at n times
            # the cost, a curve that means nothing
            raise ValueError(f"temperature: 0 (greedy) with pass_at_k_samples "
                             f"{self.pass_at_k_samples}: every sample would be the same "
                             f"completion; set temperature > 0 (0.6-0.8) or pass_at_k_samples "
                             f"0 (greedy validation is always run)")
        return self


class CheckpointConfig(ConfigSection):
    every: int = Field(0, ge=0, le=MAX_STEPS,
        description="Checkpoint every K GRPO steps (0 = at the end).")
    keep: int = Field(2, ge=1, le=MAX_STEPS,
        description="Checkpoints kept (oldest removed first), besides `step-000000`, which stays "
        "as the rollback anchor.")

"""The main job: SFT cold start, then GRPO, with validation before and after (R28) and
everything on disk in the run directory (config.yaml, metrics.jsonl, samples.jsonl,
validation.jsonl, checkpoints/, results.json)."""

from __future__ import annotations

import copy
import json
import random
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import yaml
from rich.console import Console
from rich.table import Table

from rlvr.models.precision import resolve_precision
from rlvr.progress import Phase, step_eta
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.records_io import append_jsonl
from rlvr.train.checkpoint import (latest_checkpoint, load_trainer_state, save_checkpoint,
                                   save_model, write_json_atomic)
from rlvr.train.config import RunConfig
from rlvr.train.policy import sync_engine
from rlvr.train.sampler import TaskSampler

# Logs piped to a file keep one line per event (rich wraps at 80 columns off a terminal).
console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
REFERENCES_DIR = "references"  # refreshed KL references (algo.ref_refresh_every)
SFT_MODEL_DIR = "sft_model"  # the model that entered GRPO: KL reference on resume, `rlvr sft` output
SFT_REPORT = "sft_report.json"  # in sft_model/: the SFT report, for a resume before GRPO
SFT_STATE = "sft_checkpoint.pt"  # SFT in progress (sft.checkpoint_every), removed once saved
LORA_BASE = "lora_base.json"  # what the GRPO LoRA adapters are on: {"base": "sft_model" | name}


class RunInputError(ValueError):
    """The run cannot start: bad data or a model that does not load (the CLI exits 2)."""


def write_yaml_atomic(path: Path, data: dict) -> None:
    """The resolved config as YAML, written atomically (R41)."""
    from rlvr.rewards.records_io import atomic_write

    with atomic_write(path) as f:
        yaml.safe_dump(data, f, sort_keys=False)


def run_dir_for(config: RunConfig) -> Path:
    if config.output_dir:
        return Path(config.output_dir)
    return Path("runs") / f"{config.name}-{datetime.now():%Y%m%d-%H%M%S}"


def _append_jsonl(path: Path, rows: list[dict]) -> None:
    """Append rows to a run log as standard JSON: a NaN / inf value (a NaN loss) is written as
    null and named under ``"nonfinite"`` (:func:`rlvr.rewards.records_io.append_jsonl`); numpy
    scalars and 0-d tensors as floats."""
    append_jsonl(path, rows, default=float)


class Run:
    """Holds the models, data and sinks of one run. ``train()`` is the whole job."""

    def __init__(self, config: RunConfig, run_dir: Path, resume: bool = False):
        self.config, self.run_dir, self.resume = config, run_dir, resume
        if config.threads:
            torch.set_num_threads(config.threads)
        self.precision = self._resolve_precision(config)
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        if config.rollout.ray_address:  # R22: reward actors; closing them stops Ray if started
            from rlvr.distributed.ray_workers import RayRewardPipeline

            self.rewards = RayRewardPipeline.from_run_config(config)
        else:
            self.rewards = RewardPipeline(config.reward)
        # Validation, pass@k, SFT data checks and the reward audit use each task type's own
        # verifier, even when `reward.verifiers` swaps in another one for the training reward.
        self.eval_rewards = (RewardPipeline(config.reward.reference_config(), pool=self.rewards.pool)
                             if config.reward.verifiers else self.rewards)
        self.lr_scale = 1.0
        self.step_fn = None
        self._resumed_kl_coef = None

    # -- setup ------------------------------------------------------------------------------
    @staticmethod
    def _resolve_precision(config: RunConfig):
        """Resolve ``model.precision`` on this machine, print the choice and why, and store
        the resolved value in ``config`` (so config.yaml, a resume and the update workers use
        it)."""
        choice = resolve_precision(config.model.precision)
        console.print(choice.summary())
        if choice.warning:
            console.print(f"[yellow]warning[/]: {choice.warning}")
        config.model.precision = choice.precision
        return choice

    def load(self) -> None:
        from rlvr.models import load_model_and_tokenizer
        from rlvr.tasks.sources import load_tasks
        from rlvr.train.prompting import prompt_ids, prompt_settings, stop_token_ids

        from rlvr.models.loader import ModelLoadError

        c = self.config
        try:  # data first: it is cheap and the likelier mistake
            self.train_tasks, self.val_tasks = self._load_data(load_tasks)
        except ValueError as exc:
            raise RunInputError(f"data: {exc}") from exc
        t0 = time.perf_counter()
        try:
            with Phase(f"loading model {c.model.name}", None, console):
                self.policy, self.tokenizer = load_model_and_tokenizer(c.model.name, seed=c.seed)
        except ModelLoadError as exc:
            raise RunInputError(f"model.name: {exc}") from exc
        console.print(f"model {c.model.name}: {sum(p.numel() for p in self.policy.parameters()):,}"
                      f" parameters, loaded in {time.perf_counter() - t0:.1f} s")
        encode = lambda t: prompt_ids(self.tokenizer, t, self.instruction(t), c.data.one_shot)  # noqa: E731
        self.train_prompts = [encode(t) for t in self.train_tasks]
        self.val_prompts = [encode(t) for t in self.val_tasks]
        self.stop_ids = stop_token_ids(self.tokenizer)
        self.prompt = prompt_settings(c.data, self.tokenizer)  # saved with every checkpoint
        label = (" + ".join(f"{s.name or s.source} ({s.weight:g})" for s in c.data.sources)
                 or c.data.source)
        console.print(f"data {label}: {len(self.train_tasks)} train, "
                      f"{len(self.val_tasks)} validation tasks")

    def _load_data(self, load_tasks) -> tuple[list, list]:
        """Train and validation tasks of ``data`` (one source, or the weighted ``sources``),
        minus file-source tasks whose reference does not verify (``data.check_references``)."""
        c = self.config
        specs = c.data.sources or [None]
        train, val = [], []
        self._instructions: dict[str, str] = {}
        from rlvr.tasks.registry import in_process

        for i, spec in enumerate(specs):
            data = c.data.source_config(spec)
            part_train, part_val = load_tasks(data, c.seed + 101 * i, log=console.print)
            if c.data.check_references and not in_process(data):
                part_train, part_val = self._verified(part_train), self._verified(part_val)
            label = (spec.name or spec.source) if spec is not None else None
            if spec is not None:
                self._instructions.update((t.id, data.instruction)
                                          for t in part_train + part_val)
            train += [(label, t) for t in part_train]
            val += part_val
        if len(specs) > 1:  # interleave, so SFT's first examples come from every source
            random.Random(c.seed).shuffle(train)
        self.train_pool_of = [label for label, _ in train]
        if not train or not val:
            raise ValueError("no training or validation tasks left")
        return [t for _, t in train], val

    def instruction(self, task) -> str:
        """The instruction appended to ``task``'s question: its mixture source's, else
        ``data.instruction``."""
        return self._instructions.get(task.id, self.config.data.instruction)

    def _verified(self, tasks: list) -> list:
        from rlvr.data.check import drop_unverifiable

        kept, dropped = drop_unverifiable(tasks, self.eval_rewards)
        if dropped:
            console.print(f"[yellow]data.check_references[/]: dropped {len(dropped)} of "
                          f"{len(tasks)} tasks whose reference does not verify: "
                          + ", ".join(d.id for d in dropped[:10])
                          + (" ..." if len(dropped) > 10 else ""))
        return kept

    def _tier(self, task) -> str | None:
        """``task``'s sampling tier under ``data.tiers``: its ``difficulty`` when that is
        easy / medium / hard and (``measured``) was measured by ``rlvr data stratify`` (the
        task has a ``pass_rate``) or (``labels``) whatever its origin; else None."""
        from rlvr.data.stratify import TIERS

        mode = self.config.data.tiers
        if mode == "off" or task.difficulty not in TIERS:
            return None
        return task.difficulty if mode == "labels" or task.pass_rate is not None else None

    def sampler(self) -> TaskSampler:
        """Pools by mixture source and tier (R24, R26; ``data.tiers``), weighted as
        configured. Logs where the tiers came from, their task counts and draw shares, and
        (``data.tiers: measured``) how many dataset difficulty labels were not used."""
        from rlvr.data.stratify import TIERS

        c, pools = self.config, {}
        weights = {(s.name or s.source): s.weight for s in c.data.sources}
        tiers = [self._tier(t) for t in self.train_tasks]
        tiered = any(tiers)
        ignored = sum(t.difficulty in TIERS and tier is None
                      for t, tier in zip(self.train_tasks, tiers))
        if ignored and c.data.tiers == "measured":
            console.print(f"data.tiers: {ignored} training tasks carry a difficulty label "
                          f"(easy / medium / hard) without a measured pass_rate: not used as "
                          f"sampling tiers (measure them with `rlvr data stratify`, or set "
                          f"data.tiers: labels to draw by the dataset's labels)")
        for i, (tier, label) in enumerate(zip(tiers, self.train_pool_of)):
            pools.setdefault((label, (tier or "medium") if tiered else None), []).append(i)
        if len(pools) == 1:
            return TaskSampler.single(len(self.train_tasks), c.seed, c.grpo.filter_groups_after)
        named, w, tier_of = {}, {}, {}
        for (label, tier), idx in pools.items():
            name = "/".join(x for x in (label, tier) if x)
            present = [t for (lb, t) in pools if lb == label]
            tier_w = (c.data.tier_weights.get(tier, 0.0) / sum(c.data.tier_weights.get(t, 0.0)
                                                               for t in present)) if tier else 1.0
            if tier_w > 0:
                named[name], w[name] = idx, weights.get(label, 1.0) * tier_w
                tier_of[name] = tier
        if tiered:
            origin = ("measured by `rlvr data stratify`" if c.data.tiers == "measured"
                      else "the dataset's difficulty labels, data.tiers: labels")
            total = sum(w.values())
            counts = {t: sum(len(idx) for (_, tier), idx in pools.items() if tier == t)
                      for t in TIERS}
            shares = {t: sum(v for n, v in w.items() if tier_of[n] == t) / total for t in TIERS}
            untiered = sum(tier is None for tier in tiers)
            console.print(f"data tiers ({origin}): " + ", ".join(
                f"{t} {counts[t]} tasks drawn {shares[t]:.0%}" for t in TIERS)
                + " (data.tier_weights" + (f"; {untiered} tasks without a tier count as medium"
                                           if untiered else "") + ")")
        return TaskSampler(named, w, c.seed, c.grpo.filter_groups_after)

    def engine(self):
        from rlvr.rollout import create_engine

        from rlvr.models.lora import is_lora, merged_copy

        # A LoRA policy is sampled from a plain merged copy, re-synced before every rollout.
        model = merged_copy(self.policy) if is_lora(self.policy) else self.policy
        if self.config.rollout.ray_address:  # R22: rollout actors (rlvr.distributed)
            from rlvr.distributed.ray_workers import RayRolloutEngine

            return RayRolloutEngine.from_run_config(self.config, model,
                                                    self.tokenizer.pad_token_id)
        return create_engine(self.config.rollout.engine, model,
                             pad_token_id=self.tokenizer.pad_token_id,
                             precision=self.config.model.precision)

    # -- phases -----------------------------------------------------------------------------
    def validate(self, label: str, step: int) -> dict:
        from rlvr.train.validate import validate

        self.policy.eval()
        sync_engine(self._engine, self.policy)  # the engine keeps its own weight snapshot
        with Phase(f"validation {label}", len(self.val_tasks), console,
                   unit="problems") as phase:
            result, samples = validate(
                self._engine, self.tokenizer, self.val_tasks, self.val_prompts,
                self.eval_rewards, max_new_tokens=self.config.eval.max_new_tokens,
                stop_token_ids=self.stop_ids, batch_size=self.config.eval.batch_size,
                progress=phase.update)
        self.policy.train()
        row = {"label": label, "step": step, **result.__dict__}
        _append_jsonl(self.run_dir / "validation.jsonl", [row])
        _append_jsonl(self.run_dir / "validation_samples.jsonl",
                      [{"label": label, "step": step, **s} for s in samples[:20]])
        console.print(f"[bold]validation[/] {label} (step {step}): pass@1 "
                      f"{result.pass_at_1:.1%}, reward {result.mean_reward:.3f}, format "
                      f"{result.format_rate:.1%}, length {result.mean_length:.1f}, "
                      f"{result.seconds:.0f} s")
        return row

    def pass_at_k(self, label: str) -> dict | None:
        """Sampled pass@k / maj@k (k = 1, 4, 8, 16 up to n) of the current policy on the
        validation set at ``eval.temperature`` with n = ``eval.pass_at_k_samples`` (R29);
        one engine call per ``eval.batch_size`` prompts. None when n is 0."""
        from rlvr.eval.sampling import sampled_pass_at_k

        c = self.config
        if not c.eval.pass_at_k_samples:
            return None
        self.policy.eval()
        sync_engine(self._engine, self.policy)
        with Phase(f"pass@k {label} (n={c.eval.pass_at_k_samples})", len(self.val_tasks),
                   console, unit="problems") as phase:
            row = sampled_pass_at_k(
                self._engine, self.tokenizer, self.val_tasks, self.val_prompts,
                self.eval_rewards, n=c.eval.pass_at_k_samples, ks=(1, 4, 8, 16),
                temperature=c.eval.temperature, max_new_tokens=c.eval.max_new_tokens,
                stop_token_ids=self.stop_ids, batch_size=c.eval.batch_size, seed=c.seed,
                progress=phase.update)
        self.policy.train()
        console.print(f"[bold]pass@k[/] {label} (n={row['n']}, T={row['temperature']}): "
                      + ", ".join(f"pass@{k} {v:.1%}" for k, v in row["pass@k"].items())
                      + f"; {row['seconds']:.0f} s")
        return row

    def _apply_lora(self, stage: str) -> None:
        """Wrap the policy in fresh LoRA adapters (``model.lora_rank``); only they train from
        here on. ``stage`` names what they are for in the log line (GRPO, or SFT with
        ``sft.full_finetune: false``). The adapters go on a copy when a rollout engine
        exists: the engine keeps the plain module it was given and is synced with merged
        weights."""
        from rlvr.models.lora import apply_lora

        c = self.config
        plain = copy.deepcopy(self.policy) if getattr(self, "_engine", None) is not None \
            else self.policy
        self.policy = apply_lora(plain, c.model.lora_rank, c.model.lora_alpha)
        trainable = sum(p.numel() for p in self.policy.parameters() if p.requires_grad)
        console.print(f"LoRA rank {c.model.lora_rank}: {trainable:,} trainable parameters "
                      f"({stage})")

    def _sft_stage(self, resume: bool = False, checkpoints: bool = True) -> dict | None:
        """SFT, then the model saved as ``sft_model/`` (with its report); returns the report.

        With ``model.lora_rank`` SFT trains the full weights (``sft.full_finetune``, default;
        GRPO's adapters come later, on top of the SFT model) or its own adapters, merged
        before saving. ``checkpoints``: write ``sft_checkpoint.pt`` every
        ``sft.checkpoint_every`` steps (removed once ``sft_model/`` is saved). ``resume``: a
        complete ``sft_model/`` is loaded instead of training again; else SFT continues from
        ``sft_checkpoint.pt`` when there is one."""
        from rlvr.models import load_model_and_tokenizer
        from rlvr.models.lora import is_lora, merged_copy

        c, saved = self.config, self.run_dir / SFT_MODEL_DIR
        if resume and _complete_model(saved):
            self.policy, _ = load_model_and_tokenizer(str(saved))
            sync_engine(self._engine, self.policy)
            (self.run_dir / SFT_STATE).unlink(missing_ok=True)  # killed before its removal
            console.print(f"sft: finished before the interruption; {saved} loaded")
            report = saved / SFT_REPORT  # absent in an sft_model/ of an older rlvr
            return json.loads(report.read_text(encoding="utf-8")) if report.is_file() else None
        if c.model.lora_rank and not c.sft.full_finetune:
            self._apply_lora("SFT, sft.full_finetune: false; merged into sft_model/ before GRPO")
        elif c.model.lora_rank:
            console.print(f"sft: full fine-tuning (sft.full_finetune); the LoRA adapters "
                          f"(model.lora_rank={c.model.lora_rank}) train in GRPO on top of "
                          f"sft_model/, the KL reference")
        state = self.run_dir / SFT_STATE if checkpoints else None
        report = self.sft(state_path=state, resume=resume)
        if is_lora(self.policy):
            self.policy = merged_copy(self.policy)
        self._save_sft_model(report)
        if state is not None:
            state.unlink(missing_ok=True)
        return report

    def sft(self, state_path: Path | None = None, resume: bool = False) -> dict:
        """SFT of the policy in place (:func:`rlvr.train.sft.run_sft`; ``state_path`` /
        ``resume``: its checkpoint file and whether to continue from it); returns the
        report as a dict."""
        from rlvr.train.sft import SFTInputError, run_sft, sft_steps, verified_examples

        from rlvr.train.prompting import prompt_ids

        c = self.config
        from rlvr.tasks.registry import task_source

        pool = self.train_tasks[: c.sft.examples]
        source = task_source(c.data.source)
        if c.sft.mixture and source.sft_mixture and not c.data.sources:
            pool = source.generate(c.sft.mixture, c.sft.examples, seed=c.seed + 2,
                                   split="train", unique=False)
        examples, rejected = verified_examples(pool, self.eval_rewards)
        prompts = [prompt_ids(self.tokenizer, t, self.instruction(t), c.data.one_shot)
                   for t in examples]
        console.print(f"sft: {len(examples)} verified examples, {rejected} rejected")
        # the loop prints a line (loss, ETA) every 10 steps; the phase adds a bar on a
        # terminal and a line after 30 s without one in a log
        try:
            with Phase("sft", sft_steps(len(examples), c.sft), console, unit="steps",
                       every_fraction=None) as phase:
                report = run_sft(self.policy, self.tokenizer, examples, prompts, c.sft, c.seed,
                                 c.model.bf16, rejected=rejected, log=console.print,
                                 progress=phase.update, state_path=state_path, resume=resume)
        except SFTInputError as exc:
            raise RunInputError(str(exc)) from exc
        sync_engine(self._engine, self.policy)
        return report.__dict__

    def grpo(self, start_step: int, sampler: TaskSampler, history: dict):
        """GRPO steps ``start_step + 1 .. grpo.steps``, each followed by its health checks.
        Returns the alert that stopped the run early, or ``None``."""
        from rlvr.train.grpo import GRPOStep

        c = self.config
        reference = self._reference(start_step) if c.algo.kl_coef > 0 else None
        step_fn = self.step_fn = GRPOStep(c, self.policy, reference, self._engine,
                                          self.tokenizer, self.rewards, self.optimizer,
                                          self.scheduler, self.stop_ids)
        if self._resumed_kl_coef is not None and c.algo.kl_controller == "adaptive":
            # the adaptive controller's state; a fixed coefficient is the config's (so a
            # `--set algo.kl_coef` on --resume applies)
            step_fn.kl_ctl.value = self._resumed_kl_coef
        if c.grpo.update_processes > 1:
            from rlvr.distributed.update_group import UpdateGroup

            step_fn.update_group = UpdateGroup(c, self.policy, self.optimizer)
            console.print(f"policy update data-parallel over {c.grpo.update_processes} "
                          f"processes ({step_fn.update_group.update_threads} threads each)")
        try:
            return self._grpo_steps(step_fn, start_step, sampler, history)
        finally:
            if step_fn.update_group is not None:
                step_fn.update_group.close()
                step_fn.update_group = None

    def _grpo_steps(self, step_fn, start_step: int, sampler: TaskSampler, history: dict):
        from rlvr.monitor.alerts import strongest

        c = self.config
        loop_start = time.perf_counter()
        for step in range(start_step + 1, c.grpo.steps + 1):
            skipped, counts = sampler.skipped, dict(sampler.counts)
            idx = sampler.next(c.grpo.prompts_per_step)
            # a spinner with the part running (terminal), a line after 30 s (log): the first
            # rollout can take minutes
            with Phase(f"step {step}/{c.grpo.steps}", None, console) as phase:
                step_fn.on_phase = phase.status
                try:
                    batch = step_fn.run([self.train_tasks[i] for i in idx],
                                        [self.train_prompts[i] for i in idx], step)
                finally:
                    step_fn.on_phase = None
            sampler.record(idx, batch.zero_variance.tolist())
            m = {"step": step, **batch.metrics, **self.monitor.observe(step, batch),
                 **_sampling_metrics(sampler, skipped, counts)}
            elapsed = time.perf_counter() - loop_start
            self._log_step(step, m, batch, step_eta(step - start_step, c.grpo.steps - start_step,
                                                    elapsed))
            if c.algo.ref_refresh_every and step % c.algo.ref_refresh_every == 0:
                self._refresh_reference(step_fn.reference, step)
            if step == c.grpo.steps or (c.eval.every and step % c.eval.every == 0):
                row = self.validate("trained" if step == c.grpo.steps else "grpo", step)
                history["validation"].append(row)
                self.monitor.observe_validation(row)
                self.sinks.log(step, {f"val/{k}": v for k, v in row.items()
                                      if isinstance(v, (int, float)) and k != "step"})
            alerts = self.monitor.check(step, m)
            for a in alerts:
                self.sinks.log_text(step, f"alerts/{a.check}", f"{a.action}: {a.message}")
            alert = strongest(alerts)
            if alert and alert.action == "stop":
                history["stopped"] = alert.to_dict()
                return alert  # train() validates and checkpoints the stopped policy
            if alert and alert.action == "rollback":
                self._rollback(step, alert.check)
            if c.checkpoint.every and step % c.checkpoint.every == 0 or step == c.grpo.steps:
                self.checkpoint(step, sampler, history)
        return None

    def _log_step(self, step: int, m: dict, batch, eta: str = "") -> None:
        _append_jsonl(self.run_dir / "metrics.jsonl", [m])
        self.sinks.log(step, m)
        index = batch.rollout.prompt_index.tolist()
        _append_jsonl(self.run_dir / "samples.jsonl", [
            {"step": step, "id": batch.tasks[index[r]].id,
             "reference": batch.tasks[index[r]].reference, "completion": batch.texts[r],
             "reward": res.reward, "components": res.components, "status": res.status.value,
             "extracted": res.extracted, "detail": res.detail,
             "category": batch.tasks[index[r]].category}
            for r, res in list(enumerate(batch.results))[:: max(1, len(batch.results) // 4)]])
        console.print(f"step {step}/{self.config.grpo.steps} reward {m['reward_mean']:.3f} acc "
                      f"{m['accuracy']:.1%} zero-var {m['zero_variance_fraction']:.0%} "
                      f"len {m['length_mean']:.0f} kl {m.get('kl', 0):.4f} clip "
                      f"{m.get('clip_frac', 0):.3f} | rollout {m['seconds_rollout']:.1f}s "
                      f"reward {m['seconds_reward']:.1f}s update {m['seconds_update']:.1f}s"
                      + (f" | {eta}" if eta else "")
                      + (f" | [bold red]verifier errors {m['verifier_errors']}[/]"
                         if m.get("verifier_errors") else ""))
        cats = sorted(k.split("/", 1)[1] for k in m if k.startswith("reward_mean/"))
        if cats:  # R10: per-category reward and parse failures, printed as well as logged
            console.print("  by category: " + ", ".join(
                f"{c} {m[f'reward_mean/{c}']:.2f} (parse fail {m[f'parse_failure_rate/{c}']:.0%})"
                for c in cats))

    def _rollback_target(self, step: int) -> Path:
        """The checkpoint a rollback at ``step`` restores: the newest one at least
        ``health.rollback_margin`` steps old (step 0, the model that entered GRPO, when none
        is)."""
        return latest_checkpoint(self.run_dir, max_step=step - self.config.health.rollback_margin)

    def _rollback(self, step: int, check: str | None = None) -> None:
        """Restore :meth:`_rollback_target` (policy, optimizer and scheduler; the data stream
        and step counter go on), multiply the learning rate by ``health.rollback_lr_factor``,
        reset the health baselines and cooldowns, and record the rollback (check, checkpoint,
        learning rate) in the monitor's ``rollback_log`` (results.json ``rollbacks``)."""
        h = self.config.health
        target = self._rollback_target(step)
        restored = self._load_policy(target)
        self.policy.load_state_dict(restored.state_dict())
        del restored
        load_trainer_state(target, self.optimizer, self.scheduler, rng=False)
        self.lr_scale *= h.rollback_lr_factor
        self.scheduler.base_lrs = [self.config.grpo.learning_rate * self.lr_scale
                                   for _ in self.scheduler.base_lrs]
        factor = self.scheduler.lr_lambdas[0](self.scheduler.last_epoch)
        for group, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):
            group["lr"] = base * factor
        if self.step_fn is not None and self.step_fn.update_group is not None:
            self.step_fn.update_group.sync()  # the other ranks load the same state
        lr = self.config.grpo.learning_rate * self.lr_scale
        self.monitor.after_rollback(step, check, target.name, _step_of(target), lr)
        console.print(f"[bold magenta]rollback[/] at step {step} ({check or 'health check'}) "
                      f"to {target.name}; learning rate now {lr:.3g} (grpo.learning_rate "
                      f"{self.config.grpo.learning_rate:g} x{self.lr_scale:g})")

    def checkpoint(self, step: int, sampler: TaskSampler, history: dict) -> None:
        save_checkpoint(self.run_dir, step, self.policy, self.tokenizer, self.optimizer,
                        self.scheduler, {"sampler": sampler.state_dict(),
                                         "history": history, "lr_scale": self.lr_scale,
                                         "kl_coef": (self.step_fn.kl_ctl.value
                                                     if self.step_fn else None),
                                         "monitor": self.monitor.state_dict()},
                        keep=self.config.checkpoint.keep, prompt=self.prompt)

    # -- the job ----------------------------------------------------------------------------
    def train(self) -> dict:
        """SFT (unless disabled or resuming), GRPO with health checks, final validation;
        returns results (with ``stopped``: the alert, when a health check ended the run).

        A checkpoint is written when GRPO starts (step 0: the rollback anchor and a resume
        point), every ``checkpoint.every`` steps and at the end. On resume the policy,
        optimizer, scheduler, RNG states, step, data position and health-monitor state come
        from the newest checkpoint, the KL reference from ``sft_model/`` (the model that
        entered GRPO), and the run's JSONL logs are cut back to that step, so the continued
        run matches an uninterrupted one. A resume before GRPO's first checkpoint (killed
        during SFT or the validation before GRPO) continues SFT from ``sft_checkpoint.pt`` or
        reuses a finished ``sft_model/``, keeps the base-model validation and redoes the rest.
        Any start removes the temp dirs / files of an interrupted save first.

        With ``model.lora_rank`` the GRPO adapters are applied after SFT (on ``sft_model/``,
        recorded in ``lora_base.json``).

        Raises:
            RunInputError: bad data or model; ``--resume`` with nothing saved to resume from;
                SFT with no example left within ``sft.max_length``.
        """
        c, start = self.config, time.perf_counter()
        if self.run_dir.is_dir():
            for path in remove_stale_temp(self.run_dir):
                console.print(f"removed {path.relative_to(self.run_dir)}: left by a save that "
                              f"was interrupted")
        checkpoint = latest_checkpoint(self.run_dir) if self.resume else None
        before_grpo = self.resume and checkpoint is None  # killed during SFT or validation
        if before_grpo and not (c.sft.enabled and (_complete_model(self.run_dir / SFT_MODEL_DIR)
                                                   or (self.run_dir / SFT_STATE).is_file())):
            raise RunInputError(f"--resume: {self.run_dir} has no complete checkpoint and no "
                                f"SFT checkpoint (killed before anything was saved; start it "
                                f"afresh with: rlvr train -o {self.run_dir} --overwrite)")
        self.load()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # on resume too: the `--set` overrides that apply to the rest of the run are recorded
        write_yaml_atomic(self.run_dir / "config.yaml", c.model_dump(mode="json"))
        self._open_monitoring(checkpoint)
        history: dict = {"validation": []}
        start_step, sampler_state = 0, None
        if checkpoint is not None:
            self.policy = self._load_policy(checkpoint)
        self._engine = self.engine()
        if checkpoint is not None:
            self._optimizer_for_grpo()
            state = load_trainer_state(checkpoint, self.optimizer, self.scheduler)
            start_step, extra = state["step"], state["extra"]
            sampler_state, history = extra["sampler"], extra["history"]
            self.lr_scale = extra.get("lr_scale", 1.0)
            self._resumed_kl_coef = extra.get("kl_coef")
            if "monitor" in extra:
                self.monitor.load_state_dict(extra["monitor"])
            truncate_logs(self.run_dir, start_step)
            console.print(f"resumed from {checkpoint} at step {start_step}")
        else:
            if before_grpo:  # the base validation (if any) was done; what followed is redone
                history["validation"] = reset_logs_before_grpo(self.run_dir)
                console.print(f"resumed {self.run_dir} before GRPO (no GRPO checkpoint yet)")
            elif c.eval.base_model:
                history["validation"].append(self.validate("base", 0))
            if c.sft.enabled:
                history["sft"] = self._sft_stage(resume=before_grpo)
            if c.model.lora_rank:
                self._apply_lora("GRPO, on " + (f"{SFT_MODEL_DIR}/" if c.sft.enabled
                                                 else c.model.name))
                write_json_atomic(self.run_dir / LORA_BASE,
                                  {"base": SFT_MODEL_DIR if c.sft.enabled else c.model.name,
                                   "seed": c.seed})
            self._optimizer_for_grpo()
            row = self.validate("before_grpo", 0)
            history["validation"].append(row)
            self.monitor.observe_validation(row)
            history["pass_at_k"] = {"baseline": self.pass_at_k("baseline")}
        sampler = self.sampler()
        if sampler_state is not None:
            sampler.load_state_dict(sampler_state)
        if checkpoint is None:
            self.checkpoint(0, sampler, history)
        stopped = self.grpo(start_step, sampler, history) if start_step < c.grpo.steps else None
        if not any(v["label"] == "trained" for v in history["validation"]):
            step = stopped.step if stopped else c.grpo.steps
            history["validation"].append(self.validate("trained", step))
            self.checkpoint(step, sampler, history)
        if stopped:
            console.print(f"[bold red]stopped[/] at step {stopped.step} by the "
                          f"{stopped.check} check: {stopped.message}")
        history.setdefault("pass_at_k", {})["trained"] = (
            None if stopped else self.pass_at_k("trained"))
        results = self._results(history, time.perf_counter() - start)
        results["data_mixture"] = sampler.realised()
        results["dynamic_sampling_skipped"] = sampler.skipped
        if len(sampler.names) > 1:
            console.print("data pools (target -> realised share): " + ", ".join(
                f"{k} {v['target']:.0%} -> {v['realised']:.0%}"
                for k, v in results["data_mixture"].items()))
        write_json_atomic(self.run_dir / "results.json", results)
        self.sinks.close()
        self.rewards.close()
        return results

    def _open_monitoring(self, checkpoint: Path | None) -> None:
        from rlvr.monitor.health import HealthMonitor
        from rlvr.monitor.sinks import SinkGroup, build_sinks

        audit = self.eval_rewards if self.config.reward.verifiers else None
        self.monitor = HealthMonitor(self.config.health, self.run_dir, audit, console.print)

        def target(step: int) -> tuple[str, int]:
            path = self._rollback_target(step)
            return path.name, _step_of(path)

        self.monitor.rollback_target = target
        resume_step = None
        if checkpoint is not None:
            resume_step = int(checkpoint.name.split("-")[1])
        self.sinks = SinkGroup(build_sinks(self.config.logging, self.run_dir,
                                           self.config.model_dump(mode="json"), resume_step))

    def sft_only(self) -> dict:
        """The cold-start stage alone (``rlvr sft``): validate, SFT, validate, save the model
        to ``sft_model/`` (usable as ``model.name`` of a later run); returns the report."""
        c = self.config
        self.load()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_yaml_atomic(self.run_dir / "config.yaml", c.model_dump(mode="json"))
        self._engine = self.engine()
        before = self.validate("base", 0)
        report = self._sft_stage(checkpoints=False)
        after = self.validate("sft", 0)
        path = self.run_dir / SFT_MODEL_DIR
        results = {"sft": report, "base_model": before, "sft_model": after,
                   "model_dir": str(path), "precision": self.precision.as_dict()}
        write_json_atomic(self.run_dir / "sft_results.json", results)
        self.rewards.close()
        return results

    def _save_sft_model(self, report: dict | None) -> Path:
        """The policy (LoRA merged) as ``sft_model/``, with the SFT report and the run's
        prompt settings."""
        from rlvr.train.prompting import write_prompt_settings

        def extra(tmp: Path) -> None:
            from rlvr.rewards.records_io import json_text

            (tmp / SFT_REPORT).write_text(json_text(report, default=float), encoding="utf-8")
            write_prompt_settings(tmp, self.prompt)

        return save_model(self.run_dir / SFT_MODEL_DIR, self._plain_policy(), self.tokenizer,
                          write_extra=extra)

    def _plain_policy(self):
        from rlvr.models.lora import is_lora, merged_copy

        return merged_copy(self.policy) if is_lora(self.policy) else self.policy

    def _load_policy(self, directory: Path):
        """A saved policy: a full model, or (LoRA) the adapters' base model (``sft_model/``
        when the run did SFT, see ``lora_base.json``; else ``model.name``) with the saved
        adapter, trainable, so the optimizer state lines up with its parameters."""
        from rlvr.models import load_model_and_tokenizer

        if (directory / "adapter_config.json").is_file():
            from rlvr.models.lora import load_adapter

            name, seed = lora_base(self.run_dir, self.config.model.name, self.config.seed)
            base, _ = load_model_and_tokenizer(name, seed=seed)
            return load_adapter(base, directory)
        model, _ = load_model_and_tokenizer(str(directory))
        return model

    def _refresh_reference(self, reference, step: int) -> None:
        """Reference <- current policy (``algo.ref_refresh_every``), saved as
        ``references/step-N`` so a resumed run reloads the same reference."""
        reference.load_state_dict(self._plain_policy().state_dict())
        root = self.run_dir / REFERENCES_DIR
        save_model(root / f"step-{step:06d}", reference, self.tokenizer)
        for old in sorted(root.glob("step-*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)
        console.print(f"reference refreshed from the policy at step {step}")

    def _reference(self, start_step: int = 0):
        """The frozen KL reference: the model that entered GRPO, or the newest refreshed one
        at or before ``start_step``. Fresh runs copy the policy (GRPO has not started yet);
        resumed runs reload it from ``references/`` or ``sft_model/``, or the configured base
        model when SFT is disabled."""
        if not self.resume:
            return copy.deepcopy(self._plain_policy()).eval().requires_grad_(False)
        refreshed = [p for p in (self.run_dir / REFERENCES_DIR).glob("step-*")
                     if (p / "config.json").is_file() and int(p.name[5:]) <= start_step]
        if refreshed:
            from rlvr.models import load_model_and_tokenizer

            model, _ = load_model_and_tokenizer(str(max(refreshed)))
            return model.eval().requires_grad_(False)
        saved = self.run_dir / SFT_MODEL_DIR
        if saved.is_dir():
            model = self._load_policy(saved)
        else:
            from rlvr.models import load_model_and_tokenizer

            model, _ = load_model_and_tokenizer(self.config.model.name, seed=self.config.seed)
        return model.eval().requires_grad_(False)

    def _optimizer_for_grpo(self) -> None:
        g = self.config.grpo
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=g.learning_rate,
                                           weight_decay=g.weight_decay)
        warm = max(1, g.warmup_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm))

    def _results(self, history: dict, seconds: float) -> dict:
        rows = {v["label"]: v for v in history["validation"]}
        baseline = rows.get("before_grpo") or rows.get("base")
        trained = rows["trained"]
        return {"baseline": baseline, "trained": trained, "base_model": rows.get("base"),
                "sft": history.get("sft"),
                "pass_at_k": {k: v for k, v in (history.get("pass_at_k") or {}).items() if v},
                "gain_pass_at_1": trained["pass_at_1"] - (baseline or trained)["pass_at_1"],
                "stopped": history.get("stopped"),
                "rollbacks": list(self.monitor.rollback_log),
                "wall_seconds": seconds, "run_dir": str(self.run_dir),
                "precision": self.precision.as_dict()}


def _complete_model(directory: Path) -> bool:
    """A model directory that :func:`rlvr.models.loader.save_model` finished (it renames the
    complete temp dir into place, so existing is complete) holding a full model."""
    return (directory / "config.json").is_file()


def lora_base(run_dir: Path, model_name: str, seed: int) -> tuple[str, int]:
    """``(model name or path, seed)`` the run's GRPO LoRA adapters were trained on: the
    run's ``sft_model/`` when it did SFT (recorded in ``lora_base.json``), else
    ``model_name``; runs without the record (before full-weight SFT) used ``model_name``."""
    path = run_dir / LORA_BASE
    if not path.is_file():
        return model_name, seed
    record = json.loads(path.read_text(encoding="utf-8"))
    if record["base"] == SFT_MODEL_DIR:
        return str(run_dir / SFT_MODEL_DIR), seed
    return record["base"], int(record.get("seed", seed))


def remove_stale_temp(run_dir: Path) -> list[Path]:
    """Remove what an interrupted atomic save leaves: the temp dirs of
    :func:`rlvr.models.loader.save_model` (``checkpoints/.step-N.<tmp>``,
    ``.sft_model.<tmp>``, ``references/.step-N.<tmp>``, the ``.<name>.old-<pid>`` dirs of a
    replace) and the temp files of ``atomic_write`` (``.<name>.<tmp>.tmp``). Only names of
    those forms, in the run dir and its ``checkpoints/`` and ``references/``. Call it when no
    save is running (at the start of a run or resume). Returns the paths removed."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints", run_dir / REFERENCES_DIR):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            name = entry.name
            if entry.is_dir() and not entry.is_symlink() and (
                    name.startswith((".step-", f".{SFT_MODEL_DIR}."))):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_file() and name.startswith(".") and name.endswith(".tmp"):
                entry.unlink(missing_ok=True)
            else:
                continue
            removed.append(entry)
    return sorted(removed)


def reset_logs_before_grpo(run_dir: Path) -> list[dict]:
    """For a resume before GRPO's first checkpoint: keep only the base-model validation
    (``eval.base_model``, done before SFT) in ``validation.jsonl`` /
    ``validation_samples.jsonl``, empty the other logs (what followed is redone) and return
    the kept validation rows."""
    from rlvr.rewards.records_io import atomic_write

    kept_rows = []
    for name in LOG_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        kept = []
        if name.startswith("validation"):
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if row.get("label") == "base":
                    kept.append(line)
                    if name == "validation.jsonl":
                        kept_rows.append(row)
        with atomic_write(path) as f:
            f.write("".join(line + "\n" for line in kept))
    return kept_rows


def _step_of(checkpoint: Path) -> int:
    """The step of a ``checkpoints/step-NNNNNN`` directory."""
    return int(checkpoint.name.split("-")[1])


def _sampling_metrics(sampler: TaskSampler, skipped_before: int, counts_before: dict) -> dict:
    """This step's dynamic-sampling skips and, with several pools, prompts drawn per pool."""
    out = {"data/skipped": float(sampler.skipped - skipped_before)}
    if len(sampler.names) > 1:
        for name in sampler.names:
            out[f"data/pool/{name}"] = float(sampler.counts[name] - counts_before.get(name, 0))
    return out


LOG_FILES = ("metrics.jsonl", "samples.jsonl", "alerts.jsonl", "validation.jsonl",
             "validation_samples.jsonl")


def truncate_logs(run_dir: Path, step: int) -> None:
    """Drop the rows after ``step`` from the run's JSONL logs (atomically), so that a run
    resumed from the checkpoint of ``step`` does not log the lost steps twice. A final line
    cut short by a kill is dropped too."""
    from rlvr.rewards.records_io import atomic_write

    for name in LOG_FILES:
        path = run_dir / name
        if not path.is_file():
            continue
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if row.get("step", 0) <= step:
                kept.append(line)
        with atomic_write(path) as f:
            f.write("".join(line + "\n" for line in kept))


def results_table(results: dict) -> Table:
    """Baseline (the model that entered GRPO) vs trained, same validation set and settings."""
    table = Table(title=f"validation ({results['trained']['n']} held-out problems, greedy)")
    for col in ("model", "pass@1", "mean reward", "format", "truncated", "mean length"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for name, row in (("base (no SFT)", results.get("base_model")),
                      ("baseline (entered GRPO)", results.get("baseline")),
                      ("trained (GRPO)", results["trained"])):
        if row:
            table.add_row(name, f"{row['pass_at_1']:.1%}", f"{row['mean_reward']:.3f}",
                          f"{row['format_rate']:.1%}", f"{row['truncation_rate']:.1%}",
                          f"{row['mean_length']:.1f}")
    return table

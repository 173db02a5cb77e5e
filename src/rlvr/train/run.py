"""The main job: SFT cold start, then GRPO, with validation before and after (R28) and
everything on disk in the run directory (config.yaml, metrics.jsonl, samples.jsonl,
validation.jsonl, checkpoints/, results.json).

:class:`Run` sequences the phases over one explicit
:class:`~rlvr.train.state.TrainingState`: :mod:`rlvr.train.setup` builds it,
:mod:`rlvr.train.cold_start` is the SFT phase, :mod:`rlvr.train.evaluation` validates,
:mod:`rlvr.train.loop` runs the GRPO steps with the hooks of :mod:`rlvr.train.hooks`, and
:mod:`rlvr.train.resume` continues an interrupted run.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import torch
from rich.table import Table

from rlvr.eval.paired import paired_gain, parse_verdicts
from rlvr.models.precision import resolve_precision
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.train import cold_start, setup, tool_table
from rlvr.train import resume as resuming
from rlvr.train.checkpoint import write_json_atomic
from rlvr.train.config import RunConfig
from rlvr.train.errors import RunInputError
from rlvr.train.evaluation import Evaluator
from rlvr.train.hooks import LoopHooks
from rlvr.train.logs import LOG_FILES, append_log, console
from rlvr.train.loop import grpo_loop
from rlvr.train.resume import remove_stale_temp, reset_logs_before_grpo, truncate_logs
from rlvr.train.rundir import (
    LORA_BASE,
    REFERENCES_DIR,
    SFT_MODEL_DIR,
    SFT_REPORT,
    SFT_STATE,
    lora_base,
    run_dir_for,
    write_yaml_atomic,
)
from rlvr.train.sampler import TaskSampler, run_sampler
from rlvr.train.state import TrainingState

__all__ = ["LOG_FILES", "LORA_BASE", "REFERENCES_DIR", "Run", "RunInputError", "SFT_MODEL_DIR",
           "SFT_REPORT", "SFT_STATE", "append_log", "category_table", "console", "lora_base",
           "remove_stale_temp", "reset_logs_before_grpo", "results_table", "run_dir_for",
           "truncate_logs", "write_yaml_atomic"]


class Run:
    """One run: its config, directory, reward pipelines and :class:`TrainingState`.
    ``train()`` is the whole job; ``sft_only()`` the cold start alone (``rlvr sft``).

    Args:
        config: the run config (``model.precision`` is resolved here, on this machine).
        run_dir: the run directory.
        resume: continue the run in ``run_dir`` (``rlvr train --resume``).
        before_writing: called once the inputs (tasks, model) have loaded, before anything
            is written to ``run_dir`` (``--overwrite`` removes the old run's files there, so
            that a start refused for bad input deletes nothing).
    """

    def __init__(self, config: RunConfig, run_dir: Path, resume: bool = False,
                 before_writing: Callable[[], None] | None = None):
        self.config, self.run_dir, self.resume = config, run_dir, resume
        self.before_writing = before_writing
        if config.threads:
            torch.set_num_threads(config.threads)
        self.precision = self._resolve_precision(config)
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        if config.rollout.ray_address:  # R22: reward actors; closing them stops Ray if started
            # optional dependency: ray (extra `ray`), imported by rlvr.distributed.ray_workers
            from rlvr.distributed.ray_workers import RayRewardPipeline

            self.rewards = RayRewardPipeline.from_run_config(config)
        else:
            self.rewards = RewardPipeline(config.reward)
        # Validation, pass@k, SFT data checks and the reward audit use each task type's own
        # verifier, even when `reward.verifiers` swaps in another one for the training reward.
        self.eval_rewards = (RewardPipeline(config.reward.reference_config(),
                                            pool=self.rewards.pool)
                             if config.reward.verifiers else self.rewards)
        self.state = TrainingState()
        self.evaluator = Evaluator(config, run_dir, self.state, self.eval_rewards)
        self.hooks = LoopHooks.build(config, run_dir, self.state, self.evaluator)

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

    # -- setup steps (also used by the benchmarks) -----------------------------------------
    def load(self) -> None:
        """Tasks, model, prompts (:func:`rlvr.train.setup.load`)."""
        setup.load(self.state, self.config, self.eval_rewards)

    def engine(self):
        """A new rollout engine over the current policy (:func:`rlvr.train.setup.make_engine`)."""
        return setup.make_engine(self.config, self.state.models.policy,
                                 self.state.models.tokenizer)

    def instruction(self, task) -> str:
        """The instruction appended to ``task``'s question: its mixture source's, else
        ``data.instruction``."""
        return self.state.data.instructions.get(task.id, self.config.data.instruction)

    def sampler(self) -> TaskSampler:
        """A new sampler over the training tasks (:func:`rlvr.train.sampler.run_sampler`)."""
        return run_sampler(self.config, self.state.data.train_tasks, self.state.data.pool_of,
                           console.print)

    def sft(self, state_path: Path | None = None, resume: bool = False) -> dict:
        """SFT of the policy in place (:func:`rlvr.train.cold_start.sft`)."""
        return cold_start.sft(self.state, self.config, self.eval_rewards, state_path, resume)


    # -- the job ----------------------------------------------------------------------------
    def train(self) -> dict:
        """SFT (unless disabled or resuming), GRPO with health checks, final validation;
        returns results (with ``stopped``: the alert, when a health check ended the run).

        A checkpoint is written when GRPO starts (step 0: the rollback anchor and a resume
        point), every ``checkpoint.every`` steps and at the end. On resume the policy,
        optimizer, scheduler, RNG states, step, data position and health-monitor state come
        from the newest checkpoint, the KL reference from ``sft_model/`` (the model that
        entered GRPO), and the run's JSONL logs are cut back to that step, so the continued
        run matches an uninterrupted one (:mod:`rlvr.train.resume`). A resume before GRPO's
        first checkpoint (killed during SFT or the validation before GRPO) continues SFT
        from ``sft_checkpoint.pt`` or reuses a finished ``sft_model/``, keeps the base-model
        validation and redoes the rest. Any start removes the temp dirs / files of an
        interrupted save first.

        With ``model.lora_rank`` the GRPO adapters are applied after SFT (on ``sft_model/``,
        recorded in ``lora_base.json``).

        Raises:
            RunInputError: bad data or model; ``--resume`` with nothing saved to resume from;
                SFT with no example left within ``sft.max_length``.
        """
        c, s, start = self.config, self.state, time.perf_counter()
        if self.resume and self.run_dir.is_dir():
            for path in remove_stale_temp(self.run_dir):
                console.print(f"removed {path.relative_to(self.run_dir)}: left by a save that "
                              f"was interrupted")
        point = resuming.resume_point(self.run_dir, c, self.resume)
        checkpoint = point.checkpoint
        self.load()
        self._start_writing()
        # on resume too: the `--set` overrides that apply to the rest of the run are recorded
        write_yaml_atomic(self.run_dir / "config.yaml", c.model_dump(mode="json"))
        setup.open_monitoring(s, c, self.run_dir, self.eval_rewards, checkpoint)
        sampler_state = None
        if checkpoint is not None:
            resuming.load_checkpoint_policy(s, c, self.run_dir, checkpoint)
        setup.open_engine(s, c)
        if checkpoint is not None:
            sampler_state = resuming.restore(s, c, self.run_dir, checkpoint)
        else:
            self._before_grpo(point.before_grpo)
        setup.open_sampler(s, c, sampler_state)
        if checkpoint is None:
            self.hooks.checkpoint.save(0)
        stopped = self._grpo() if s.progress.step < c.grpo.steps else None
        history = s.progress.history
        if not any(v["label"] == "trained" for v in history["validation"]):
            step = stopped.step if stopped else c.grpo.steps
            history["validation"].append(self.evaluator.validate("trained", step))
            self.hooks.checkpoint.save(step)
        if stopped:
            console.print(f"[bold red]stopped[/] at step {stopped.step} by the "
                          f"{stopped.check} check: {stopped.message}")
        history.setdefault("pass_at_k", {})["trained"] = (
            None if stopped else self.evaluator.pass_at_k("trained"))
        results = self._results(history, time.perf_counter() - start)
        tool_table.add_no_tool(results, self.run_dir)  # a tool run's "no tool" row
        sampler = s.progress.sampler
        results["data_mixture"] = sampler.realised()
        results["dynamic_sampling_skipped"] = sampler.skipped
        if len(sampler.names) > 1:
            console.print("data pools (target -> realised share): " + ", ".join(
                f"{k} {v['target']:.0%} -> {v['realised']:.0%}"
                for k, v in results["data_mixture"].items()))
        write_json_atomic(self.run_dir / "results.json", results)
        s.sinks.close()
        self.rewards.close()
        return results

    def _start_writing(self) -> None:
        if self.before_writing is not None:
            self.before_writing()
        self.run_dir.mkdir(parents=True, exist_ok=True)

    def _before_grpo(self, before_grpo: bool) -> None:
        """A fresh start (or a resume before GRPO): base validation, SFT, the GRPO LoRA
        adapters, GRPO's optimizer, the validation and pass@k GRPO starts from."""
        c, s, ev = self.config, self.state, self.evaluator
        history = s.progress.history
        if tool_table.wanted(c):  # the model before SFT, without the tool (once)
            tool_table.validate_without_tools(s, c, self.run_dir, self.eval_rewards)
        if before_grpo:  # the base validation (if any) was done; what followed is redone
            history["validation"] = reset_logs_before_grpo(self.run_dir)
            console.print(f"resumed {self.run_dir} before GRPO (no GRPO checkpoint yet)")
        elif c.eval.base_model:
            history["validation"].append(ev.validate("base", 0))
        if c.sft.enabled:
            history["sft"] = cold_start.sft_stage(s, c, self.run_dir, self.eval_rewards,
                                                  resume=before_grpo)
        if c.model.lora_rank:
            setup.apply_lora(s, c, "GRPO, on " + (f"{SFT_MODEL_DIR}/" if c.sft.enabled
                                                   else c.model.name))
            write_json_atomic(self.run_dir / LORA_BASE,
                              {"base": SFT_MODEL_DIR if c.sft.enabled else c.model.name,
                               "seed": c.seed})
        setup.grpo_optimizer(s, c)
        setup.weight_average(s, c)
        row = ev.validate("before_grpo", 0)
        history["validation"].append(row)
        s.monitor.observe_validation(row)
        history["pass_at_k"] = {"baseline": ev.pass_at_k("baseline")}

    def _grpo(self):
        """GRPO steps ``state.step + 1 .. grpo.steps``, each followed by its hooks. Returns
        the alert that stopped the run early, or ``None``."""
        step_fn = setup.step_runner(self.state, self.config, self.run_dir, self.rewards,
                                    self.resume)
        try:
            return grpo_loop(self.config, self.state, self.hooks, step_fn)
        finally:
            setup.close_step_runner(self.state)

    def sft_only(self) -> dict:
        """The cold-start stage alone (``rlvr sft``): validate, SFT, validate, save the model
        to ``sft_model/`` (usable as ``model.name`` of a later run); returns the report."""
        c = self.config
        self.load()
        self._start_writing()
        write_yaml_atomic(self.run_dir / "config.yaml", c.model_dump(mode="json"))
        setup.open_engine(self.state, c)
        before = self.evaluator.validate("base", 0)
        report = cold_start.sft_stage(self.state, c, self.run_dir, self.eval_rewards,
                                      checkpoints=False)
        after = self.evaluator.validate("sft", 0)
        path = self.run_dir / SFT_MODEL_DIR
        results = {"sft": report, "base_model": before, "sft_model": after,
                   "model_dir": str(path), "precision": self.precision.as_dict()}
        write_json_atomic(self.run_dir / "sft_results.json", results)
        self.rewards.close()
        return results

    def _results(self, history: dict, seconds: float) -> dict:
        rows = {v["label"]: v for v in history["validation"]}
        baseline = rows.get("before_grpo") or rows.get("base")
        trained, average = rows["trained"], self.state.models.average
        return {"baseline": baseline, "trained": trained, "base_model": rows.get("base"),
                "sft": history.get("sft"),
                "pass_at_k": {k: v for k, v in (history.get("pass_at_k") or {}).items() if v},
                "gain_pass_at_1": trained["pass_at_1"] - (baseline or trained)["pass_at_1"],
                "gain_pass_at_1_ci": gain_interval(baseline, trained),
                "stopped": history.get("stopped"),
                "rollbacks": list(self.state.monitor.rollback_log),
                "wall_seconds": seconds, "run_dir": str(self.run_dir),
                "precision": self.precision.as_dict(),
                # what "trained" measured: the EMA of the weights (grpo.ema_decay) or None
                "weight_average": None if average is None else {
                    "decay": average.decay, "updates": average.updates}}


def gain_interval(baseline: dict | None, trained: dict) -> dict | None:
    """The pass@1 gain of ``trained`` over ``baseline`` (two validation rows of one run) problem
    by problem: :class:`rlvr.eval.paired.PairedGain`'s fields (95% interval, problems fixed /
    broken, McNemar's p-value). None without a baseline or when a row has no ``verdicts`` (a
    run validated before they were recorded, resumed now) or they differ in length."""
    before = (baseline or {}).get("verdicts") or ""
    after = trained.get("verdicts") or ""
    if not before or len(before) != len(after):
        return None
    return paired_gain(parse_verdicts(before), parse_verdicts(after)).as_dict()


def results_table(results: dict) -> Table:
    """Baseline (the model that entered GRPO) vs trained (labelled with its weight average,
    ``grpo.ema_decay``, when it has one), same validation set and settings; a tool run
    (results with ``no_tool``) adds the model before SFT without the tool first
    (:mod:`rlvr.train.tool_table`)."""
    table = Table(title=f"validation ({results['trained']['n']} held-out problems, greedy)")
    for col in ("model", "pass@1", "mean reward", "format", "truncated", "mean length"):
        table.add_column(col, justify="left" if col == "model" else "right")
    tool = results.get("no_tool") is not None
    for name, row in (("no tool (before SFT, one turn)", results.get("no_tool")),
                      ("base (no SFT)", results.get("base_model")),
                      ("SFT tool model (entered GRPO)" if tool else "baseline (entered GRPO)",
                       results.get("baseline")),
                      (_trained_label(results, tool), results["trained"])):
        if row:
            table.add_row(name, f"{row['pass_at_1']:.1%}", f"{row['mean_reward']:.3f}",
                          f"{row['format_rate']:.1%}", f"{row['truncation_rate']:.1%}",
                          f"{row['mean_length']:.1f}")
    return table


def _trained_label(results: dict, tool: bool) -> str:
    """The trained row's name, with the weight average it measured (``grpo.ema_decay``)."""
    average = results.get("weight_average")
    ema = f"EMA {average['decay']:g}" if average else ""
    if tool:
        return "GRPO tool model" + (f" ({ema})" if ema else "")
    return "trained (GRPO" + (f", {ema}" if ema else "") + ")"


def category_table(results: dict) -> Table | None:
    """Greedy pass@1 per task category (a reasoning-gym task's dataset, an arithmetic level)
    of the validation rows in ``results`` (the base model if validated, the model that entered
    GRPO, the trained one: their ``by_category``), with the gain in points from entering GRPO
    to trained; None when the validation tasks have fewer than two categories."""
    trained = results["trained"].get("by_category") or {}
    if not trained:
        return None
    earlier = [(name, (results.get(key) or {}).get("by_category") or {})
               for name, key in (("base (no SFT)", "base_model"), ("baseline", "baseline"))]
    earlier = [(name, rows) for name, rows in earlier if rows]
    baseline = dict(earlier).get("baseline", {})
    table = Table(title="validation pass@1 by category (greedy)")
    for col in ("category", "n", *(name for name, _ in earlier), "trained", "gain"):
        table.add_column(col, justify="left" if col == "category" else "right")
    for category, after in trained.items():
        cells = [f"{rows[category]['pass_at_1']:.1%}" if category in rows else "-"
                 for _, rows in earlier]
        before = baseline.get(category)
        gain = f"{(after['pass_at_1'] - before['pass_at_1']) * 100:+.1f}" if before else "-"
        table.add_row(category, str(after["n"]), *cells, f"{after['pass_at_1']:.1%}", gain)
    return table

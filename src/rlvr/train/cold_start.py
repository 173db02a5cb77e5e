"""The SFT cold start as a run phase (R17): verified worked solutions, LoRA or full
fine-tuning, the result saved as ``sft_model/`` (reused by a resume), and the LoRA adapters
GRPO trains."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.envs import make_env
from rlvr.io import json_text, record_output
from rlvr.models import load_model_and_tokenizer
from rlvr.models.loader import save_model
from rlvr.models.lora import is_lora, merged_copy
from rlvr.progress import Phase
from rlvr.tasks.prompting import chat_messages, prompt_ids, write_prompt_settings
from rlvr.tasks.registry import task_source
from rlvr.train.demonstrations import DemonstrationError, encode_demonstrations, tool_demonstrations
from rlvr.train.errors import RunInputError
from rlvr.train.logs import console
from rlvr.train.policy import sync_engine
from rlvr.train.rundir import SFT_MODEL_DIR, SFT_REPORT, SFT_STATE, complete_model, plain_policy
from rlvr.train.setup import apply_lora, replace_policy
from rlvr.train.sft import SFTInputError, no_examples_error, run_sft, sft_steps, verified_examples
from rlvr.train.state import TrainingState


def sft(state: TrainingState, config, eval_rewards, state_path: Path | None = None,
        resume: bool = False) -> dict:
    """SFT of ``state.models.policy`` in place (:func:`rlvr.train.sft.run_sft`; ``state_path`` /
    ``resume``: its checkpoint file and whether to continue from it) on the first
    ``sft.examples`` training tasks (or, for a source with :attr:`sft_mixture
    <rlvr.tasks.registry.TaskSource.sft_mixture>`, ``sft.mixture`` tasks of its generator)
    whose solutions verify; with ``sft.demonstrations: tool``, verified tool-use episodes of
    those tasks instead (:func:`_tool_demonstrations`); returns the report as a dict.

    Raises:
        RunInputError: no solution verifies (the message names how many tasks lack a
            ``solution`` field and the fixes), or no example left within
            ``sft.max_length``.
    """
    c, data = config, state.data
    pool = sft_pool(state, c)
    if c.sft.demonstrations == "tool":
        examples, prompts = [], []
        rejected, encoded = _tool_demonstrations(state, c, pool, eval_rewards)
        console.print(f"sft: {len(encoded[0])} verified tool-use demonstrations, {rejected} "
                      f"rejected")
    else:
        examples, rejected = verified_examples(pool, eval_rewards)
        if not examples:
            raise RunInputError(str(no_examples_error(
                len(pool), sum(not t.solution for t in pool))))
        prompts = [prompt_ids(state.models.tokenizer, t, data.instruction(t), c.data.one_shot)
                   for t in examples]
        encoded = None
        console.print(f"sft: {len(examples)} verified examples, {rejected} rejected")
    # the loop prints a line (loss, ETA) every 10 steps; the phase adds a bar on a
    # terminal and a line after 30 s without one in a log
    try:
        steps = sft_steps(len(encoded[0]) if encoded else len(examples), c.sft)
        with Phase("sft", steps, console, unit="steps", every_fraction=None) as phase:
            report = run_sft(state.models.policy, state.models.tokenizer, examples, prompts,
                             c.sft, c.seed, c.model.bf16, rejected=rejected, log=console.print,
                             progress=phase.update, state_path=state_path, resume=resume,
                             encoded=encoded)
    except SFTInputError as exc:
        raise RunInputError(str(exc)) from exc
    sync_engine(state.models.engine, state.models.policy)
    return report.__dict__


def sft_pool(state: TrainingState, config) -> list:
    """The tasks the cold start draws its examples from: the first ``sft.examples`` training
    tasks, or ``sft.examples`` tasks of ``sft.mixture`` from a source that generates them
    (:attr:`rlvr.tasks.registry.TaskSource.sft_mixture`)."""
    c = config
    source = task_source(c.data.source)
    if c.sft.mixture and source.sft_mixture and not c.data.sources:
        return source.generate(c.sft.mixture, c.sft.examples, seed=c.seed + 2, split="train",
                               unique=False)
    return state.data.train_tasks[: c.sft.examples]


def _tool_demonstrations(state: TrainingState, config, pool, eval_rewards):
    """``(rejected, encoded)`` of ``sft.demonstrations: tool``: the pool's tool-use episodes
    played through the run's environment, verified and encoded
    (:mod:`rlvr.train.demonstrations`), prompted as GRPO prompts them.

    Raises:
        RunInputError: the run has no environment offering the calculator, no pool task
            carries an expression, none verifies, or no demonstration fits
            ``sft.max_length``.
    """
    c, data = config, state.data
    env_config = getattr(c, "env", None)
    if env_config is None:
        raise RunInputError("sft.demonstrations: tool needs the run's `env` section "
                            "(env.name: tool, env.tools: [calculator])")
    messages = [chat_messages(t, data.instruction(t), c.data.one_shot) for t in pool]
    try:
        demos, rejected = tool_demonstrations(make_env(env_config, eval_rewards), pool, messages)
        if not demos:
            raise RunInputError(
                f"sft: 0 of the {len(pool)} tool-use demonstrations verify as correct (their "
                f"calculator call and answer are scripted from metadata.expression): the cold "
                f"start would train on nothing; check the environment's reward (rlvr verify), "
                f"or set sft.enabled: false")
        return rejected, encode_demonstrations(state.models.tokenizer, demos, c.sft.max_length,
                                               console.print)
    except (DemonstrationError, SFTInputError) as exc:
        raise RunInputError(str(exc)) from exc


def sft_stage(state: TrainingState, config, run_dir: Path, eval_rewards, resume: bool = False,
              checkpoints: bool = True) -> dict | None:
    """SFT, then the model saved as ``sft_model/`` (with its report); returns the report.

    With ``model.lora_rank`` SFT trains the full weights (``sft.full_finetune``, default;
    GRPO's adapters come later, on top of the SFT model) or its own adapters, merged
    before saving. ``checkpoints``: write ``sft_checkpoint.pt`` every
    ``sft.checkpoint_every`` steps (removed once ``sft_model/`` is saved). ``resume``: a
    complete ``sft_model/`` is loaded instead of training again; else SFT continues from
    ``sft_checkpoint.pt`` when there is one."""
    c, saved = config, run_dir / SFT_MODEL_DIR
    if resume and complete_model(saved):
        replace_policy(state, load_model_and_tokenizer(str(saved))[0])
        sync_engine(state.models.engine, state.models.policy)
        (run_dir / SFT_STATE).unlink(missing_ok=True)  # killed before its removal
        record_output(run_dir / SFT_STATE, removed=True)
        console.print(f"sft: finished before the interruption; {saved} loaded")
        report = saved / SFT_REPORT  # absent in an sft_model/ of an older rlvr
        return json.loads(report.read_text(encoding="utf-8")) if report.is_file() else None
    if c.model.lora_rank and not c.sft.full_finetune:
        apply_lora(state, c, "SFT, sft.full_finetune: false; merged into sft_model/ before GRPO")
    elif c.model.lora_rank:
        console.print(f"sft: full fine-tuning (sft.full_finetune); the LoRA adapters "
                      f"(model.lora_rank={c.model.lora_rank}) train in GRPO on top of "
                      f"sft_model/, the KL reference")
    path = run_dir / SFT_STATE if checkpoints else None
    report = sft(state, c, eval_rewards, state_path=path, resume=resume)
    if is_lora(state.models.policy):
        replace_policy(state, merged_copy(state.models.policy))
    save_sft_model(state, run_dir, report)
    if path is not None:
        path.unlink(missing_ok=True)
        record_output(path, removed=True)
    return report


def save_sft_model(state: TrainingState, run_dir: Path, report: dict | None) -> Path:
    """The policy (LoRA merged) as ``sft_model/``, with the SFT report and the run's prompt
    settings."""
    def extra(tmp: Path) -> None:
        (tmp / SFT_REPORT).write_text(json_text(report, default=float), encoding="utf-8")
        write_prompt_settings(tmp, state.prompt)

    return save_model(run_dir / SFT_MODEL_DIR, plain_policy(state.models.policy),
                      state.models.tokenizer, write_extra=extra)

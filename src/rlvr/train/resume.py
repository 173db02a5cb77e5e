"""Resuming a run (``rlvr train --resume``): where to continue from, restoring a GRPO
checkpoint into the :class:`~rlvr.train.state.TrainingState`, cutting the logs back to it, and
cleaning up after an interrupted save.

A resume from a checkpoint continues exactly: the policy, optimizer, scheduler, RNG states,
step, data position, LR scale, KL coefficient and health-monitor state come from it, and the
JSONL logs lose the rows after its step. A resume before GRPO's first checkpoint (killed
during SFT or the validation before GRPO) redoes what followed the base-model validation.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from rlvr.io import atomic_write
from rlvr.run_manifest import lists_temp_of
from rlvr.train.checkpoint import latest_checkpoint, load_trainer_state
from rlvr.train.errors import RunInputError
from rlvr.train.logs import LOG_FILES, console
from rlvr.train.rundir import REFERENCES_DIR, SFT_MODEL_DIR, SFT_STATE, complete_model, load_policy
from rlvr.train.setup import grpo_optimizer, kl_controller, replace_policy
from rlvr.train.state import TrainingState
from rlvr.train.weight_average import restore_average


@dataclass(frozen=True)
class ResumePoint:
    """Where a run starts.

    Attributes:
        checkpoint: the GRPO checkpoint to continue from, or ``None``.
        before_grpo: a resume with no GRPO checkpoint yet (SFT or the validation before
            GRPO was interrupted).
    """

    checkpoint: Path | None = None
    before_grpo: bool = False


def resume_point(run_dir: Path, config, resume: bool) -> ResumePoint:
    """The :class:`ResumePoint` of a start (``resume``: ``--resume``).

    Raises:
        RunInputError: ``--resume`` with nothing saved to resume from.
    """
    checkpoint = latest_checkpoint(run_dir) if resume else None
    before_grpo = resume and checkpoint is None  # killed during SFT or validation
    if before_grpo and not (config.sft.enabled and (complete_model(run_dir / SFT_MODEL_DIR)
                                                    or (run_dir / SFT_STATE).is_file())):
        # the restart keeps the run's settings: its saved config.yaml is read before
        # --overwrite clears the directory
        saved = run_dir / "config.yaml"
        config_arg = f"-c {saved} " if saved.is_file() else ""
        raise RunInputError(f"--resume: {run_dir} has no complete checkpoint and no "
                            f"SFT checkpoint (killed before anything was saved; start it "
                            f"afresh with: rlvr train {config_arg}-o {run_dir} --overwrite)")
    return ResumePoint(checkpoint, before_grpo)


def restore(state: TrainingState, config, run_dir: Path, checkpoint: Path) -> dict:
    """Load ``checkpoint``'s trainer state into ``state`` (whose policy was loaded from it,
    :func:`load_checkpoint_policy`): a GRPO optimizer and schedule over the policy, their
    saved states and the RNG states, the step, the history, the LR scale, the KL controller
    at its saved coefficient and the monitor's state, the weight average
    (``grpo.ema_decay``: the checkpoint's model files) and the policy's own weights (saved
    beside an average); cut the logs back to the step. Returns the sampler's saved state
    (the sampler is built later)."""
    grpo_optimizer(state, config)
    o, p = state.optim, state.progress
    saved = load_trainer_state(checkpoint, o.optimizer, o.scheduler)
    p.step, extra = saved["step"], saved["extra"]
    state.models.average = restore_average(state.models.policy, saved["policy_weights"],
                                           config.grpo.ema_decay, p.step)
    p.history = extra["history"]
    o.lr_scale = extra.get("lr_scale", 1.0)
    o.kl = kl_controller(config, extra.get("kl_coef"))
    if "monitor" in extra:
        state.monitor.load_state_dict(extra["monitor"])
    truncate_logs(run_dir, p.step)
    console.print(f"resumed from {checkpoint} at step {p.step}")
    return extra["sampler"]


def load_checkpoint_policy(state: TrainingState, config, run_dir: Path,
                           checkpoint: Path) -> None:
    """``state.models.policy`` <- the policy saved in ``checkpoint``
    (:func:`rlvr.train.rundir.load_policy`)."""
    replace_policy(state, load_policy(run_dir, config, checkpoint))


def remove_stale_temp(run_dir: Path) -> list[Path]:
    """Remove what an interrupted atomic save leaves: the temp dirs of
    :func:`rlvr.models.loader.save_model` (``checkpoints/.step-N.<tmp>``,
    ``.sft_model.<tmp>``, ``references/.step-N.<tmp>``, the ``.<name>.old-<pid>`` dirs of a
    replace) and the temp files of ``atomic_write`` (``.<name>.<tmp>.tmp``). Only names of
    those forms, in the run dir and its ``checkpoints/`` and ``references/``; while the run
    directory's manifest records (:mod:`rlvr.run_manifest`), a temp file only when the file
    it was for is listed there (a dotfile of the user's ending in ``.tmp`` is kept). Call it
    when no save is running (at the start of a resume). Returns the paths removed."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints", run_dir / REFERENCES_DIR):
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            name = entry.name
            if entry.is_dir() and not entry.is_symlink() and (
                    name.startswith((".step-", f".{SFT_MODEL_DIR}."))):
                shutil.rmtree(entry, ignore_errors=True)
            elif (entry.is_file() and name.startswith(".") and name.endswith(".tmp")
                  and lists_temp_of(entry) is not False):
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


def truncate_logs(run_dir: Path, step: int) -> None:
    """Drop the rows after ``step`` from the run's JSONL logs (atomically), so that a run
    resumed from the checkpoint of ``step`` does not log the lost steps twice. A final line
    cut short by a kill is dropped too."""
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

"""Checkpoints: model, tokenizer, optimizer, scheduler, RNG states, step and data position,
written atomically (temp dir, then rename) so a run killed at any moment leaves the last
complete checkpoint usable."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import torch

from rlvr.io import atomic_write, record_output, write_json
from rlvr.models.loader import save_model
from rlvr.tasks.prompting import write_prompt_settings

STATE_FILE = "trainer_state.pt"
SOURCE_FILE = "rollout_source.pt"


def save_checkpoint(run_dir: Path, step: int, model, tokenizer, optimizer, scheduler,
                    extra: dict, keep: int = 2, prompt: dict | None = None,
                    policy_weights: dict | None = None,
                    source_state: dict | None = None) -> Path:
    """Write ``run_dir/checkpoints/step-NNNNNN`` atomically; keep the newest ``keep``, plus
    step 0 (the model entering GRPO: the rollback anchor of last resort).

    ``extra`` (JSON-serialisable: data position, metrics history...) is stored with the
    trainer state; ``prompt`` (:func:`rlvr.tasks.prompting.prompt_settings`: instruction,
    one-shot, chat template) as ``rlvr_prompt.json``, so that ``rlvr eval`` prompts the
    checkpoint as it was trained. ``model`` is the run's output (with ``grpo.ema_decay``
    the weight average); ``policy_weights`` (then the policy's own trainable weights,
    :func:`rlvr.train.weight_average.trainable_state`) go into the trainer state.
    ``source_state`` (an asynchronous rollout source's groups and jobs in flight, when not
    empty) goes to ``rollout_source.pt``. Returns the checkpoint directory.
    """
    root = run_dir / "checkpoints"
    state = {"step": step, "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "torch_rng": torch.get_rng_state(),
             "python_rng": random.getstate(), "extra": extra}
    if policy_weights is not None:
        state["policy_weights"] = policy_weights

    def write_extra(tmp: Path) -> None:
        torch.save(state, tmp / STATE_FILE)
        if source_state:
            torch.save(source_state, tmp / SOURCE_FILE)
        if prompt is not None:
            write_prompt_settings(tmp, prompt)

    final = save_model(root / f"step-{step:06d}", model, tokenizer, write_extra=write_extra)
    steps = sorted(p for p in root.glob("step-*") if p.is_dir() and p.name != "step-000000")
    for old in steps[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
        record_output(old, removed=True)
    return final


def latest_checkpoint(run_dir: Path, max_step: int | None = None) -> Path | None:
    """The newest complete checkpoint of a run (temp dirs of an interrupted save are
    ignored), optionally at most ``max_step`` (the step-0 checkpoint always qualifies), or
    ``None``."""
    done = [p for p in (run_dir / "checkpoints").glob("step-*")
            if (p / STATE_FILE).is_file()
            and ((p / "config.json").is_file() or (p / "adapter_config.json").is_file())]
    if max_step is not None:
        done = [p for p in done if int(p.name.split("-")[1]) <= max(max_step, 0)]
    return max(done, default=None)


def load_source_state(checkpoint: Path) -> dict:
    """The rollout source's state saved in ``checkpoint`` (``{}`` when none was saved: a
    synchronous run)."""
    path = checkpoint / SOURCE_FILE
    return torch.load(path, weights_only=False) if path.is_file() else {}


def load_trainer_state(checkpoint: Path, optimizer, scheduler, rng: bool = True) -> dict:
    """Restore optimizer, scheduler and (``rng=True``: resume) RNG states; return
    ``{"step": ..., "extra": ..., "policy_weights": ...}`` (the policy's own weights when the
    checkpoint's model is a weight average, else ``None``). A rollback keeps the RNG running
    (``rng=False``)."""
    state = torch.load(checkpoint / STATE_FILE, weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if rng:
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
    return {"step": state["step"], "extra": state["extra"],
            "policy_weights": state.get("policy_weights")}


def write_json_atomic(path: Path, data) -> None:
    """``data`` as standard JSON (non-finite floats as null, listed under ``"nonfinite"``:
    :func:`rlvr.io.json_text`; other objects as ``str``) to a temp file beside
    ``path``, then renamed over it."""
    with atomic_write(path) as f:
        write_json(f, data, default=str, ensure_ascii=True)

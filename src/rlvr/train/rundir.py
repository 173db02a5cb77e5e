"""A run directory: the names in it, and loading the models a run saved there.

Layout: ``config.yaml``, the JSONL logs (:data:`rlvr.train.logs.LOG_FILES`),
``checkpoints/step-NNNNNN``, ``sft_model/`` (the model that entered GRPO), ``references/``
(refreshed KL references), ``lora_base.json``, ``results.json``; and rlvr's bookkeeping
(:mod:`rlvr.run_manifest`): ``.rlvr-manifest.json`` (every path rlvr wrote there, what
``--overwrite`` removes) and ``.rlvr-lock`` (held by the command writing the directory).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import yaml

from rlvr.io import atomic_write
from rlvr.models import load_model_and_tokenizer
from rlvr.models.lora import is_lora, load_adapter, merged_copy
from rlvr.models.lora_base import LORA_BASE, SFT_MODEL_DIR, lora_base  # noqa: F401  (re-exported)

REFERENCES_DIR = "references"  # refreshed KL references (algo.ref_refresh_every)
SFT_REPORT = "sft_report.json"  # in sft_model/: the SFT report, for a resume before GRPO
SFT_STATE = "sft_checkpoint.pt"  # SFT in progress (sft.checkpoint_every), removed once saved


def run_dir_for(config) -> Path:
    """``config.output_dir``, else ``runs/<name>-<timestamp>``."""
    if config.output_dir:
        return Path(config.output_dir)
    return Path("runs") / f"{config.name}-{datetime.now():%Y%m%d-%H%M%S}"


def write_yaml_atomic(path: Path, data: dict) -> None:
    """The resolved config as YAML, written atomically (R41)."""
    with atomic_write(path) as f:
        yaml.safe_dump(data, f, sort_keys=False)


def complete_model(directory: Path) -> bool:
    """A model directory that :func:`rlvr.models.loader.save_model` finished (it renames the
    complete temp dir into place, so existing is complete) holding a full model."""
    return (directory / "config.json").is_file()


def step_of(checkpoint: Path) -> int:
    """The step of a ``checkpoints/step-NNNNNN`` directory."""
    return int(checkpoint.name.split("-")[1])


def plain_policy(policy):
    """``policy`` as a plain model: a LoRA policy merged into a copy, else itself."""
    return merged_copy(policy) if is_lora(policy) else policy


def load_policy(run_dir: Path, config, directory: Path):
    """A policy saved in the run: a full model, or (LoRA) the adapters' base model
    (``sft_model/`` when the run did SFT, see ``lora_base.json``; else ``model.name``) with
    the saved adapter, trainable, so the optimizer state lines up with its parameters."""
    if (directory / "adapter_config.json").is_file():
        name, seed = lora_base(run_dir, config.model.name, config.seed)
        base, _ = load_model_and_tokenizer(name, seed=seed)
        return load_adapter(base, directory)
    model, _ = load_model_and_tokenizer(str(directory))
    return model

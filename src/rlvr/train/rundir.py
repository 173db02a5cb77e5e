"""A run directory: the names in it, and loading the models a run saved there.

Layout: ``config.yaml``, the JSONL logs (:data:`rlvr.train.logs.LOG_FILES`),
``checkpoints/step-NNNNNN``, ``sft_model/`` (the model that entered GRPO), ``references/``
(refreshed KL references), ``lora_base.json``, ``results.json``.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import yaml

REFERENCES_DIR = "references"  # refreshed KL references (algo.ref_refresh_every)
SFT_MODEL_DIR = "sft_model"  # the model that entered GRPO: KL reference on resume, `rlvr sft` output
SFT_REPORT = "sft_report.json"  # in sft_model/: the SFT report, for a resume before GRPO
SFT_STATE = "sft_checkpoint.pt"  # SFT in progress (sft.checkpoint_every), removed once saved
LORA_BASE = "lora_base.json"  # what the GRPO LoRA adapters are on: {"base": "sft_model" | name}


def run_dir_for(config) -> Path:
    """``config.output_dir``, else ``runs/<name>-<timestamp>``."""
    if config.output_dir:
        return Path(config.output_dir)
    return Path("runs") / f"{config.name}-{datetime.now():%Y%m%d-%H%M%S}"


def write_yaml_atomic(path: Path, data: dict) -> None:
    """The resolved config as YAML, written atomically (R41)."""
    from rlvr.io import atomic_write

    with atomic_write(path) as f:
        yaml.safe_dump(data, f, sort_keys=False)


def complete_model(directory: Path) -> bool:
    """A model directory that :func:`rlvr.models.loader.save_model` finished (it renames the
    complete temp dir into place, so existing is complete) holding a full model."""
    return (directory / "config.json").is_file()


def step_of(checkpoint: Path) -> int:
    """The step of a ``checkpoints/step-NNNNNN`` directory."""
    return int(checkpoint.name.split("-")[1])


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


def plain_policy(policy):
    """``policy`` as a plain model: a LoRA policy merged into a copy, else itself."""
    from rlvr.models.lora import is_lora, merged_copy

    return merged_copy(policy) if is_lora(policy) else policy


def load_policy(run_dir: Path, config, directory: Path):
    """A policy saved in the run: a full model, or (LoRA) the adapters' base model
    (``sft_model/`` when the run did SFT, see ``lora_base.json``; else ``model.name``) with
    the saved adapter, trainable, so the optimizer state lines up with its parameters."""
    from rlvr.models import load_model_and_tokenizer

    if (directory / "adapter_config.json").is_file():
        from rlvr.models.lora import load_adapter

        name, seed = lora_base(run_dir, config.model.name, config.seed)
        base, _ = load_model_and_tokenizer(name, seed=seed)
        return load_adapter(base, directory)
    model, _ = load_model_and_tokenizer(str(directory))
    return model

"""What a run's GRPO LoRA adapters were trained on (``lora_base.json`` in the run directory).

Here, below the trainer, because loading an adapter checkpoint for inference
(:mod:`rlvr.models.inference`) needs it; :mod:`rlvr.train.rundir` re-exports these names.
"""

from __future__ import annotations

import json
from pathlib import Path

# the model that entered GRPO: KL reference on resume, `rlvr sft` output
SFT_MODEL_DIR = "sft_model"
LORA_BASE = "lora_base.json"  # what the GRPO LoRA adapters are on: {"base": "sft_model" | name}


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

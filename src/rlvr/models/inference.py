"""Load a model for inference (``rlvr serve``, ``rlvr eval``): any model name the loader takes,
or a checkpoint of a run, LoRA adapter checkpoints merged into plain weights."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rlvr.models.loader import ModelLoadError, load_model_and_tokenizer
from rlvr.models.lora import load_adapter
from rlvr.models.lora_base import lora_base


def load_for_inference(name: str):
    """``(model, tokenizer)`` for ``name``: anything :func:`rlvr.models.load_model_and_tokenizer`
    accepts, plus a LoRA adapter checkpoint (a directory with ``adapter_config.json``), whose
    base model is the run's (``RUN/checkpoints/step-N``): its ``sft_model/`` when the run
    recorded that in ``lora_base.json``, else ``model.name`` of its ``config.yaml``; or the
    adapter's ``base_model_name_or_path``. The adapters are merged into plain weights.

    Raises:
        rlvr.models.loader.ModelLoadError: the model, or an adapter's base model, does not load.
    """
    path = Path(name)
    if not (path / "adapter_config.json").is_file():
        return load_model_and_tokenizer(name)
    from transformers import AutoTokenizer  # optional dependency: transformers (extra `train`)

    base_name, seed = _adapter_base(path)
    base, tokenizer = load_model_and_tokenizer(base_name, seed=seed)
    if (path / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    return load_adapter(base, path, trainable=False).merge_and_unload(), tokenizer


def _adapter_base(path: Path) -> tuple[str, int]:
    """(base model name, tiny-random seed) of the adapter checkpoint at ``path``."""
    for run_dir in (path.parent, path.parent.parent):
        config = run_dir / "config.yaml"
        if config.is_file():
            data = yaml.safe_load(config.read_text()) or {}
            name = (data.get("model") or {}).get("name")
            if name:  # the run's sft_model/ when its adapters were trained on it
                return lora_base(run_dir, str(name), int(data.get("seed", 0)))
    base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if base:
        return str(base), 0
    raise ModelLoadError(f"{path}: LoRA adapter without a base model (no run config.yaml "
                         f"beside it and no base_model_name_or_path in adapter_config.json)")


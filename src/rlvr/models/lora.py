"""LoRA (Hu et al. 2021, arXiv:2106.09685) through peft: W' = W + (alpha / r) * B A on every
linear layer of the decoder, the base weights frozen.

The ``torch`` rollout engine samples the adapter-wrapped policy itself: its snapshot merges each
layer's weight (base + delta) as it copies it, so a run needs no merged copy of the model. The
engines that run a plain module (``hf``, ``vllm``, Ray's actors, the asynchronous rollout
workers) are handed a LoRA policy as *merged* weights (:func:`merged_state_dict`,
:func:`merged_copy`), never as the adapter-wrapped module (whose ``.weight`` lacks the delta).
"""

from __future__ import annotations

import copy
import warnings
from contextlib import contextmanager

import torch

from rlvr.models.loader import quiet_progress_bars

# peft asks transformers >= 5 for `is_gradient_checkpointing`, which warns that it is renamed:
# a library-internal deprecation the user can do nothing about. Silenced for those calls only.
_PEFT_DEPRECATION = r"`is_gradient_checkpointing` is deprecated"


@contextmanager
def _quiet_peft():
    """peft calls without its known transformers FutureWarning (:data:`_PEFT_DEPRECATION`; any
    other warning still shows) and without transformers' / the hub's tqdm bars."""
    with warnings.catch_warnings(), quiet_progress_bars():
        warnings.filterwarnings("ignore", message=_PEFT_DEPRECATION, category=FutureWarning)
        yield


def apply_lora(model, rank: int, alpha: float):
    """Wrap ``model`` with trainable LoRA adapters of rank ``rank`` on all linear layers
    (attention and MLP projections; not the LM head). Returns the ``PeftModel``; only adapter
    parameters require grad.

    Raises:
        ValueError: ``rank`` < 1.
    """
    from peft import LoraConfig, get_peft_model  # optional dependency: peft (extra `train`)

    if rank < 1:
        raise ValueError(f"model.lora_rank: expected >= 1 for LoRA, got {rank}")
    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, bias="none",
                        target_modules="all-linear", task_type="CAUSAL_LM")
    with _quiet_peft():
        return get_peft_model(model, config)


def is_lora(model) -> bool:
    """True for a peft-wrapped model."""
    return hasattr(model, "peft_config")


@torch.no_grad()
def merged_state_dict(model) -> dict[str, torch.Tensor]:
    """The plain (base-architecture) state dict of a LoRA model with its adapters merged in:
    keys as in the un-wrapped model, values fresh tensors. The model itself is unchanged."""
    model.merge_adapter()
    try:
        base = model.get_base_model()
        return {key.replace(".base_layer", ""): value.detach().clone()
                for key, value in base.state_dict().items() if "lora_" not in key}
    finally:
        model.unmerge_adapter()


def merged_copy(model):
    """A plain transformers model (no adapters) with ``model``'s merged weights: what a rollout
    engine that runs a plain module (not ``torch``), ``save_pretrained`` for later full-model
    use, or a KL reference should see."""
    with _quiet_peft():
        return copy.deepcopy(model).merge_and_unload()


def load_adapter(base_model, directory, trainable: bool = True):
    """``base_model`` wrapped with the adapter saved in ``directory`` (a checkpoint)."""
    from peft import PeftModel  # optional dependency: peft (extra `train`)

    with _quiet_peft():
        return PeftModel.from_pretrained(base_model, str(directory), is_trainable=trainable)

"""Rollout engines behind one protocol: ``create_engine(name, model)`` then
``engine.generate(prompt_ids, SamplingParams(...)) -> RolloutOutput``.

Engines: ``torch`` (CPU default, :mod:`rlvr.rollout.torch_engine`), ``hf`` (transformers
``generate``, the reference, :mod:`rlvr.rollout.hf`), ``vllm`` (CUDA GPU, optional extra
``rlvr[vllm]``, :mod:`rlvr.rollout.vllm_engine`; registering it does not import vLLM).
"""

# Importing the modules registers their engines.
from rlvr.rollout import hf as _hf  # noqa: F401
from rlvr.rollout import torch_engine as _torch_engine  # noqa: F401
from rlvr.rollout import vllm_engine as _vllm_engine  # noqa: F401  (vllm imported lazily)
from rlvr.rollout.decoder.support import UnsupportedModelError
from rlvr.rollout.engine import (
    ENGINES,
    EngineMeta,
    RolloutEngine,
    UnknownEngineError,
    create_auto_engine,
    create_engine,
    engine_names,
    register_engine,
)
from rlvr.rollout.hf import HFEngine
from rlvr.rollout.torch_engine import TorchEngine
from rlvr.rollout.types import (
    FINISH_LENGTH,
    FINISH_STOP,
    RolloutOutput,
    RolloutTiming,
    SamplingParams,
    SamplingParamsError,
)

DEFAULT_ENGINE = "torch"

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "FINISH_LENGTH",
    "FINISH_STOP",
    "EngineMeta",
    "HFEngine",
    "RolloutEngine",
    "RolloutOutput",
    "RolloutTiming",
    "SamplingParams",
    "SamplingParamsError",
    "TorchEngine",
    "UnknownEngineError",
    "UnsupportedModelError",
    "create_auto_engine",
    "create_engine",
    "engine_names",
    "register_engine",
]

"""Pushing policy weights into a running vLLM model (see :mod:`rlvr.rollout.vllm_engine` for the
API paths): finding the in-process model, the worker-side loader run through
``LLM.collective_rpc``, and the ``[(name, tensor)]`` list both take.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from rlvr.rollout.engine import as_state_dict

WeightList = list[tuple[str, Tensor]]


def _attr_path(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


_MODEL_RUNNER_PATHS = (
    "llm_engine.model_executor.driver_worker.model_runner",
    "llm_engine.model_executor.driver_worker.worker.model_runner",
    "llm_engine.engine_core.engine_core.model_executor.driver_worker.model_runner",
    "llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner",
)


def _runner_model(runner: Any) -> Any:
    """The runner's ``nn.Module`` (``get_model()`` unwraps CUDA-graph wrappers in newer V1)."""
    get_model = getattr(runner, "get_model", None)
    if callable(get_model):
        try:
            model = get_model()
        except Exception:
            model = None
        if model is not None:
            return model
    return getattr(runner, "model", None)


def find_inprocess_model(llm: Any) -> Any:
    """The vLLM ``nn.Module`` inside ``llm`` when its executor runs in this process (V0, or V1
    without multiprocessing), else ``None``."""
    for path in _MODEL_RUNNER_PATHS:
        runner = _attr_path(llm, path)
        if runner is None:
            continue
        model = _runner_model(runner)
        if model is not None and callable(getattr(model, "load_weights", None)):
            return model
    return None


def load_weights_on_worker(worker: Any, weights: WeightList) -> int:
    """Run inside a vLLM worker by ``collective_rpc``: load ``weights`` into its model."""
    runner = getattr(worker, "model_runner", None)
    model = _runner_model(runner) if runner is not None else None
    if model is None:
        model = worker.get_model()
    model.load_weights(weights)
    return len(weights)


def state_dict_weights(source: Any) -> WeightList:
    """``[(name, tensor)]`` from an ``nn.Module`` or a ``state_dict`` mapping (tensors detached,
    left on their device: vLLM's loaders copy across device and dtype).

    Raises:
        TypeError: ``source`` is neither.
    """
    return [(name, tensor.detach()) for name, tensor in as_state_dict(source).items()
            if isinstance(tensor, Tensor)]


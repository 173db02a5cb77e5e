"""The bodies of the scale-out actors (:mod:`rlvr.distributed.ray_workers`): a rollout worker
(a local engine over a copy of the policy) and a reward worker (a reward pipeline with its own
verifier processes). They do not import Ray: the driver wraps them with ``ray.remote``, and
tests can run them in-process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.types import RewardResult
from rlvr.rollout.engine import create_engine
from rlvr.rollout.types import RolloutOutput, SamplingParams


class RolloutWorker:
    """Actor body: a local rollout engine over a copy of the policy.

    Run as a Ray actor (``ray.remote(RolloutWorker)``, what :class:`RayRolloutEngine` does);
    also usable in-process (tests).

    Args:
        model_cls: the policy's class (e.g. ``LlamaForCausalLM``), importable in the worker.
        model_config: its transformers config (``model.config``); the model is built as
            ``model_cls(model_config)``, then loaded from ``state_dict``, parameters cast to the
            state dict's dtypes, in eval mode without gradients.
        state_dict: initial weights (Ray resolves an ``ObjectRef`` passed here).
        engine: local engine name (``"torch"`` or ``"hf"``, see :func:`rlvr.rollout.create_engine`).
        pad_token_id: completion padding id (default from the config).
        engine_options: extra keyword options of the engine.
        threads: ``torch.set_num_threads`` in the worker; None leaves Ray's setting
            (``OMP_NUM_THREADS`` = the actor's CPUs).

    Raises:
        UnknownEngineError / UnsupportedModelError: from :func:`create_engine`.
        RuntimeError: the state dict does not fit the model.
    """

    def __init__(self, model_cls: type, model_config: Any, state_dict: Mapping[str, torch.Tensor],
                 engine: str = "torch", pad_token_id: int | None = None,
                 engine_options: Mapping[str, Any] | None = None, threads: int | None = None):
        if threads:
            torch.set_num_threads(int(threads))
        model = model_cls(model_config)
        with torch.no_grad():
            for name, param in model.named_parameters():
                source = state_dict.get(name)
                if source is not None and source.dtype != param.dtype:
                    param.data = param.data.to(source.dtype)
        model.load_state_dict(state_dict)
        self.model = model.eval().requires_grad_(False)
        self.engine = create_engine(engine, self.model, pad_token_id=pad_token_id,
                                    **dict(engine_options or {}))

    def info(self) -> dict[str, Any]:
        """Readiness probe: ``{"pid", "threads", "engine", "pad_token_id"}``."""
        return {"pid": os.getpid(), "threads": torch.get_num_threads(),
                "engine": self.engine.name, "pad_token_id": self.engine.pad_token_id}

    def update_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Load new policy weights (Ray resolves an ``ObjectRef`` passed here).

        Raises:
            RuntimeError: the state dict does not fit the model.
        """
        self.engine.update_weights(state_dict)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> RolloutOutput:
        """``engine.generate(prompts, params)`` (rows and ``prompt_index`` local to ``prompts``).

        Raises:
            ValueError: empty prompts or token ids outside the vocabulary.
        """
        return self.engine.generate(prompts, params)


class RewardWorker:
    """Actor body: a :class:`RewardPipeline` with its own verifier processes.

    Args:
        config: the reward config as a dict (``RewardConfig.model_dump()``); validated again
            in the worker, which imports its ``plugins`` there.

    Raises:
        pydantic.ValidationError: the config is invalid in the worker (e.g. a plugin that is
            not importable there).
    """

    def __init__(self, config: Mapping[str, Any]):
        self.pipeline = RewardPipeline(RewardConfig.model_validate(dict(config)))

    def info(self) -> dict[str, Any]:
        """Readiness probe: ``{"pid", "workers"}`` (verifier processes of the pipeline)."""
        return {"pid": os.getpid(), "workers": self.pipeline.config.workers}

    def score_batch(self, requests: Sequence[ScoreRequest]) -> list[RewardResult]:
        """``RewardPipeline.score_batch(requests)``: results in input order.

        Raises:
            KeyError: a request names an unregistered task type.
        """
        return self.pipeline.score_batch(requests)

    def close(self) -> None:
        """Stop the pipeline's verifier processes."""
        self.pipeline.close()

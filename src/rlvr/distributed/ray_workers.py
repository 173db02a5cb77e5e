"""Rollout and reward workers as Ray actors (R22, issue "scale-out").

The trainer talks to two drop-ins with the same API as the local objects, so
:class:`rlvr.train.grpo.GRPOStep` does not change:

- :class:`RayRolloutEngine` (the rollout-engine protocol of :mod:`rlvr.rollout.engine`): N
  :class:`RolloutWorker` actors, each running a local engine (``torch`` or ``hf``) on its own
  copy of the policy. ``update_weights`` puts the policy's ``state_dict`` into the object store
  once and sends the reference to every worker; ``generate`` splits the prompts into contiguous
  shards, one per worker, runs them in parallel and reassembles one :class:`RolloutOutput` in
  the original prompt order (:func:`merge_outputs`).
- :class:`RayRewardPipeline` (``score_batch`` of :class:`rlvr.rewards.pipeline.RewardPipeline`):
  M :class:`RewardWorker` actors, each with its own ``RewardPipeline`` (and its own verifier
  processes); a batch is split into contiguous chunks, results come back in input order.

Determinism. The ``torch`` engine draws its random numbers from one ``torch.Generator`` per
``generate`` call, seeded with ``SamplingParams.seed``, one uniform per *live row of the
batch* per decode step, over length-sorted buckets: a prompt's samples depend on which other
prompts share the call. Per-prompt seeding would need per-row generators inside the engine's
fused sampler (``rlvr.rollout.sampling``: one ``torch.rand`` per step for the whole batch),
which this module cannot add without changing and slowing the engine. So each shard is
sampled with its own seed, :func:`shard_seed` ``(params.seed, index of its first prompt)``:

- the shard that starts at prompt 0 keeps ``params.seed`` itself, so **one rollout worker is
  bit-identical to the local engine** (same weights, same seed, same prompts), and shard k of a
  sharded call equals ``local_engine.generate(prompts[a:b], replace(params, seed=shard_seed(
  params.seed, a)))`` exactly (tests/distributed);
- a run is reproducible for a fixed worker count;
- with several workers a run equals the single-process run **in distribution only** (every
  completion is still sampled from the same policy with the same settings, but from different
  random numbers), so per-step metrics agree statistically, not exactly.

Greedy decoding (validation) has no randomness: any sharding gives the single-process
completions, up to bf16 rounding differences between batch compositions (none seen on the
tiny model).

Ray's lifetime. :func:`init_ray` starts or connects to Ray and says whether it started it; the
object that started it (in the trainer: the reward pipeline, created first) shuts it down in
its ``close()``. Nothing here is imported unless ``rollout.ray_address`` is set.

Every ``generate`` call here is synchronous like the local engines'. Generating the next
steps' groups while the trainer updates (asynchronous rollouts under a staleness bound) is
:mod:`rlvr.distributed.ray_async` over the same actor body.

This module holds the driver-side drop-ins; the actor bodies are in
:mod:`rlvr.distributed.ray_actors`, Ray's lifetime in :mod:`rlvr.distributed.ray_cluster` and
the sharding of a call in :mod:`rlvr.distributed.sharding`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ray
import torch

from rlvr.distributed.ray_actors import RewardWorker, RolloutWorker
from rlvr.distributed.ray_cluster import (
    DEFAULT_STARTUP_TIMEOUT_S,
    LOCAL,
    init_ray,
    kill_actors,
    local_num_cpus,
    wait_ready,
)
from rlvr.distributed.sharding import merge_outputs, shard_bounds, shard_seed
from rlvr.models.precision import resolve_precision
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.registry import VERIFIERS
from rlvr.rewards.types import RewardResult
from rlvr.rollout.engine import (
    check_prompts,
    default_pad_token_id,
    load_weights_into,
    params_version,
)
from rlvr.rollout.types import RolloutOutput, SamplingParams


class RayRolloutEngine:
    """The rollout-engine protocol over N :class:`RolloutWorker` actors (see the module doc).

    Args:
        model: the driver's policy model (a plain transformers causal LM; for a LoRA policy the
            merged copy). Kept by reference, like the local engines: ``update_weights(None)``
            re-reads it.
        pad_token_id: completion padding id (default from the model config).
        engine: the workers' local engine (``"torch"`` or ``"hf"``).
        workers: number of rollout actors, >= 1.
        engine_options: extra keyword options of the workers' engine.
        threads_per_worker: torch threads in each worker (None: Ray's default).
        num_cpus_per_worker: CPUs each actor asks Ray for (scheduling only).
        startup_timeout_s: how long to wait for the actors to be built.
        own_ray: this engine's :meth:`close` shuts Ray down. When Ray is not initialised at
            construction, a local cluster is started and owned.

    Raises:
        ValueError: ``workers < 1``.
        RuntimeError: the actors did not start in time (not enough free CPUs in the cluster).
        ray.exceptions.RayActorError: an actor failed while being built (its error inside).
    """

    def __init__(self, model, *, pad_token_id: int | None = None, engine: str = "torch",
                 workers: int = 2, engine_options: Mapping[str, Any] | None = None,
                 threads_per_worker: int | None = None, num_cpus_per_worker: float = 1.0,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, own_ray: bool = False):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if not ray.is_initialized():
            own_ray = init_ray(LOCAL, local_num_cpus(workers)) or own_ray
        self.own_ray = own_ray
        self.model = model
        self.pad_token_id = default_pad_token_id(model, pad_token_id)
        self.vocab_size = int(model.config.vocab_size)
        self.engine_name = engine
        self.name = f"ray-{engine}"
        state = ray.put(_state_dict(model))
        actor = ray.remote(RolloutWorker).options(num_cpus=num_cpus_per_worker)
        self._workers = [actor.remote(type(model), model.config, state, engine,
                                      self.pad_token_id, dict(engine_options or {}),
                                      threads_per_worker)
                         for _ in range(workers)]
        self.worker_info = wait_ready([w.info.remote() for w in self._workers], self._workers,
                                      "rollout", startup_timeout_s)
        self._version = params_version(model)

    @classmethod
    def from_run_config(cls, config, model, pad_token_id: int | None = None) -> RayRolloutEngine:
        """The engine a run with ``config.rollout.ray_address`` set uses: ``rollout.engine`` in
        ``rollout.ray_rollout_workers`` actors. Connects to (or starts, for ``"local"``) Ray if
        this process is not connected yet, and then owns it.

        Args:
            config: a :class:`rlvr.train.config.RunConfig`.
            model: the policy model the run samples from.
            pad_token_id: the tokenizer's pad id.
        """
        r = config.rollout
        started = init_ray(r.ray_address,
                           local_num_cpus(r.ray_rollout_workers + r.ray_reward_workers))
        threads = config.threads or None
        if threads is None and r.ray_address == LOCAL:
            threads = max(1, (os.cpu_count() or 1) // r.ray_rollout_workers)
        # Each worker's weight snapshot in the run's precision (resolved on this machine: the
        # workers of a local cluster share its CPU).
        options = {"dtype": resolve_precision(config.model.precision).dtype}
        return cls(model, pad_token_id=pad_token_id, engine=r.engine,
                   workers=r.ray_rollout_workers, engine_options=options,
                   threads_per_worker=threads, own_ray=started)

    @property
    def num_workers(self) -> int:
        """Number of rollout actors."""
        return len(self._workers)

    def update_weights(self, source: Any = None) -> None:
        """Send the policy's weights to every worker (one ``ray.put``, one reference each).

        ``None`` re-reads the driver's model; an ``nn.Module`` other than it, or a
        ``state_dict``, is first loaded into the driver's model (as the local engines do), then
        sent. Re-sending the driver's own model is skipped when its parameters have not changed
        since the last send (tensor version counters). Blocks until every worker has loaded.

        Raises:
            TypeError: ``source`` is not None, a mapping or a module.
            ray.exceptions.RayTaskError: a worker failed to load the weights.
        """
        if source is not None and source is not self.model:
            load_weights_into(self.model, source)
        elif params_version(self.model) == self._version:
            return
        ref = ray.put(_state_dict(self.model))
        ray.get([w.update_weights.remote(ref) for w in self._workers])
        self._version = params_version(self.model)

    def generate(self, prompt_ids: Sequence[Sequence[int]], params: SamplingParams
                 ) -> RolloutOutput:
        """Sample ``params.n`` completions per prompt over the workers.

        The prompts are split into contiguous near-equal shards (:func:`shard_bounds`), shard
        starting at prompt ``a`` sampled with seed :func:`shard_seed` ``(seed, a)`` (``seed`` =
        ``params.resolved_seed()``, drawn here once when ``params.seed`` is None), and the
        shards are merged back in prompt order (:func:`merge_outputs`).

        Raises:
            ValueError: empty prompt list, an empty prompt, or a token id out of the vocabulary
                (checked here, so the message names the global prompt index).
            ray.exceptions.RayTaskError: a worker failed.
        """
        start = time.perf_counter()
        prompts = check_prompts(prompt_ids, self.vocab_size)
        seed = params.resolved_seed()
        bounds = shard_bounds(len(prompts), len(self._workers))
        futures = [worker.generate.remote(prompts[a:b],
                                          dataclasses.replace(params, seed=shard_seed(seed, a)))
                   for worker, (a, b) in zip(self._workers, bounds)]
        outputs = ray.get(futures)
        return merge_outputs(outputs, [a for a, _ in bounds], params.n, self.pad_token_id,
                             wall_seconds=time.perf_counter() - start)

    def close(self) -> None:
        """Kill the actors; shut Ray down if this engine owns it. Idempotent."""
        workers, self._workers = self._workers, []
        kill_actors(workers, self.own_ray)
        self.own_ray = False


class RayRewardPipeline:
    """``RewardPipeline``'s API over M :class:`RewardWorker` actors (see the module doc).

    Scoring a batch splits it into contiguous chunks (:func:`shard_bounds`), one per worker;
    results come back in input order and are identical to the local pipeline's (the pipeline is
    deterministic, R8). ``format_score`` and ``pool`` are served locally.

    Args:
        config: the reward configuration (default ``RewardConfig()``); each actor runs
            ``RewardPipeline(config)`` with ``config.workers`` verifier processes.
        workers: number of reward actors, >= 1.
        num_cpus_per_worker: CPUs each actor asks Ray for (scheduling only).
        startup_timeout_s: how long to wait for the actors to start.
        own_ray: :meth:`close` shuts Ray down. When Ray is not initialised at construction, a
            local cluster is started and owned.

    Raises:
        ValueError: ``workers < 1``.
        RuntimeError: the actors did not start in time.
    """

    def __init__(self, config: RewardConfig | None = None, workers: int = 1, *,
                 num_cpus_per_worker: float = 1.0,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S, own_ray: bool = False):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.config = config or RewardConfig()
        if not ray.is_initialized():
            own_ray = init_ray(LOCAL, local_num_cpus(workers)) or own_ray
        self.own_ray = own_ray
        # Local helper: format_score and a verifier pool to share (no processes until used).
        self._local = RewardPipeline(self.config)
        actor = ray.remote(RewardWorker).options(num_cpus=num_cpus_per_worker)
        dumped = self.config.model_dump(mode="python")
        self._workers = [actor.remote(dumped) for _ in range(workers)]
        self.worker_info = wait_ready([w.info.remote() for w in self._workers], self._workers,
                                      "reward", startup_timeout_s)

    @classmethod
    def from_run_config(cls, config) -> RayRewardPipeline:
        """The reward pipeline of a run with ``config.rollout.ray_address`` set:
        ``rollout.ray_reward_workers`` actors scoring with ``config.reward``. Connects to (or
        starts, for ``"local"``) Ray if this process is not connected yet, and then owns it
        (its :meth:`close`, at the end of the run, shuts Ray down).

        Args:
            config: a :class:`rlvr.train.config.RunConfig`.
        """
        r = config.rollout
        started = init_ray(r.ray_address,
                           local_num_cpus(r.ray_rollout_workers + r.ray_reward_workers))
        return cls(config.reward, r.ray_reward_workers, own_ray=started)

    @property
    def num_workers(self) -> int:
        """Number of reward actors."""
        return len(self._workers)

    @property
    def pool(self):
        """A verifier pool in this process, for pipelines that share one (e.g. the trainer's
        evaluation pipeline); started on first use, stopped by :meth:`close`."""
        return self._local.pool

    def score(self, completion: str, reference: Any, task_type: str = "math") -> RewardResult:
        """Score one completion. See :meth:`score_batch`."""
        return self.score_batch([ScoreRequest(completion, reference, task_type)])[0]

    def score_batch(self, requests: Sequence[ScoreRequest],
                    on_result: Callable[[int], None] | None = None) -> list[RewardResult]:
        """Score every request on the actors; results in input order.

        Args:
            requests: the completions to score.
            on_result: called with the number of results done each time a chunk finishes
                (coarser than the local pipeline's per-result calls).

        Raises:
            KeyError: a request names an unregistered task type (checked here first).
            ray.exceptions.RayTaskError: an actor failed.
        """
        for request in requests:
            VERIFIERS.get(self.config.verifiers.get(request.task_type, request.task_type))
        if not requests:
            return []
        requests = list(requests)
        bounds = shard_bounds(len(requests), len(self._workers))
        futures = [worker.score_batch.remote(requests[a:b])
                   for worker, (a, b) in zip(self._workers, bounds)]
        if on_result is not None:
            pending, done = list(futures), 0
            sizes = {f: b - a for f, (a, b) in zip(futures, bounds)}
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                done += sizes[ready[0]]
                on_result(done)
        return [result for chunk in ray.get(futures) for result in chunk]

    def format_score(self, completion: str, task_type: str) -> float:
        """The format component in [0, 1] (computed locally, as the actors would)."""
        return self._local.format_score(completion, task_type)

    def close(self) -> None:
        """Stop the actors' verifier processes, kill the actors, stop the local pool, and shut
        Ray down if this pipeline owns it. Idempotent."""
        workers, self._workers = self._workers, []
        if workers and ray.is_initialized():
            try:
                ray.get([w.close.remote() for w in workers], timeout=30)
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError):
                pass  # killed below either way
            for worker in workers:
                ray.kill(worker)
        self._local.close()
        if self.own_ray and ray.is_initialized():
            ray.shutdown()
        self.own_ray = False

    def __enter__(self) -> RayRewardPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _state_dict(model) -> dict[str, torch.Tensor]:
    """The model's ``state_dict`` as detached CPU tensors (what ``ray.put`` serialises)."""
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}

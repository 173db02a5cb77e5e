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

Not done here: one-step off-policy overlap (generating step t+1 while step t trains); every
``generate`` call is synchronous like the local engines'.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from typing import Any, Callable, Mapping, Sequence

import ray
import torch

from rlvr.models.precision import resolve_precision
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.registry import get_verifier
from rlvr.rewards.types import RewardResult
from rlvr.rollout.engine import (
    check_prompts,
    create_engine,
    default_pad_token_id,
    load_weights_into,
    params_version,
)
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams

LOCAL = "local"
DEFAULT_STARTUP_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------------------------------
# Ray's lifetime
# ---------------------------------------------------------------------------------------------


def init_ray(address: str = LOCAL, num_cpus: int | None = None) -> bool:
    """Start or connect to Ray unless this process already is connected.

    Args:
        address: ``"local"`` starts a private cluster on this machine
            (``ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)``, with
            Ray's usage-stats reporting off unless ``RAY_USAGE_STATS_ENABLED`` is set);
            anything else is passed to ``ray.init(address=...)`` (``"auto"``,
            ``"ray://host:10001"``, ...).
        num_cpus: logical CPUs of a local cluster (what Ray schedules actors against); ignored
            for an existing cluster.

    Returns:
        True if this call started / connected Ray (the caller should ``ray.shutdown()`` when
        done), False if Ray was already initialised (left to whoever started it).

    Raises:
        ConnectionError / RuntimeError: from ``ray.init`` when the address cannot be reached.
    """
    if ray.is_initialized():
        return False
    if address == LOCAL:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address=LOCAL, num_cpus=num_cpus, include_dashboard=False,
                 logging_level=logging.WARNING)
    else:
        ray.init(address=address, logging_level=logging.WARNING)
    return True


def local_num_cpus(actors: int) -> int:
    """Logical CPUs for a ``"local"`` cluster: this machine's cores, but at least ``actors``
    (each actor asks for one CPU; fewer would leave some unscheduled forever)."""
    return max(os.cpu_count() or 1, actors)


def _wait_ready(futures: list, actors: list, what: str, timeout_s: float) -> list:
    """``ray.get`` the actors' first calls; kill them and raise if they do not start in time."""
    try:
        return ray.get(futures, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        for actor in actors:
            ray.kill(actor)
        raise RuntimeError(
            f"{len(actors)} {what} actors did not start within {timeout_s:.0f} s: the cluster "
            f"probably lacks free CPUs (each asks for its num_cpus; available: "
            f"{ray.available_resources().get('CPU', 0)})") from None


# ---------------------------------------------------------------------------------------------
# Sharding helpers (pure; no Ray)
# ---------------------------------------------------------------------------------------------


def shard_bounds(items: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` ranges splitting ``items`` into at most ``shards`` parts of
    near-equal size (sizes differ by at most one, larger first); empty parts are left out.

    Raises:
        ValueError: ``shards < 1`` or ``items < 0``.
    """
    if shards < 1 or items < 0:
        raise ValueError(f"need shards >= 1 and items >= 0, got {shards}, {items}")
    base, extra = divmod(items, shards)
    bounds, start = [], 0
    for k in range(shards):
        stop = start + base + (1 if k < extra else 0)
        if stop > start:
            bounds.append((start, stop))
        start = stop
    return bounds


def shard_seed(seed: int, first_prompt: int) -> int:
    """Sampling seed of the shard whose first prompt has global index ``first_prompt``.

    ``seed`` itself for the shard starting at prompt 0 (so one shard reproduces the local engine
    exactly), otherwise a 63-bit hash of ``(seed, first_prompt)``: the same for every run,
    machine and Python process (no ``hash()`` randomisation), different for different shards.
    """
    if first_prompt == 0:
        return int(seed)
    digest = hashlib.blake2b(f"{int(seed)}:{int(first_prompt)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def merge_outputs(outputs: Sequence[RolloutOutput], first_prompts: Sequence[int], n: int,
                  pad_token_id: int, wall_seconds: float | None = None) -> RolloutOutput:
    """Concatenate the shards of one ``generate`` call into a single :class:`RolloutOutput`.

    Args:
        outputs: shard outputs in prompt order (shard k covers consecutive prompts starting at
            ``first_prompts[k]``, ``n`` rows per prompt).
        first_prompts: global index of each shard's first prompt.
        n: samples per prompt.
        pad_token_id: written into the columns a shard lacks (its completions were shorter
            than the longest shard's); ``logprobs`` 0 and ``completion_mask`` False there.
        wall_seconds: wall time of the whole fan-out. Timing then is ``prefill_seconds`` = the
            slowest shard's prefill, ``decode_seconds`` = the rest of ``wall_seconds``, so
            ``total_seconds`` is the call's real wall time (shards run in parallel, Ray overhead
            included) and ``tokens_per_second`` the aggregate throughput. None: the slowest
            shard's prefill, decode and log-prob pass.

    Returns:
        The merged output: rows of prompt i are ``i*n .. i*n+n-1``, ``prompt_index`` global,
        width ``max`` over the shards, ``tokens_generated`` summed.

    Raises:
        ValueError: no outputs, mismatched lengths, or a shard whose row count is not a
            multiple of ``n`` / whose rows do not start where the previous shard ended.
    """
    if not outputs or len(outputs) != len(first_prompts):
        raise ValueError(f"need one first-prompt index per output, got {len(outputs)} outputs "
                         f"and {len(first_prompts)} indices")
    expected = first_prompts[0]
    for out, first in zip(outputs, first_prompts):
        if out.num_rows % n or first != expected:
            raise ValueError(f"shard starting at prompt {first} does not continue the previous "
                             f"shard (expected prompt {expected}) or has {out.num_rows} rows, "
                             f"not a multiple of n={n}")
        expected += out.num_rows // n
    width = max(out.completion_ids.shape[1] for out in outputs)

    def widen(t: torch.Tensor, fill) -> torch.Tensor:
        if t.shape[1] == width:
            return t
        pad = t.new_full((t.shape[0], width - t.shape[1]), fill)
        return torch.cat([t, pad], dim=1)

    slowest = max(outputs, key=lambda o: o.timing.total_seconds)
    prefill = max(out.timing.prefill_seconds for out in outputs)
    decode = (max(0.0, wall_seconds - prefill) if wall_seconds is not None
              else slowest.timing.decode_seconds)
    timing = RolloutTiming(prefill_seconds=prefill, decode_seconds=decode,
                           tokens_generated=sum(o.timing.tokens_generated for o in outputs),
                           logprob_seconds=0.0 if wall_seconds is not None
                           else slowest.timing.logprob_seconds)
    return RolloutOutput(
        completion_ids=torch.cat([widen(o.completion_ids, pad_token_id) for o in outputs]),
        completion_mask=torch.cat([widen(o.completion_mask, False) for o in outputs]),
        logprobs=torch.cat([widen(o.logprobs, 0.0) for o in outputs]),
        prompt_index=torch.cat([o.prompt_index + first
                                for o, first in zip(outputs, first_prompts)]),
        finish_reason=[reason for o in outputs for reason in o.finish_reason],
        lengths=torch.cat([o.lengths for o in outputs]),
        timing=timing,
        pad_token_id=pad_token_id,
    )


# ---------------------------------------------------------------------------------------------
# Actors
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Driver side
# ---------------------------------------------------------------------------------------------


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
        self.worker_info = _wait_ready([w.info.remote() for w in self._workers], self._workers,
                                       "rollout", startup_timeout_s)
        self._version = params_version(model)

    @classmethod
    def from_run_config(cls, config, model, pad_token_id: int | None = None) -> "RayRolloutEngine":
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
        if ray.is_initialized():
            for worker in workers:
                ray.kill(worker)
            if self.own_ray:
                ray.shutdown()
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
        self.worker_info = _wait_ready([w.info.remote() for w in self._workers], self._workers,
                                       "reward", startup_timeout_s)

    @classmethod
    def from_run_config(cls, config) -> "RayRewardPipeline":
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
            get_verifier(self.config.verifiers.get(request.task_type, request.task_type))
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

    def __enter__(self) -> "RayRewardPipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _state_dict(model) -> dict[str, torch.Tensor]:
    """The model's ``state_dict`` as detached CPU tensors (what ``ray.put`` serialises)."""
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}

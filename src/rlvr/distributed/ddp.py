"""Data-parallel GRPO policy update through Hugging Face accelerate.

W processes ("ranks") each hold a replica of the policy and a contiguous shard of the step's
trainable rows (:func:`shard_rows`). Each rank runs the micro-batch loop of
:meth:`rlvr.train.grpo.GRPOStep.update`, :func:`rlvr.update.policy_update`, over its own rows
with :class:`AcceleratorBackend`; DDP *averages* the gradients over the ranks in the backward
of the last micro-batch (the others run under ``accelerator.no_sync``), so every rank then
takes the same optimizer step and the replicas stay identical.

Exactness. Each micro-batch loss is scaled by the loss aggregation's registered weight
(:func:`rlvr.algo.loss_agg.micro_batch_weight` with the world size) so that the averaged
gradient equals the gradient of the configured loss aggregation over the *whole* step's
rows, i.e. 2 processes with half the rows each give the update 1 process gives with all of
them (up to fp32 rounding; ``tests/distributed/test_ddp.py``). This needs the step's global
row and token counts, which :func:`global_counts` all-reduces.

Launching. Each process builds an ``accelerate.Accelerator`` from its environment:

- GPUs: ``accelerate launch --config_file configs/accelerate/fsdp_gpu.yaml script.py`` (or
  ``deepspeed_zero2_gpu.yaml``, or a multi-GPU DDP config), ``Accelerator()``;
- CPUs: ``torchrun --nproc_per_node 2 script.py``, or ``accelerate launch --config_file
  configs/accelerate/ddp_cpu.yaml script.py`` with MPI (on CPUs accelerate starts several
  processes only through ``mpirun``), ``Accelerator(cpu=True)``: with ``WORLD_SIZE > 1`` in
  the environment it initialises the gloo process group (or reuses one already initialised)
  and ``prepare`` wraps the model in DDP;
- ``torch.multiprocessing.spawn`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR`` and ``MASTER_PORT`` set in each child, then ``Accelerator(cpu=True)``: what
  ``tests/distributed/test_ddp.py`` does.

Example (each rank)::

    accelerator = Accelerator(cpu=True)
    update = DataParallelUpdate(accelerator, policy, optimizer, config)
    rows = shard_rows(n_rows, accelerator.process_index, accelerator.num_processes)
    metrics = update(seqs.rows(rows), advantages[rows], old_log_probs[rows])
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import torch
from torch import Tensor

from rlvr.algo.loss_agg import BatchCounts
from rlvr.models.forward import SequenceBatch
from rlvr.update import policy_update


def shard_rows(n_rows: int, rank: int, world_size: int) -> slice:
    """The contiguous block of rows that ``rank`` trains on.

    Rows ``[0, n_rows)`` are split into ``world_size`` consecutive blocks whose sizes differ by
    at most one, the first ``n_rows % world_size`` ranks taking one extra row (the split of
    ``torch.tensor_split``). Deterministic: it depends on its arguments only, so every rank
    computes the same partition without communicating. Contiguity keeps a group's completions
    together (useful for the shared-prefix forward) when ``n_rows / world_size`` is a multiple
    of the group size. A rank may get an empty slice when ``n_rows < world_size``;
    :func:`ddp_update` handles that.

    Args:
        n_rows: number of rows of the step (>= 0).
        rank: this process's index, ``0 <= rank < world_size``.
        world_size: number of data-parallel processes (>= 1).

    Returns:
        ``slice(start, stop)`` with ``stop - start`` equal to ``n_rows // world_size`` or one
        more; the slices of ranks ``0 .. world_size - 1`` tile ``[0, n_rows)`` in order.

    Raises:
        ValueError: if ``n_rows < 0``, ``world_size < 1`` or ``rank`` is out of range.
    """
    if n_rows < 0 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need n_rows >= 0, world_size >= 1 and 0 <= rank < world_size, got "
                         f"n_rows={n_rows}, rank={rank}, world_size={world_size}")
    base, extra = divmod(n_rows, world_size)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def global_counts(local_rows: int, local_tokens: int, *,
                  device: torch.device | str = "cpu") -> tuple[int, int]:
    """The step's trainable rows and completion tokens summed over all processes.

    A collective: when ``torch.distributed`` is initialised every rank must call it (with its
    own counts, 0 for an empty shard) the same number of times. Otherwise returns its
    arguments unchanged.

    Args:
        local_rows: this rank's trainable rows (sequences).
        local_tokens: this rank's trained completion tokens (``loss_mask.sum()``).
        device: where the int64 count tensor lives for the all-reduce: ``"cpu"`` for gloo, the
            rank's CUDA device for NCCL (pass ``accelerator.device``).

    Returns:
        ``(global_rows, global_tokens)``.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return int(local_rows), int(local_tokens)
    counts = torch.tensor([int(local_rows), int(local_tokens)], dtype=torch.int64,
                          device=device)
    torch.distributed.all_reduce(counts, op=torch.distributed.ReduceOp.SUM)
    return int(counts[0]), int(counts[1])


@contextmanager
def _deepspeed_boundary(accelerator, last: bool):
    """Under DeepSpeed, ``accelerator.backward`` runs ``engine.step()`` (clip, optimizer step,
    zero grad) whenever accelerate's gradient state says "sync"; ``no_sync`` does not change
    that for ZeRO >= 2. Mark only the last micro-batch as the accumulation boundary. (Uses
    accelerate's ``GradientState._set_sync_gradients``, what ``Accelerator.accumulate`` does.)"""
    # optional dependency: accelerate (extra `train`)
    from accelerate.utils import DistributedType

    if accelerator.distributed_type != DistributedType.DEEPSPEED:
        yield
        return
    accelerator.gradient_state._set_sync_gradients(last)
    try:
        yield
    finally:
        accelerator.gradient_state._set_sync_gradients(True)


class _SharedPrefixForward:
    """Calls the DDP/FSDP-wrapped policy (its forward arms the gradient all-reduce) but exposes
    the unwrapped model's ``get_base_model`` so that
    :func:`rlvr.models.forward.cache_argument` inspects the transformers ``forward`` signature
    rather than the wrapper's ``(*inputs, **kwargs)``."""

    def __init__(self, wrapped, unwrapped):
        self.wrapped, self.unwrapped = wrapped, unwrapped

    def __call__(self, *args, **kwargs):
        return self.wrapped(*args, **kwargs)

    def get_base_model(self):
        inner = self.unwrapped
        return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


class AcceleratorBackend:
    """The data-parallel :class:`~rlvr.update.backend.UpdateBackend` of
    :func:`rlvr.update.policy_update`, through accelerate (DDP, FSDP, DeepSpeed).

    All but the last micro-batch of a rank run under ``accelerator.no_sync(model)`` (and,
    under DeepSpeed, off the accumulation boundary), so gradients are all-reduced once per
    step; the step's counts come from an all-reduce (:func:`global_counts`); the loss
    weights are scaled by ``world_size`` because DDP averages the ranks' gradients.

    Args:
        accelerator: the ``accelerate.Accelerator`` that prepared ``model``.
        model: the policy after ``accelerator.prepare`` (or the plain model in one process).
    """

    collective = True

    def __init__(self, accelerator, model) -> None:
        self.accelerator, self.wrapped = accelerator, model
        self.world_size = accelerator.num_processes
        unwrapped = accelerator.unwrap_model(model)
        self.model = model if unwrapped is model else _SharedPrefixForward(model, unwrapped)

    def global_counts(self, rows: int, tokens: int) -> tuple[int, int]:
        return global_counts(rows, tokens, device=self.accelerator.device)

    @contextmanager
    def micro_batch(self, last: bool):
        with ExitStack() as stack:
            if not last:
                stack.enter_context(self.accelerator.no_sync(self.wrapped))
            stack.enter_context(_deepspeed_boundary(self.accelerator, last))
            yield

    def backward(self, loss: Tensor) -> None:
        self.accelerator.backward(loss)

    def without_rows(self) -> None:
        # an empty shard still takes part in the gradient all-reduce: a zero loss through
        # the wrapped model arms it
        dummy = torch.zeros((1, 1), dtype=torch.long, device=self.accelerator.device)
        self.accelerator.backward(self.wrapped(input_ids=dummy, use_cache=False).logits.sum()
                                  * 0.0)

    def clip_grad_norm(self, max_norm: float) -> Tensor | None:
        return self.accelerator.clip_grad_norm_(self.wrapped.parameters(), max_norm)


def ddp_update(model, optimizer, seqs: SequenceBatch | None, advantages: Tensor,
               old_log_probs: Tensor | None, config, accelerator, *,
               ref_log_probs: Tensor | None = None, kl_coef: float = 0.0,
               sampler_log_probs: Tensor | None = None) -> dict[str, float]:
    """One data-parallel optimizer step on this rank's rows (one epoch of ``GRPOStep.update``).

    Every rank must call it once per step (a collective: it all-reduces counts and
    gradients), also with an empty shard (``seqs=None`` or 0 rows: the rank then backpropagates
    a zero loss so that DDP's all-reduce still completes). The micro-batch loop is
    ``GRPOStep.update``'s, :func:`rlvr.update.policy_update` (the objective
    :func:`~rlvr.algo.objective.policy_objective` on
    :func:`~rlvr.models.forward.completion_log_probs`, gradient clipping, the optimizer step),
    with :class:`AcceleratorBackend`: micro-batch losses are weighted by
    :func:`~rlvr.algo.loss_agg.micro_batch_weight` times the world size, and all but the last
    local micro-batch run under ``accelerator.no_sync(model)``, so gradients are all-reduced
    once per step.

    For ``grpo.mu > 1`` call it ``mu`` times with the same ``old_log_probs`` (computed before
    the first call). The LR scheduler is not stepped here.

    Non-finite values: a non-finite loss or gradient on any rank makes the averaged gradient
    non-finite on every rank, so all ranks see the same non-finite gradient norm and all skip
    the optimizer step together (no rank-dependent control flow, hence no deadlock).

    Backends: DDP (CPU gloo, GPU NCCL) is tested exact against the single-process update.
    FSDP averages gradients like DDP and accelerate makes ``no_sync`` / ``clip_grad_norm_``
    FSDP-aware, so the same weights apply (not tested here: no GPU). DeepSpeed (not tested
    here): the engine steps inside the last micro-batch's ``accelerator.backward`` and clips
    with its own ``gradient_clipping`` (set it to ``grpo.max_grad_norm``); its
    ``gradient_accumulation_steps`` must be 1 (this loop accumulates, and the engine would
    otherwise divide the loss again); ZeRO-2 may reduce gradients in every micro-batch's
    backward, so give every rank the same number of micro-batches; non-finite steps are not
    skipped here (only DeepSpeed's fp16 loss scaler skips them), and ``grad_norm`` is
    DeepSpeed's.

    Args:
        model: the policy after ``accelerator.prepare`` (DDP / FSDP / DeepSpeed wrapped; or
            the plain model in a single process).
        optimizer: its optimizer after ``accelerator.prepare``.
        seqs: this rank's n rows (``None`` or 0 rows for an empty shard); this and the
            tensors below on ``accelerator.device``.
        advantages: FloatTensor[n] (fp32), this rank's advantages.
        old_log_probs: FloatTensor[n, >= T] log pi_old of this rank's rows, or ``None`` for
            on-policy (``mu == 1``: ratio 1, as ``GRPOStep.update``).
        config: a :class:`~rlvr.train.config.RunConfig` (or any object with the same
            attributes): ``grpo.micro_batch_size``, ``temperature``, ``shared_prefix``,
            ``max_grad_norm``; ``model.precision``; ``algo.loss_agg``, ``policy_loss``,
            ``kl_estimator``, ``entropy_coef`` and what their registry entries' options read
            (``clip_eps``, ``clip_eps_high``, ``grpo.max_new_tokens``, ...).
        accelerator: the ``accelerate.Accelerator`` that prepared ``model``.
        ref_log_probs: FloatTensor[n, >= T] log pi_ref of this rank's rows, needed when
            ``kl_coef > 0``.
        kl_coef: beta of the per-token KL term in the loss.
        sampler_log_probs: FloatTensor[n, >= T], the rollout engine's log-probs of this
            rank's rows (``rollout_logprob_gap``; needed with ``algo.tis_cap``).

    Returns:
        Metrics: this rank's micro-batch means of the objective's metrics (``pg_loss`` of a
        micro-batch is its local aggregate), plus ``grad_norm`` (of the averaged, i.e. global,
        gradient, before clipping), ``global_rows``, ``global_tokens``,
        ``nonfinite_log_probs`` (local rows), ``nonfinite_loss`` (local micro-batches),
        ``nonfinite_grad_norm`` and ``update_skipped_nonfinite`` (equal on all ranks);
        ``{"skipped_update": 1.0, ...}`` when no rank has rows.

    Raises:
        ValueError: from :func:`~rlvr.algo.loss_agg.micro_batch_weight` (an aggregation
            that is not registered) or ``policy_objective`` (e.g.
            ``kl_coef > 0`` without ``ref_log_probs``).
    """
    n = 0 if seqs is None else int(seqs.input_ids.shape[0])
    tokens = 0 if n == 0 else int(seqs.loss_mask.sum())
    backend = AcceleratorBackend(accelerator, model)
    counts = BatchCounts(*backend.global_counts(n, tokens))
    totals = {"global_rows": float(counts.rows), "global_tokens": float(counts.tokens)}
    if counts.rows == 0:
        return {"skipped_update": 1.0, **totals}
    result = policy_update(backend, optimizer, seqs, advantages, old_log_probs, config, counts,
                           ref_log_probs=ref_log_probs, kl_coef=kl_coef,
                           sampler_log_probs=sampler_log_probs)
    result.update(totals)
    return result


class DataParallelUpdate:
    """A policy and optimizer prepared once by ``accelerator``, updated by :func:`ddp_update`.

    ``accelerator.prepare(model, optimizer)`` wraps the model for the launcher's distributed
    type (DDP on CPU/gloo or GPUs, FSDP, DeepSpeed) and broadcasts rank 0's weights, so the
    replicas start equal.

    Args:
        accelerator: an ``accelerate.Accelerator`` (``Accelerator(cpu=True)`` on CPU).
        model: the policy (fp32 master weights).
        optimizer: an optimizer over ``model``'s parameters.
        config: the run config (see :func:`ddp_update`).

    Attributes:
        model, optimizer: the prepared (wrapped) objects.
        rank, world_size: ``accelerator.process_index``, ``accelerator.num_processes``.
    """

    def __init__(self, accelerator, model, optimizer, config):
        self.accelerator, self.config = accelerator, config
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.rank, self.world_size = accelerator.process_index, accelerator.num_processes

    @property
    def policy(self):
        """The unwrapped policy (for checkpoints and syncing the rollout engine)."""
        return self.accelerator.unwrap_model(self.model)

    def shard(self, n_rows: int) -> slice:
        """This rank's rows of a step with ``n_rows`` rows (:func:`shard_rows`)."""
        return shard_rows(n_rows, self.rank, self.world_size)

    def __call__(self, seqs: SequenceBatch | None, advantages: Tensor,
                 old_log_probs: Tensor | None = None, **kwargs) -> dict[str, float]:
        """:func:`ddp_update` on this rank's rows; ``kwargs``: ``ref_log_probs``,
        ``kl_coef``, ``sampler_log_probs``."""
        return ddp_update(self.model, self.optimizer, seqs, advantages, old_log_probs,
                          self.config, self.accelerator, **kwargs)

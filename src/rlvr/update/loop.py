"""The policy update's micro-batch loop, written once for one process and for data-parallel
ranks (the difference is the :class:`~rlvr.update.backend.UpdateBackend` passed in).

Per epoch: zero the gradients; for each micro-batch of the rows, the policy's per-token
log-probs (:func:`~rlvr.models.forward.completion_log_probs`, or with ``grpo.shared_prefix:
step`` and several micro-batches in one process the rows sorted by completion length and
:class:`~rlvr.models.step_prefix.StepPrefix`, whose prompt gradient is pushed through once
after the last micro-batch), the objective
(:func:`~rlvr.algo.objective.policy_objective` with the configured policy loss, KL estimator
and loss aggregation, each with the options its registry entry takes from the config), the
loss scaled by the aggregation's micro-batch weight (:func:`~rlvr.algo.loss_agg.
micro_batch_weight`: the accumulated, rank-averaged gradient is the aggregation's over the
whole step), backward; then clip the gradient norm and take the optimizer step.

Non-finite values (R38) never reach the weights: a non-finite gradient norm skips the step.
In one process a non-finite log-prob or loss stops the epoch before its backward (one bad row
would poison every gradient); a collective backend runs every backward instead (the other
ranks wait in the all-reduce), and the non-finite gradient then shows in the global norm on
every rank, so all skip together.

Memory: the update runs inside :func:`~rlvr.models.allocator.mapped_large_blocks` (each
tensor of 2 MiB or more its own mapping, a freed one kept for the next tensor of its size only
while everything mapped stays within the largest live total), so its peak resident memory
stays near its live memory, which :mod:`rlvr.models.memory_model` predicts, not a glibc heap
grown past it (measured at 135M: 4.2 GiB instead of 3.0), and its micro-batches reuse warm
pages instead of zero-filling fresh ones; the rollout engine's allocator setting is put back
afterwards.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algo.loss_agg import BatchCounts, micro_batch_weight
from rlvr.algo.objective import policy_objective
from rlvr.algo.registry import LOSS_AGGREGATIONS, POLICY_LOSSES
from rlvr.models.activation_memory import checkpoint_layers
from rlvr.models.allocator import mapped_large_blocks
from rlvr.models.forward import SequenceBatch, completion_log_probs
from rlvr.models.step_prefix import StepPrefix
from rlvr.update.backend import UpdateBackend
from rlvr.update.corrections import correction_settings
from rlvr.update.fused_layers import fused_layer_ops
from rlvr.update.micro_batches import micro_batch_slices

#: metrics reduced over micro-batches (and epochs) by their maximum, not their mean
PEAK_METRICS = frozenset({"is_ratio_max", "is_weight_max", "rollout_logprob_gap_max"})


@mapped_large_blocks()  # module doc: the update's large blocks mapped on their own
def policy_update(backend: UpdateBackend, optimizer, seqs: SequenceBatch | None,
                  advantages: Tensor, old_log_probs: Tensor | None, config,
                  counts: BatchCounts, *, ref_log_probs: Tensor | None = None,
                  kl_coef: float = 0.0, epochs: int = 1, sampler_log_probs: Tensor | None = None,
                  bf16: bool | None = None) -> dict[str, float]:
    """``epochs`` optimizer steps on ``seqs`` (this process's or rank's rows).

    Args:
        backend: how gradients move (:class:`~rlvr.update.backend.LocalBackend`, or the
            data-parallel :class:`rlvr.distributed.ddp.AcceleratorBackend`); its ``model`` is
            what the forward calls.
        optimizer: the policy's optimizer (stepped here; the LR scheduler is not).
        seqs: the n rows (``None`` or 0 rows: an empty data-parallel shard).
        advantages: FloatTensor[n] (fp32).
        old_log_probs: FloatTensor[n, >= T], log pi_old of the rows, or ``None`` for
            on-policy (ratio 1: ``log_probs.detach()``).
        config: the run config (:class:`rlvr.train.config.RunConfig` or any object with the
            same attributes): ``grpo.micro_batch_size``, ``micro_batch_tokens`` (optional),
            ``temperature``, ``shared_prefix``,
            ``max_grad_norm``, ``activation_checkpointing`` and ``logprob_chunk_tokens``
            (optional; the latter ignored by a collective backend); ``algo.policy_loss``,
            ``loss_agg``, ``kl_estimator``, ``entropy_coef``, ``off_policy_correction``
            (:mod:`rlvr.update.corrections`), ``tis_cap`` and whatever their registry entries'
            options read; ``model.bf16`` unless ``bf16`` is given.
        counts: the step's rows and completion tokens over all ranks and micro-batches
            (``backend.global_counts``).
        ref_log_probs: FloatTensor[n, >= T], log pi_ref, needed when ``kl_coef > 0``.
        kl_coef: beta of the per-token KL term in the loss.
        epochs: optimizer steps on the same rows (``grpo.mu``); stops after a skipped one.
        sampler_log_probs: FloatTensor[n, >= T], the rollout engine's log-probs of the
            rows (pi_behav): logs ``rollout_logprob_gap`` (mean |train - sampler| log-prob
            over the first epoch's tokens: same weights, two code paths, an int8 sampler, or
            an older weight version) and ``rollout_logprob_gap_max``, and ``is_ratio_mean`` /
            ``is_ratio_max`` of ``pi_old / pi_behav``; the configured off-policy correction
            (:mod:`rlvr.algo.corrections`) weights the policy term with it, ``old_log_probs``
            (or, with one epoch, the update's own detached forward) being the proximal
            policy.
        bf16: compute in bf16 autocast; default ``config.model.bf16``.

    Returns:
        Means over the micro-batches (of all epochs) of the objective's metrics (``kl`` only
        with a reference; the maxima in :data:`PEAK_METRICS` are maxima), ``grad_norm``
        (mean over epochs, before clipping),
        ``nonfinite_log_probs`` (rows), ``nonfinite_loss`` (micro-batches),
        ``nonfinite_grad_norm`` (epochs), ``update_skipped_nonfinite`` (1.0 when an epoch
        was skipped for a non-finite value) and ``micro_batches`` (this process's micro-batches
        per epoch: more than rows / ``micro_batch_size`` when ``micro_batch_tokens`` cut).

    Raises:
        ValueError: a correction (``algo.off_policy_correction``, or ``algo.tis_cap``) is on
            but ``sampler_log_probs`` is None.
        ValueError / KeyError: from ``policy_objective`` (e.g. ``kl_coef > 0`` without
            ``ref_log_probs``) or the registries.
    """
    g, a = config.grpo, config.algo
    correction, correction_options = correction_settings(config)
    if correction != "none" and sampler_log_probs is None and seqs is not None:
        named = getattr(a, "off_policy_correction", "auto")
        field = (f"algo.off_policy_correction: {named}" if named != "auto"
                 else "algo.tis_cap" if correction == "tis"
                 else "algo.off_policy_correction: auto (with grpo.max_staleness > 0)")
        raise ValueError(f"{field} is set but the rollout has no sampler log-probs "
                         f"(sampler_log_probs=None): the {correction} correction weights the "
                         f"loss with them; set algo.off_policy_correction: none or pass them")
    bf16 = config.model.bf16 if bf16 is None else bf16
    n = 0 if seqs is None else int(seqs.input_ids.shape[0])
    entropy_mode = "grad" if a.entropy_coef > 0 else "detached"
    loss_options = POLICY_LOSSES.options(a.policy_loss, config)
    agg_options = LOSS_AGGREGATIONS.options(a.loss_agg, config, counts)
    metrics: dict[str, list[float]] = {}
    bad = {"nonfinite_log_probs": 0.0, "nonfinite_loss": 0.0, "nonfinite_grad_norm": 0.0}
    skipped = False
    slices, order = _micro_batches(seqs, n, g, backend)
    step_prefix = order is not None
    if step_prefix:
        seqs, advantages = seqs.rows(order), advantages[order]
        old_log_probs, ref_log_probs, sampler_log_probs = (
            None if t is None else t[order]
            for t in (old_log_probs, ref_log_probs, sampler_log_probs))
    # the memory savers (rlvr.models.activation_memory); the chunked head calls the model's
    # body and head directly, past a data-parallel wrapper's forward: one process only
    chunk_tokens = None if backend.collective else getattr(g, "logprob_chunk_tokens", None)
    restore_layers = (checkpoint_layers(backend.model)
                      if getattr(g, "activation_checkpointing", False) else None)
    with fused_layer_ops(backend.model):  # rlvr.update.fused_layers
        for epoch in range(epochs):
            optimizer.zero_grad(set_to_none=True)
            if n == 0:
                backend.without_rows()
            prefix = (StepPrefix(backend.model, seqs.prompts, bf16=bf16, chunk=g.micro_batch_size)
                      if step_prefix else None)
            for i, rows in enumerate(slices):
                with backend.micro_batch(last=i == len(slices) - 1):
                    micro = seqs.rows(rows).trimmed()
                    # the assistant's tokens (multi-turn: observation tokens are not trained)
                    mask, w = micro.loss_mask, micro.completion_mask.shape[1]
                    if prefix is not None:
                        logp, entropy = prefix.log_probs(backend.model, micro,
                                                         temperature=g.temperature,
                                                         entropy=entropy_mode,
                                                         chunk_tokens=chunk_tokens)
                    else:
                        logp, entropy = completion_log_probs(
                            backend.model, micro, temperature=g.temperature, bf16=bf16,
                            shared_prefix=g.shared_prefix != "off", entropy=entropy_mode,
                            chunk_tokens=chunk_tokens)
                    out = policy_objective(
                        logp, logp.detach() if old_log_probs is None else old_log_probs[rows, :w],
                        advantages[rows], mask,
                        ref_log_probs=None if ref_log_probs is None else ref_log_probs[rows, :w],
                        kl_coef=kl_coef, kl_estimator=a.kl_estimator, policy_loss=a.policy_loss,
                        policy_loss_options=loss_options, loss_agg=a.loss_agg,
                        loss_agg_options=agg_options, entropy=entropy, entropy_coef=a.entropy_coef,
                        rollout_log_probs=(None if sampler_log_probs is None
                                           else sampler_log_probs[rows, :w]),
                        off_policy_correction=correction, correction_options=correction_options)
                    nonfinite_rows = int((~torch.isfinite(logp.detach()) & mask).any(dim=1).sum())
                    finite_loss = bool(torch.isfinite(out.loss))
                    bad["nonfinite_log_probs"] += nonfinite_rows
                    bad["nonfinite_loss"] += float(not finite_loss)
                    if (nonfinite_rows or not finite_loss) and not backend.collective:
                        skipped = True  # no backward: one bad row would poison every gradient
                        break
                    if sampler_log_probs is not None and epoch == 0:
                        gap = (logp.detach() - sampler_log_probs[rows, :w]).abs()[mask]
                        metrics.setdefault("rollout_logprob_gap", []).append(float(gap.mean()))
                        if gap.numel():
                            metrics.setdefault("rollout_logprob_gap_max", []).append(
                                float(gap.max()))
                    weight = micro_batch_weight(a.loss_agg, mask, counts.rows, counts.tokens,
                                                backend.world_size)
                    backend.backward(out.loss * weight)
                for k, v in out.metrics.items():
                    metrics.setdefault(k, []).append(float(v))
            if prefix is not None and skipped:
                prefix.release()
            elif prefix is not None:  # the prompts' part of the gradient, once for the step
                prefix.backward()
            if skipped:
                break
            grad_norm = backend.clip_grad_norm(g.max_grad_norm)
            if grad_norm is not None:
                metrics.setdefault("grad_norm", []).append(float(grad_norm))
            finite = grad_norm is None or bool(torch.isfinite(torch.as_tensor(grad_norm)))
            bad["nonfinite_grad_norm"] += float(not finite)
            if not finite:
                skipped = True
                break
            optimizer.step()
    if restore_layers is not None:
        restore_layers()
    optimizer.zero_grad(set_to_none=True)
    result = {k: max(v) if k in PEAK_METRICS else sum(v) / len(v) for k, v in metrics.items()}
    if ref_log_probs is None:
        result.pop("kl", None)  # no KL term in the loss: nothing measured here
    result.update(bad, update_skipped_nonfinite=float(skipped), micro_batches=float(len(slices)))
    return result


def _micro_batches(seqs: SequenceBatch | None, n: int, g, backend: UpdateBackend
                   ) -> tuple[list[slice], Tensor | None]:
    """The micro-batches' row slices, and the row order (by completion length) when the
    step-level prefix runs them, else None (rows stay in group order).

    One micro-batch already runs each prompt once (and a step that fits one keeps the
    per-micro-batch path's numbers bit for bit); with several, the step-level prefix lets the
    rows be sorted by length so each micro-batch pads to its own rows' longest, and a token
    budget (``grpo.micro_batch_tokens``) cuts that sorted order where a few long rows would
    pad the rest."""
    if n == 0:
        return [], None
    lengths = seqs.completion_mask.sum(1)
    max_tokens = getattr(g, "micro_batch_tokens", None)
    can_sort = (g.shared_prefix == "step" and not backend.collective
                and seqs.prompts is not None)
    if not can_sort:
        return micro_batch_slices(lengths.tolist(), g.micro_batch_size, max_tokens), None
    order = torch.argsort(lengths, stable=True)
    slices = micro_batch_slices(lengths[order].tolist(), g.micro_batch_size, max_tokens)
    # one slice holds every row whatever their order: keep group order (the plain path)
    return slices, (order if len(slices) > 1 else None)

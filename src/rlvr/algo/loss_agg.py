"""Loss aggregation: how per-token losses ``FloatTensor[N, T]`` become one scalar.

The choice decides how much each token weighs in the gradient:

- ``grpo`` (DeepSeekMath, arXiv:2402.03300, eq. 3): mean over each completion's tokens, then
  mean over completions ("seq-mean-token-mean"). A token of a long completion weighs less
  (the length bias pointed out by Liu et al. 2025).
- ``bnpo``: token mean over the local batch, ``sum / number of tokens``.
- ``dapo`` (Yu et al. 2025, arXiv:2503.14476, Sec. 3.3, token-level policy gradient loss):
  sum over all tokens of the *global* batch divided by the global token count.
- ``dr_grpo`` (Liu et al. 2025, arXiv:2503.20783, Dr. GRPO): sum over tokens divided by a
  constant, ``N * max_completion_length``: every token weighs the same whatever its
  completion's length, and the weight does not change from batch to batch.

All take ``token_loss: FloatTensor[N, T]`` and ``mask: BoolTensor[N, T]`` and the same keyword
options (each uses what it needs, so a trainer can pass one set to whichever is configured):
``global_token_count`` and ``world_size`` (``dapo``), ``max_completion_length`` (``dr_grpo``).
Return a 0-dim fp32 tensor. Masked positions never contribute, even if they hold NaN.

Registry: :data:`rlvr.algo.registry.LOSS_AGGREGATIONS`, keys ``grpo``, ``bnpo``, ``dapo``,
``dr_grpo``. Each entry also declares its options from the run config and the step
(:class:`BatchCounts`) and its micro-batch ``weight`` (:func:`micro_batch_weight`): a trainer
accumulates gradients over micro-batches (and data-parallel ranks), so each micro-batch's
local aggregate must be scaled to make the step's gradient that of the aggregation over the
whole step (verl's ``agg_loss`` with global token / sequence counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rlvr.algo.registry import LOSS_AGGREGATIONS
from rlvr.algo.utils import as_bool_mask, check_ndim, check_same_shape, masked_mean, masked_sum


@dataclass(frozen=True)
class BatchCounts:
    """Sizes of one optimizer step's batch, over all data-parallel ranks and micro-batches.

    Attributes:
        rows: N, the step's trainable rows (completions).
        tokens: K, their trained completion tokens (``loss_mask.sum()``: a multi-turn
            episode's sampled tokens; every completion token of a single-turn completion).
    """

    rows: int
    tokens: int


# Micro-batch weights (see LOSS_AGGREGATIONS). Let a micro-batch of one rank have n rows and
# k tokens, the step N rows and K tokens over W ranks. Each rank backpropagates
# sum_micro weight * AGG(micro) and DDP *averages* the ranks' gradients (divides their sum by
# W), so each weight is the single-process accumulation weight times W. W is multiplied first:
# with W = 1 the value is bit for bit the single-process one.


def row_share(mask: Tensor, counts: BatchCounts, world_size: int) -> float:
    """``W * n / N``: for an aggregation that averages over rows (``grpo``; ``dr_grpo``,
    whose constant is per row), so the step's loss is the mean over all N rows. (A fully
    masked row would be dropped from its micro-batch's mean but still counted in N; trainable
    rows hold >= 1 completion token.)"""
    return world_size * mask.shape[0] / max(counts.rows, 1)


def token_share(mask: Tensor, counts: BatchCounts, world_size: int) -> float:
    """``W * k / K``: for a token mean over the micro-batch (``bnpo``), so the step's loss is
    ``sum_{i,t} loss_{i,t} / K``."""
    return world_size * float(mask.sum()) / max(counts.tokens, 1)


def whole_step(mask: Tensor, counts: BatchCounts, world_size: int) -> float:
    """``W``: for an aggregation that already divides by a count of the whole step (``dapo``
    with ``global_token_count = K`` and its ``world_size`` option left at 1)."""
    return float(world_size)


def _global_token_count(config, counts: BatchCounts) -> dict:
    return {"global_token_count": max(counts.tokens, 1)}


def _max_completion_length(config, counts: BatchCounts) -> dict:
    # the generation cap, a constant of the run (never the batch's tensor width)
    return {"max_completion_length": config.grpo.max_new_tokens}


def _check(token_loss: Tensor, mask: Tensor) -> Tensor:
    check_ndim("token_loss", token_loss, 2)
    check_same_shape(token_loss=token_loss, mask=mask)
    return as_bool_mask(mask)


@LOSS_AGGREGATIONS.register("grpo", weight=row_share)
def seq_mean_token_mean(
    token_loss: Tensor,
    mask: Tensor,
    *,
    global_token_count: float | None = None,
    world_size: int = 1,
    max_completion_length: int | None = None,
) -> Tensor:
    """``1/N' * sum_i 1/|o_i| * sum_t loss_{i,t}`` (DeepSeekMath eq. 3).

    N' counts only completions with at least one unmasked token, so a completion masked out
    entirely (e.g. truncated, see :func:`rlvr.algo.length.mask_truncated`) is dropped rather
    than averaged in as a zero. The other keyword options are ignored.

    Args:
        token_loss: FloatTensor[N, T].
        mask: BoolTensor[N, T].

    Returns:
        FloatTensor[] (fp32); 0 if nothing is unmasked.
    """
    mask = _check(token_loss, mask)
    per_seq = masked_mean(token_loss, mask, dim=1)
    return masked_mean(per_seq, mask.any(dim=1))


@LOSS_AGGREGATIONS.register("bnpo", weight=token_share)
def token_mean(
    token_loss: Tensor,
    mask: Tensor,
    *,
    global_token_count: float | None = None,
    world_size: int = 1,
    max_completion_length: int | None = None,
) -> Tensor:
    """``sum_{i,t} loss_{i,t} / sum_{i,t} mask_{i,t}`` over the local batch.

    Args:
        token_loss: FloatTensor[N, T].
        mask: BoolTensor[N, T].

    Returns:
        FloatTensor[] (fp32); 0 if nothing is unmasked.
    """
    mask = _check(token_loss, mask)
    return masked_mean(token_loss, mask)


@LOSS_AGGREGATIONS.register("dapo", weight=whole_step, options=_global_token_count)
def global_token_mean(
    token_loss: Tensor,
    mask: Tensor,
    *,
    global_token_count: float | None = None,
    world_size: int = 1,
    max_completion_length: int | None = None,
) -> Tensor:
    """DAPO token-level loss: sum over the global batch / global token count.

    Formula (Yu et al. 2025, arXiv:2503.14476, Sec. 3.3)::

        L = 1 / sum_i |o_i| * sum_i sum_t loss_{i,t}     (i over the whole global batch)

    In data-parallel training each rank holds part of the batch and DDP *averages* gradients
    over ranks; so each rank returns ``local_sum * world_size / global_token_count``, whose
    rank-average is exactly the global token mean. With gradient accumulation, count the
    tokens of all micro-batches of the optimizer step in ``global_token_count``.

    Args:
        token_loss: FloatTensor[N, T].
        mask: BoolTensor[N, T].
        global_token_count: completion tokens in the global batch (all ranks and
            micro-batches); ``None`` uses the local count (then equal to ``bnpo``).
        world_size: number of data-parallel ranks whose gradients are averaged.

    Returns:
        FloatTensor[] (fp32).

    Raises:
        ValueError: if ``global_token_count <= 0`` or ``world_size < 1``.
    """
    mask = _check(token_loss, mask)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if global_token_count is None:
        return masked_mean(token_loss, mask)
    if global_token_count <= 0:
        raise ValueError(f"global_token_count must be > 0, got {global_token_count}")
    return masked_sum(token_loss, mask) * (world_size / float(global_token_count))


@LOSS_AGGREGATIONS.register("dr_grpo", weight=row_share,
                            options=_max_completion_length)
def constant_normalizer_sum(
    token_loss: Tensor,
    mask: Tensor,
    *,
    global_token_count: float | None = None,
    world_size: int = 1,
    max_completion_length: int | None = None,
) -> Tensor:
    """Dr. GRPO: ``1/N * sum_i sum_t loss_{i,t} / L_max`` with a constant ``L_max``.

    Formula (Liu et al. 2025, arXiv:2503.20783, Dr. GRPO objective: GRPO without the
    ``1/|o_i|`` factor; the constant keeps the loss scale comparable). The constant is the
    configured maximum completion length, never the tensor width (which changes per batch).

    Args:
        token_loss: FloatTensor[N, T].
        mask: BoolTensor[N, T].
        max_completion_length: L_max, the generation cap in tokens (required).

    Returns:
        FloatTensor[] (fp32).

    Raises:
        ValueError: if ``max_completion_length`` is missing or < 1.
    """
    mask = _check(token_loss, mask)
    if max_completion_length is None or max_completion_length < 1:
        raise ValueError(
            "dr_grpo needs max_completion_length >= 1 (the generation cap), "
            f"got {max_completion_length}"
        )
    return masked_sum(token_loss, mask) / float(token_loss.shape[0] * max_completion_length)


def aggregate_loss(name: str, token_loss: Tensor, mask: Tensor, **options) -> Tensor:
    """Run the loss aggregation registered as ``name`` (``grpo``, ``bnpo``, ``dapo``,
    ``dr_grpo``).

    Raises:
        KeyError: for an unknown name.
    """
    return LOSS_AGGREGATIONS.get(name)(token_loss, mask, **options)


def micro_batch_weight(loss_agg: str, local_mask: Tensor, global_rows: int, global_tokens: int,
                       world_size: int = 1) -> float:
    """Scale of one micro-batch's locally aggregated loss, from the aggregation's entry.

    Backpropagating ``sum_micro weight * AGG(micro)`` on each of ``world_size`` ranks whose
    gradients are averaged gives the gradient of ``AGG`` over the whole step: ``grpo`` and
    ``dr_grpo`` ``W * n / N``, ``bnpo`` ``W * k / K``, ``dapo`` ``W`` (see :func:`row_share`,
    :func:`token_share`, :func:`whole_step`).

    Args:
        loss_agg: the loss aggregation's registry key.
        local_mask: BoolTensor[n, T], the micro-batch's completion mask.
        global_rows: N, rows of the step over all ranks (0 is treated as 1).
        global_tokens: K, completion tokens of the step over all ranks (0 is treated as 1).
        world_size: W, number of ranks whose gradients are averaged (1 = a single process).

    Returns:
        The (dimensionless) factor to multiply the micro-batch loss by.

    Raises:
        ValueError: for ``world_size < 1`` or an unregistered aggregation.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    try:
        entry = LOSS_AGGREGATIONS.entry(loss_agg)
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    return entry.meta.weight(local_mask, BatchCounts(int(global_rows), int(global_tokens)),
                             world_size)

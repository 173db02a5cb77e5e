"""How a policy update moves gradients: the backend of the one micro-batch loop.

:func:`rlvr.update.loop.policy_update` is written once; what differs between one process and
data-parallel ranks is behind this small protocol. :class:`LocalBackend` is the plain
single-process one; :class:`rlvr.distributed.ddp.AcceleratorBackend` is accelerate's
(DDP / FSDP / DeepSpeed: ``no_sync`` on all but the last micro-batch, the step's counts from
an all-reduce).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import torch
from torch import Tensor


class UpdateBackend(Protocol):
    """What :func:`~rlvr.update.loop.policy_update` needs from its gradient plumbing.

    Attributes:
        model: what the forward pass calls (the policy, or its DDP wrapper).
        world_size: W, the processes whose gradients are averaged (1: no data parallelism);
            the loss weights are scaled by it (:func:`rlvr.algo.loss_agg.micro_batch_weight`).
        collective: true when every rank must run every micro-batch's backward (the gradient
            all-reduce is a collective): the loop then never stops at a non-finite loss,
            which instead shows in the (global) gradient norm on every rank at once.
    """

    model: object
    world_size: int
    collective: bool

    def global_counts(self, rows: int, tokens: int) -> tuple[int, int]:
        """The step's rows and completion tokens over all ranks."""

    def micro_batch(self, last: bool) -> AbstractContextManager:
        """Context of one micro-batch's forward and backward (``last``: the step's last
        micro-batch on this rank, where gradients are synchronised)."""

    def backward(self, loss: Tensor) -> None:
        """Accumulate ``loss``'s gradient."""

    def without_rows(self) -> None:
        """Take part in the gradient synchronisation with no rows (an empty shard)."""

    def clip_grad_norm(self, max_norm: float) -> Tensor | None:
        """Clip the accumulated gradient to ``max_norm``; its norm before clipping (None when
        the backend clips elsewhere, e.g. DeepSpeed)."""


class LocalBackend:
    """One process: plain ``backward()`` and ``torch.nn.utils.clip_grad_norm_``.

    Args:
        model: the policy.
    """

    world_size = 1
    collective = False

    def __init__(self, model) -> None:
        self.model = model

    def global_counts(self, rows: int, tokens: int) -> tuple[int, int]:
        return int(rows), int(tokens)

    def micro_batch(self, last: bool) -> AbstractContextManager:
        return nullcontext()

    def backward(self, loss: Tensor) -> None:
        loss.backward()

    def without_rows(self) -> None:
        return None  # nothing to synchronise with

    def clip_grad_norm(self, max_norm: float) -> Tensor:
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm)

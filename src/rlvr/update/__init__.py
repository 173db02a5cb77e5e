"""The policy update: one micro-batch loop (:func:`policy_update`) for a single process and for
data-parallel ranks, parameterised by how gradients move (:class:`UpdateBackend`).

Layering: it uses :mod:`rlvr.algo` (the objective, the registries' options and weights) and
:mod:`rlvr.models` (the forward pass); :mod:`rlvr.train` (``GRPOStep``, with
:class:`LocalBackend`) and :mod:`rlvr.distributed` (``ddp_update``, with accelerate's
backend) both call it, so neither imports the other.
"""

from rlvr.update.backend import LocalBackend, UpdateBackend
from rlvr.update.loop import policy_update

__all__ = ["LocalBackend", "UpdateBackend", "policy_update"]

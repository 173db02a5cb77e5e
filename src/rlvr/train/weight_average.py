"""The exponential moving average (EMA) of the policy's weights (``grpo.ema_decay``): the model
a run validates, checkpoints and delivers, while rollouts keep sampling the policy itself.

Why: a GRPO step of a few groups is a noisy gradient, so the last iterate sits at a random point
of the region the policy wanders in late in training, and its greedy accuracy swings by several
points from one checkpoint to the next. Averaging the iterates (Polyak & Juditsky 1992;
Izmailov et al. 2018, "Averaging weights leads to wider optima and better generalization",
arXiv:1803.05407) keeps the direction the steps share and cancels much of their noise; WARP
(Ramé et al. 2024, "WARP: On the benefits of weight averaged rewarded policies",
arXiv:2406.16768, sec. 3.1) keeps such an EMA of an RLHF policy. The average only reads the
policy: the update, its optimizer and the rollouts are those of a run without it (on-policy),
so it can be judged against the last iterate of the same trajectory.

Update (after every GRPO step ``t``, from the weights that entered GRPO, ``theta_bar_0 =
theta_0``, so no bias correction is needed)::

    theta_bar_t = d * theta_bar_{t-1} + (1 - d) * theta_t

A step's weight in the average decays as ``d^age``: with ``d = 0.9`` the last ~10 steps carry
65% of it (``1 - d^10``), and ``d^t`` of it stays on the weights that entered GRPO.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn


def ema_update_(average: Sequence[Tensor], current: Sequence[Tensor], decay: float) -> None:
    """``average[i] <- decay * average[i] + (1 - decay) * current[i]``, in place, for each i.

    Args:
        average: the running averages (fp32 tensors of any shapes).
        current: the current weights, one per average, of the same shapes (any float dtype).
        decay: ``d`` in [0, 1): 0 copies ``current``.

    Raises:
        ValueError: ``decay`` outside [0, 1), or the two lists' lengths or shapes differ.
    """
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"ema decay must be in [0, 1), got {decay}")
    if len(average) != len(current):
        raise ValueError(f"{len(average)} averages for {len(current)} weights")
    for a, c in zip(average, current):
        if a.shape != c.shape:
            raise ValueError(f"average of shape {tuple(a.shape)} for weights {tuple(c.shape)}")
    if average:
        # lerp: a + (1 - d) * (c - a) = d * a + (1 - d) * c
        torch._foreach_lerp_(list(average), [c.to(a.dtype) for a, c in zip(average, current)],
                             1.0 - decay)


def trainable_state(policy: nn.Module) -> dict[str, Tensor]:
    """Copies of ``policy``'s trainable parameters by name (a LoRA policy: its adapters)."""
    return {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}


def load_trainable_state(policy: nn.Module, state: dict[str, Tensor]) -> None:
    """Copy ``state`` (from :func:`trainable_state`) into ``policy``'s parameters, in place (the
    optimizer keeps its parameter objects).

    Raises:
        KeyError: ``state`` lacks a trainable parameter of ``policy`` or names one it lacks.
    """
    params = {n: p for n, p in policy.named_parameters() if p.requires_grad}
    if set(params) != set(state):
        missing, unknown = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        raise KeyError(f"saved policy weights do not match the policy: missing {missing[:3]}, "
                       f"unknown {unknown[:3]}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])


class PolicyAverage:
    """The EMA of a policy's trainable parameters, kept in a frozen copy of the policy
    (:attr:`model`, which checkpoints save as the run's model).

    Args:
        policy: the trained model (fp32 master weights; LoRA-wrapped or not). The average
            starts as a copy of it.
        decay: ``d`` in (0, 1) (``grpo.ema_decay``).

    Attributes:
        model: the averaged model (``requires_grad`` off, eval mode); its frozen parameters
            are the policy's as they were copied.
        decay: ``d``.
        updates: GRPO steps averaged in (restored with the average on a resume or rollback).

    Raises:
        ValueError: ``decay`` outside (0, 1).
    """

    def __init__(self, policy: nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"grpo.ema_decay must be in (0, 1) for an average, got {decay}")
        self.decay, self.updates = decay, 0
        self._names = [n for n, p in policy.named_parameters() if p.requires_grad]
        self.model = copy.deepcopy(policy).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    def _pairs(self, policy: nn.Module) -> tuple[list[Tensor], list[Tensor]]:
        mine, theirs = dict(self.model.named_parameters()), dict(policy.named_parameters())
        return [mine[n] for n in self._names], [theirs[n].detach() for n in self._names]

    @torch.no_grad()
    def update(self, policy: nn.Module) -> None:
        """Average in ``policy``'s current trainable weights (after a GRPO step)."""
        average, current = self._pairs(policy)
        ema_update_(average, current, self.decay)
        self.updates += 1

    @contextmanager
    def applied(self, policy: nn.Module) -> Iterator[None]:
        """Within the block ``policy`` holds the averaged weights (copied in place, so the
        rollout engine's next sync snapshots them and the optimizer keeps its parameter
        objects); its own weights are restored bit for bit on exit, also on an error."""
        average, current = self._pairs(policy)
        own = [c.clone() for c in current]
        with torch.no_grad():
            torch._foreach_copy_(current, average)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(current, own)


@contextmanager
def averaged(average: PolicyAverage | None, policy: nn.Module) -> Iterator[None]:
    """:meth:`PolicyAverage.applied`, or nothing when the run keeps no average (``None``)."""
    if average is None:
        yield
    else:
        with average.applied(policy):
            yield


def new_average(policy: nn.Module, decay: float) -> PolicyAverage | None:
    """A :class:`PolicyAverage` of ``policy`` (as it enters GRPO), or ``None`` for
    ``decay == 0`` (``grpo.ema_decay`` off)."""
    return PolicyAverage(policy, decay) if decay > 0 else None


def restore_average(policy: nn.Module, policy_weights: dict[str, Tensor] | None,
                    decay: float, step: int) -> PolicyAverage | None:
    """After ``policy`` was loaded from the model files of the checkpoint of ``step`` (a
    resume or a rollback): the average those files hold (a copy of them, counting ``step``
    updates; ``None`` for ``decay == 0``), then ``policy``'s own weights from
    ``policy_weights`` (the checkpoint's trainer state) when the checkpoint was saved with an
    average (else the files are the policy's own, and the average starts there: 0 updates).

    Raises:
        KeyError: ``policy_weights`` do not match ``policy``'s trainable parameters.
    """
    average = new_average(policy, decay)
    if policy_weights is not None:
        load_trainable_state(policy, policy_weights)
        if average is not None:
            average.updates = step
    return average

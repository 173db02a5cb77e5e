"""GRPO's optimizer and learning-rate schedule: AdamW over the trainable parameters, a
linear warm-up over ``grpo.warmup_steps`` scheduler steps, then ``grpo.lr_schedule``
(constant, or a linear / cosine decay to 0 at ``grpo.steps``), all scaled by the run's LR scale
(``health.rollback_lr_factor`` per rollback). One scheduler step per GRPO step."""

from __future__ import annotations

import math

import torch


def grpo_optimizer(policy, grpo) -> torch.optim.Optimizer:
    """AdamW over ``policy``'s trainable parameters at ``grpo.learning_rate``."""
    trainable = [p for p in policy.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=grpo.learning_rate, weight_decay=grpo.weight_decay)


def lr_factor(step: int, warmup_steps: int, total_steps: int, schedule: str) -> float:
    """The LR multiplier at scheduler step ``step`` (0-based): ``min(1, (step + 1) / warmup)``
    during the warm-up, then 1 (``constant``), ``1 - p`` (``linear``) or ``(1 + cos(pi p)) /
    2`` (``cosine``), where ``p = (step - warmup_steps) / (total_steps - warmup_steps)``
    clipped to [0, 1]: the decays of transformers' ``get_linear_schedule_with_warmup`` /
    ``get_cosine_schedule_with_warmup`` (the cosine of Loshchilov & Hutter 2017, SGDR,
    arXiv:1608.03983, eq. 5, without restarts, down to 0). With no warm-up the first step runs
    at the full LR and the last (``total_steps - 1``) at ``1 / total_steps`` of it (linear).

    Raises:
        ValueError: an unknown ``schedule``.
    """
    if schedule not in ("constant", "linear", "cosine"):
        raise ValueError(f"grpo.lr_schedule: expected constant, linear or cosine, got "
                         f"{schedule!r}")
    if step < warmup_steps:
        return min(1.0, (step + 1) / warmup_steps)
    if schedule == "constant":
        return 1.0
    progress = min(1.0, max(0.0, (step - warmup_steps) / max(1, total_steps - warmup_steps)))
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_schedule(optimizer, grpo, scale: float = 1.0, steps_done: int = 0
                    ) -> torch.optim.lr_scheduler.LambdaLR:
    """The LR scheduler of ``optimizer``: base LR ``grpo.learning_rate * scale``, times
    :func:`lr_factor` at scheduler step ``s`` (``grpo.warmup_steps``, ``grpo.steps``,
    ``grpo.lr_schedule``), positioned after ``steps_done`` scheduler steps (0: a fresh
    schedule). Sets every param group's LR (and ``initial_lr``, the base) to the value at that
    position.

    A rollback re-creates the schedule here at the restored position with the lowered
    scale; the LRs are those a scheduler with base LR ``grpo.learning_rate * scale`` gives
    (the same products, so the same floats)."""
    base = grpo.learning_rate * scale
    for group in optimizer.param_groups:
        group["initial_lr"] = base
    # LambdaLR steps once on creation: last_epoch = steps_done - 1 lands on steps_done
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, grpo.warmup_steps, grpo.steps, grpo.lr_schedule),
        last_epoch=steps_done - 1)

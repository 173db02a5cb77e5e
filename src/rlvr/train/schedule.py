"""GRPO's optimizer and learning-rate schedule: AdamW over the trainable parameters, a
linear warm-up over ``grpo.warmup_steps`` scheduler steps, then constant, all scaled by the
run's LR scale (``health.rollback_lr_factor`` per rollback)."""

from __future__ import annotations

import torch


def grpo_optimizer(policy, grpo) -> torch.optim.Optimizer:
    """AdamW over ``policy``'s trainable parameters at ``grpo.learning_rate``."""
    trainable = [p for p in policy.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=grpo.learning_rate, weight_decay=grpo.weight_decay)


def warmup_schedule(optimizer, grpo, scale: float = 1.0, steps_done: int = 0
                    ) -> torch.optim.lr_scheduler.LambdaLR:
    """The LR scheduler of ``optimizer``: base LR ``grpo.learning_rate * scale``, times
    ``min(1, (s + 1) / warmup)`` at scheduler step ``s``, positioned after ``steps_done``
    scheduler steps (0: a fresh schedule). Sets every param group's LR (and ``initial_lr``,
    the base) to the value at that position.

    A rollback re-creates the schedule here at the restored position with the lowered
    scale; the LRs are those a scheduler with base LR ``grpo.learning_rate * scale`` gives
    (the same products, so the same floats)."""
    warm = max(1, grpo.warmup_steps)
    base = grpo.learning_rate * scale
    for group in optimizer.param_groups:
        group["initial_lr"] = base
    # LambdaLR steps once on creation: last_epoch = steps_done - 1 lands on steps_done
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm),
                                             last_epoch=steps_done - 1)

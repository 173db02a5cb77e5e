"""Scale-out: rollout and reward workers as Ray actors.

- :mod:`rlvr.distributed.ray_workers`: rollout and reward workers as Ray actors
  (``RolloutWorker``, ``RewardWorker``) and the driver-side drop-ins the trainer uses when
  ``rollout.ray_address`` is set (``RayRolloutEngine``, ``RayRewardPipeline``). It imports
  ``ray``, an optional dependency (``pip install rlvr[ray]``).
- :mod:`rlvr.distributed.ddp`: the data-parallel GRPO policy update (accelerate / DDP).

Neither is imported here, so ``import rlvr.distributed`` needs no optional dependency.
"""

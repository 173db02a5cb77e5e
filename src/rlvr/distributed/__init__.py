"""Scale-out: rollout and reward workers as Ray actors.

- :mod:`rlvr.distributed.ray_workers`: the driver-side drop-ins the trainer uses when
  ``rollout.ray_address`` is set (``RayRolloutEngine``, ``RayRewardPipeline``) over rollout and
  reward actors (``RolloutWorker``, ``RewardWorker``: :mod:`rlvr.distributed.ray_actors`), with
  Ray's lifetime in :mod:`rlvr.distributed.ray_cluster` and the sharding of a call in
  :mod:`rlvr.distributed.sharding`. It imports ``ray``, an optional dependency
  (``pip install rlvr[ray]``).
- :mod:`rlvr.distributed.ddp`: the data-parallel GRPO policy update (accelerate / DDP).

None of them is imported here, so ``import rlvr.distributed`` needs no optional dependency.
"""

"""Scale-out: rollout and reward workers as Ray actors.

- :mod:`rlvr.distributed.ray_workers`: the driver-side drop-ins the trainer uses when
  ``rollout.ray_address`` is set (``RayRolloutEngine``, ``RayRewardPipeline``) over rollout and
  reward actors (``RolloutWorker``, ``RewardWorker``: :mod:`rlvr.distributed.ray_actors`), with
  Ray's lifetime in :mod:`rlvr.distributed.ray_cluster` and the sharding of a call in
  :mod:`rlvr.distributed.sharding`. It imports ``ray``, an optional dependency
  (``pip install rlvr[ray]``).
- :mod:`rlvr.distributed.ddp`: the data-parallel GRPO policy update (accelerate / DDP).
- Asynchronous rollouts (rollout workers that keep generating while the trainer updates):
  the staleness bound (:mod:`rlvr.distributed.staleness`), worker processes on this machine
  (:mod:`rlvr.distributed.async_rollout`) or Ray actors (:mod:`rlvr.distributed.ray_async`)
  exchanging :mod:`rlvr.distributed.rollout_jobs` and watched by
  :mod:`rlvr.distributed.watchdog`, the trainer's side
  (:mod:`rlvr.distributed.async_collector`) and a simulator of the pipeline
  (:mod:`rlvr.distributed.pipeline_sim`).

None of them is imported here, so ``import rlvr.distributed`` needs no optional dependency.
"""

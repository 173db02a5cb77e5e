"""The pipeline simulator (rlvr.distributed.pipeline_sim) against closed forms worked by hand:
synchronous steps cost rollout / N + update / M + weight push; one step off-policy with one
worker overlaps them (a step costs the larger of the two); the bound is never exceeded."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from rlvr.distributed.pipeline_sim import simulate


def test_synchronous_steps_add_rollout_update_and_weight_push():
    # 200 steps of 2 s rollout + 1 s update, and a 0.1 s push before steps 2..200
    run = simulate(2.0, 1.0, max_staleness=0, sync_s=0.1, steps=200)
    assert run.seconds_per_step == pytest.approx((200 * 3.0 + 199 * 0.1) / 200)
    assert run.staleness_mean == 0.0 and run.dropped == 0
    # two workers halve the rollout: 1 + 1 s per step, each side idle half the time
    two = simulate(2.0, 1.0, workers=2, max_staleness=0, steps=200)
    assert two.seconds_per_step == pytest.approx(2.0)
    assert two.trainer_idle == pytest.approx(0.5) and two.rollout_idle == pytest.approx(0.5)
    # two update processes halve the update
    assert simulate(2.0, 1.0, update_processes=2, max_staleness=0).seconds_per_step == \
        pytest.approx(2.5)


def test_one_step_off_policy_overlaps_rollout_and_update():
    # rollout-bound: after the first step (2 s rollout), every step costs the 2 s rollout
    # (the worker never waits), the trainer waits 2 - 1 = 1 s of each step
    rollout_bound = simulate(2.0, 1.0, max_staleness=1, steps=200)
    assert rollout_bound.seconds_per_step == pytest.approx((2.0 * 200 + 1.0) / 200)
    assert rollout_bound.rollout_idle == pytest.approx(0.0, abs=1e-12)
    # update-bound: every step costs the 2 s update, the worker idles half the time
    update_bound = simulate(1.0, 2.0, max_staleness=1, steps=200)
    assert update_bound.seconds_per_step == pytest.approx((1.0 + 2.0 * 200) / 200)
    # every group but the first step's was sampled one version back
    assert rollout_bound.staleness_mean == pytest.approx(199 / 200)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_long_tailed_rollouts_never_train_staler_than_k(k):
    run = simulate(2.0, 1.0, workers=4, max_staleness=k, rollout_cv=1.5, steps=150, seed=3)
    assert run.staleness_mean <= k
    # a larger bound keeps the trainer at least as busy
    sync = simulate(2.0, 1.0, workers=4, max_staleness=0, rollout_cv=1.5, steps=150, seed=3)
    assert run.steps_per_hour > sync.steps_per_hour

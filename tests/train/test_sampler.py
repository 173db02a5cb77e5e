"""The GRPO prompt sampler: pools by weight, the legacy single-pool order, dynamic sampling,
exact state round trip (src/rlvr/train/sampler.py)."""

import random

import pytest

from rlvr.train.sampler import TaskSampler


def test_single_pool_keeps_the_seeded_epoch_order():
    s = TaskSampler.single(10, seed=3)
    expected = []
    for epoch in range(3):
        order = list(range(10))
        random.Random(3 * 7919 + epoch).shuffle(order)
        expected += order
    assert s.next(30) == expected


def test_weighted_pools_realise_their_ratio():
    pools = {"math": list(range(700)), "code": list(range(700, 1000))}
    s = TaskSampler(pools, {"math": 7, "code": 3}, seed=0)
    drawn = s.next(5000)
    share = sum(i >= 700 for i in drawn) / len(drawn)
    assert share == pytest.approx(0.3, abs=0.02)
    r = s.realised()
    assert r["code"]["target"] == pytest.approx(0.3)
    assert r["code"]["realised"] == pytest.approx(share)
    # every pool is walked in epochs: no repeat before the pool is exhausted
    code = [i for i in drawn if i >= 700][:300]
    assert sorted(code) == list(range(700, 1000))


def test_state_round_trip_continues_identically():
    pools = {"a": list(range(5)), "b": list(range(5, 12))}
    s = TaskSampler(pools, {"a": 1, "b": 2}, seed=1, skip_after=2)
    s.next(7)
    s.record([0, 5, 6], [True, False, True])
    other = TaskSampler(pools, {"a": 1, "b": 2}, seed=1, skip_after=2)
    other.load_state_dict(s.state_dict())
    assert other.next(20) == s.next(20)


def test_dynamic_sampling_skips_prompts_that_stopped_teaching():
    s = TaskSampler.single(4, seed=0, skip_after=2)
    s.record([1], [True])
    assert 1 in s.next(4)  # one zero-variance visit is not enough
    s.record([1, 2], [True, False])
    drawn = s.next(12)
    assert 1 not in drawn and s.skipped == 3  # skipped in each of the 3 epochs
    s.record([0, 2, 3, 0, 2, 3], [True] * 6)  # now everything is stale:
    assert len(s.next(4)) == 4  # accepted rather than looping forever


def test_bad_pools_are_refused():
    with pytest.raises(ValueError, match="at least one task"):
        TaskSampler({"a": []}, {"a": 1}, seed=0)
    with pytest.raises(ValueError, match="weights must be > 0"):
        TaskSampler({"a": [1]}, {"a": 0}, seed=0)

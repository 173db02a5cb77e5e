"""Code-task runs leave no sandbox cgroup directories behind: neither the
pre-started sandbox of a verifier worker that is stopped at the end of a run (multiprocessing
children skip atexit, so its pool was never closed), nor the run of a worker killed at its
verifier deadline. Both used to stay until the next start's ``reap_stale``."""

from __future__ import annotations

import os

import pytest

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.sandbox import cgroups, tiers

REFERENCE = {"entry_point": "add", "tests": ["assert add(1, 2) == 3"]}
GOOD = "def add(a, b):\n    return a + b\n"
SLEEPS = "import time\ntime.sleep(30)\n" + GOOD  # outlives the 1.5 s verifier deadline


def groups_of(pids: set[int]) -> list[str]:
    """The run groups (in every controller) named after one of ``pids``."""
    found = []
    for controller in cgroups.CONTROLLERS + cgroups.OPTIONAL_CONTROLLERS:
        base = os.path.join(cgroups.ROOT, controller, cgroups.BASE)
        try:
            names = os.listdir(base)
        except OSError:
            continue
        found += [os.path.join(base, n) for n in names
                  if n.split("-", 1)[0].isdigit() and int(n.split("-", 1)[0]) in pids]
    return found


@pytest.fixture
def with_cgroups():
    if not tiers.environment().cgroups:
        pytest.skip("the sandbox uses no cgroups here (not root, or no cgroup v1 controllers)")


def worker_pids(pipeline: RewardPipeline) -> set[int]:
    return {w.process.pid for w in pipeline.pool._workers}


def test_a_finished_run_leaves_no_cgroup_directories(with_cgroups):
    pipeline = RewardPipeline(RewardConfig(workers=2))
    try:
        results = pipeline.score_batch([ScoreRequest(GOOD, REFERENCE, "code")] * 4)
        assert [r.status.value for r in results] == ["correct"] * 4
        pids = worker_pids(pipeline)
        assert groups_of(pids), "the workers' sandboxes should have cgroups while they run"
    finally:
        pipeline.close()
    assert groups_of(pids) == []


def test_a_worker_killed_at_its_deadline_leaves_no_cgroup_directories(with_cgroups):
    pipeline = RewardPipeline(RewardConfig(workers=1, timeout_overrides_s={"code": 1.5}))
    pids: set[int] = set()
    try:
        first = pipeline.score_batch([ScoreRequest(GOOD, REFERENCE, "code")])
        assert first[0].status.value == "correct"
        pids |= worker_pids(pipeline)
        killed = pipeline.score_batch([ScoreRequest(SLEEPS, REFERENCE, "code")])
        assert killed[0].status.value == "timeout"
        pids |= worker_pids(pipeline)  # the replacement
        assert groups_of(pids - worker_pids(pipeline)) == []  # removed when it was replaced
    finally:
        pipeline.close()
    assert groups_of(pids) == []

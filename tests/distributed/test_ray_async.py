"""Asynchronous rollouts over Ray actors (rlvr.distributed.ray_async) on the tiny model and a
local 2-CPU Ray cluster: a job is sampled exactly as by the local engine and tagged with the
version of the weights pushed before it; an actor process killed with SIGKILL raises
RolloutWorkerError naming it from ``poll`` (given 60 s), never a wait."""

from __future__ import annotations

import os
import signal

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.distributed.ray_async import RayRolloutPool  # noqa: E402
from rlvr.distributed.rollout_jobs import RolloutJob, RolloutWorkerError  # noqa: E402
from rlvr.models import load_model_and_tokenizer  # noqa: E402
from rlvr.models.tiny import spread_weights  # noqa: E402
from rlvr.rollout import SamplingParams, create_engine  # noqa: E402

EOS = 2


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


def _params() -> SamplingParams:
    return SamplingParams(temperature=1.0, max_new_tokens=10, n=2, stop_token_ids=(EOS,), seed=4)


def _wait(pool, timeout: float = 120.0):
    got = pool.poll(timeout)
    assert got, f"no result within {timeout} s"
    return got[0]


def test_versions_follow_pushed_weights_and_a_killed_actor_is_named(cluster):
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    model = spread_weights(model).eval()
    prompts = [tokenizer.encode(t) for t in ("1+1=", "abc")]
    pool = RayRolloutPool(model, pad_token_id=tokenizer.pad_token_id, threads_per_worker=1,
                          engine_options={"dtype": torch.float32}, heartbeat_s=0.5,
                          heartbeat_timeout_s=20.0)
    pool.submit(RolloutJob(0, prompts, _params(), meta=["a", "b"]))
    first = _wait(pool)
    local = create_engine("torch", model, pad_token_id=tokenizer.pad_token_id,
                          dtype=torch.float32).generate(prompts, _params())
    assert (first.version, first.meta, first.worker) == (0, ["a", "b"], "rlvr-rollout-0")
    assert torch.equal(first.output.completion_ids, local.completion_ids)
    assert torch.equal(first.output.logprobs, local.logprobs)

    newer = spread_weights(load_model_and_tokenizer("tiny-random")[0], seed=9).eval()
    pool.push_weights(newer, 1)
    pool.submit(RolloutJob(1, prompts, _params(), meta=["a", "b"]))
    second = _wait(pool)
    assert second.version == 1
    fresh = create_engine("torch", newer, pad_token_id=tokenizer.pad_token_id,
                          dtype=torch.float32).generate(prompts, _params())
    assert torch.equal(second.output.completion_ids, fresh.completion_ids)

    pid = pool.pids[0]
    pool.submit(RolloutJob(2, prompts, SamplingParams(max_new_tokens=3000, n=16, seed=1),
                           meta=["a", "b"]))
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RolloutWorkerError, match=(
            rf"rollout worker rlvr-rollout-0 \(pid {pid}, Ray actor [0-9a-f]+\) died while")):
        for _ in range(60):  # one-second polls: the error must come well within a minute
            pool.poll(1.0)

"""Asynchronous rollouts over Ray actors (rlvr.distributed.ray_async) on the tiny model and a
local 2-CPU Ray cluster (one per module, shut down after it):

- a job is sampled exactly as by the local engine and tagged with the version of the weights
  pushed before it; an actor process killed with SIGKILL raises RolloutWorkerError naming it
  from ``poll`` (given 60 s), never a wait;
- the watchdog (``watch``) pings the actors from a thread and raises that error in the main
  thread while it is busy elsewhere and never calls the pool: for an actor killed with
  ``ray.kill`` (dead; the main thread first sits in a 5 s ``ray.get`` of another task, which
  the error must neither break nor turn into a ``SystemError``) and for one stopped with
  SIGSTOP (its ping unanswered for the 3 s timeout); the name, pid and Ray actor id in the
  message are checked against Ray's own record of the actor (its GCS table).
"""

from __future__ import annotations

import os
import signal
import time

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


def _actor_id_of(pid: int) -> str:
    """The Ray actor id of the rollout actor running in process ``pid``, from Ray's actor
    table (not from the pool)."""
    from ray._private import state

    found = [a["ActorID"] for a in state.actors().values()
             if a["ActorClassName"] == "AsyncRolloutActor" and a["Pid"] == pid
             and a["State"] == "ALIVE"]
    assert len(found) == 1, found
    return found[0]


def _busy(seconds: float) -> None:
    """The trainer busy elsewhere (an update) for up to ``seconds``, never calling the pool."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(i * i for i in range(10_000))


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


def _watched_pool(tiny):
    model, tokenizer = tiny
    pool = RayRolloutPool(model, pad_token_id=tokenizer.pad_token_id, threads_per_worker=1,
                          engine_options={"dtype": torch.float32}, heartbeat_s=0.5,
                          heartbeat_timeout_s=3.0)
    pool.watch()
    return pool


def test_the_watchdog_interrupts_a_trainer_busy_elsewhere_when_an_actor_dies(cluster, tiny):
    def nap(seconds: float) -> float:  # local: Ray ships it by value to its worker
        time.sleep(seconds)
        return seconds

    pool = _watched_pool(tiny)
    try:
        pid, actor_id = pool.pids[0], _actor_id_of(pool.pids[0])
        assert signal.getsignal(signal.SIGUSR1) != signal.SIG_DFL
        ray.kill(pool._actors[0])
        with pytest.raises(RolloutWorkerError) as err:
            assert ray.get(ray.remote(num_cpus=0)(nap).remote(5.0)) == 5.0
            _busy(60.0)  # an "update" of up to 60 s that never polls the pool
        assert err.value.worker == "rlvr-rollout-0"
        assert str(err.value).startswith(
            f"rollout worker rlvr-rollout-0 (pid {pid}, Ray actor {actor_id}) died while "
            f"waiting for a job")
        # the handler the watchdog replaced is back, and any later call raises the same error
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
        with pytest.raises(RolloutWorkerError) as again:
            pool.poll(0.1)
        assert again.value is err.value
    finally:
        pool.close()


def test_the_watchdog_names_an_actor_that_stops_answering_pings(cluster, tiny):
    pool = _watched_pool(tiny)
    pid = pool.pids[0]
    try:
        actor_id = _actor_id_of(pid)
        os.kill(pid, signal.SIGSTOP)
        with pytest.raises(RolloutWorkerError, match=(
                rf"rollout worker rlvr-rollout-0 \(pid {pid}, Ray actor {actor_id}\) stopped "
                r"answering: no reply to a ping for \d+ s \(timeout 3 s\); last seen waiting "
                r"for a job")):
            _busy(60.0)
    finally:
        pool.close()
        try:
            os.kill(pid, signal.SIGKILL)  # in case Ray's kill has not reached it yet
        except ProcessLookupError:
            pass

"""Rollout worker processes (rlvr.distributed.async_rollout) on the tiny model.

- Pure pieces: packing weights into flat tensors and back, splitting a call's output into
  groups.
- A worker process samples exactly what the local engine samples from the same weights and
  seed, tags each job with the policy version of the weights it used, and switches to new
  weights pushed with a version before its next job.
- Failures are named, never waited on: a worker killed with SIGKILL, a worker that stops
  answering (SIGSTOP: no heartbeat) and a job that fails in the worker each raise
  RolloutWorkerError naming the worker and its pid from ``poll`` (given 60 s, well above the
  detection bounds: the liveness check every half second, the heartbeat timeout of 4 s).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.distributed.async_rollout import LocalRolloutPool, pack_state, unpack_state  # noqa: E402
from rlvr.distributed.rollout_jobs import RolloutJob, RolloutWorkerError, split_groups  # noqa: E402
from rlvr.models import load_model_and_tokenizer  # noqa: E402
from rlvr.models.tiny import spread_weights  # noqa: E402
from rlvr.rollout import SamplingParams, create_engine  # noqa: E402

EOS = 2
TEXTS = ("12+34=", "hello world, what", "7 * 8 = ?")


@pytest.fixture(scope="module")
def prompts(tiny):
    return [tiny[1].encode(t) for t in TEXTS]


def _params(seed: int) -> SamplingParams:
    return SamplingParams(temperature=1.0, max_new_tokens=12, n=3, stop_token_ids=(EOS,),
                          seed=seed)


def _same(a, b) -> None:
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(a.completion_mask, b.completion_mask)
    assert torch.equal(a.logprobs, b.logprobs)
    assert torch.equal(a.lengths, b.lengths)
    assert a.finish_reason == b.finish_reason


def test_pack_state_round_trips_every_tensor():
    state = {"a": torch.arange(6.0).view(2, 3), "b": torch.tensor([7, 8], dtype=torch.int64),
             "c": torch.ones(4, dtype=torch.bfloat16), "d": torch.full((1, 2), 5.0)}
    flats, index = pack_state(state)
    assert sorted(flats) == ["torch.bfloat16", "torch.float32", "torch.int64"]
    assert flats["torch.float32"].tolist() == [0, 1, 2, 3, 4, 5, 5, 5]
    back = unpack_state(flats, index)
    for name, tensor in state.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor)


def test_split_groups_gives_each_prompt_its_rows(tiny, prompts):
    engine = create_engine("torch", tiny[0], pad_token_id=tiny[1].pad_token_id)
    out = engine.generate(prompts, _params(5))
    groups = split_groups(out, 3)
    assert len(groups) == len(prompts)
    for g, group in enumerate(groups):
        rows = slice(3 * g, 3 * g + 3)
        width = int(out.lengths[rows].max())
        assert torch.equal(group.completion_ids, out.completion_ids[rows, :width])
        assert torch.equal(group.logprobs, out.logprobs[rows, :width])
        assert group.prompt_index.tolist() == [0, 0, 0]
        assert group.finish_reason == out.finish_reason[rows]
        assert group.timing.tokens_generated == int(out.lengths[rows].sum())
    with pytest.raises(ValueError, match="groups of n=4"):
        split_groups(out, 4)


def test_worker_samples_like_the_local_engine_and_follows_pushed_weights(tiny, prompts):
    model = tiny[0]
    local = create_engine("torch", model, pad_token_id=tiny[1].pad_token_id,
                          dtype=torch.float32)
    with LocalRolloutPool(model, pad_token_id=tiny[1].pad_token_id, threads=1,
                          engine_options={"dtype": torch.float32}) as pool:
        pool.submit(RolloutJob(0, prompts, _params(11), meta={"tasks": [4, 5, 6]}))
        (first,) = _wait(pool, 1)
        assert (first.job_id, first.version, first.meta) == (0, 0, {"tasks": [4, 5, 6]})
        assert first.worker == "rlvr-rollout-0" and first.prompts == prompts
        _same(first.output, local.generate(prompts, _params(11)))

        newer = spread_weights(load_model_and_tokenizer("tiny-random")[0], seed=9).eval()
        pool.push_weights(newer, version=1)
        pool.submit(RolloutJob(1, prompts, _params(11)))
        (second,) = _wait(pool, 1)
        assert second.version == 1
        fresh = create_engine("torch", newer, pad_token_id=tiny[1].pad_token_id,
                              dtype=torch.float32)
        _same(second.output, fresh.generate(prompts, _params(11)))
        assert not torch.equal(second.output.logprobs, first.output.logprobs)
        times = pool.times()
        assert times.workers["rlvr-rollout-0"].loads == 1
        assert pool.in_flight == 0
        with pytest.raises(ValueError, match="older than the workers' 1"):
            pool.push_weights(newer, version=0)


def _wait(pool, count: int, timeout: float = 120.0) -> list:
    got = []
    while len(got) < count:
        more = pool.poll(timeout)
        assert more, f"no result within {timeout} s"
        got += more
    return got


def _pool(tiny):
    return LocalRolloutPool(tiny[0], pad_token_id=tiny[1].pad_token_id, threads=1,
                            heartbeat_s=0.5, heartbeat_timeout_s=4.0)


def test_a_killed_worker_is_named_not_waited_on(tiny, prompts):
    pool = _pool(tiny)
    pid = pool.pids[0]
    pool.submit(RolloutJob(0, prompts, SamplingParams(max_new_tokens=2000, n=8, seed=1)))
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RolloutWorkerError) as err:
        _wait(pool, 1, timeout=60.0)
    assert err.value.worker == "rlvr-rollout-0"
    assert f"rollout worker rlvr-rollout-0 (pid {pid}) died (killed by SIGKILL)" in str(
        err.value)
    # the same error again from any later call (in case the first was swallowed)
    with pytest.raises(RolloutWorkerError, match="died"):
        pool.submit(RolloutJob(1, prompts, _params(1)))


def test_the_watchdog_interrupts_a_trainer_busy_elsewhere(tiny, prompts):
    pool = _pool(tiny)
    pool.watch()
    pid = pool.pids[0]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RolloutWorkerError, match=(
            rf"rollout worker rlvr-rollout-0 \(pid {pid}\) died \(killed by SIGKILL\)")):
        for _ in range(600):  # an "update" of up to 60 s that never polls the pool
            time.sleep(0.1)
    # the handler the pool replaced is back
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_a_worker_that_stops_answering_is_named(tiny, prompts):
    pool = _pool(tiny)
    pid = pool.pids[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(RolloutWorkerError, match=(
                rf"rollout worker rlvr-rollout-0 \(pid {pid}\) stopped answering: no "
                r"heartbeat for \d+ s \(timeout 4 s\); last seen waiting for a job")):
            _wait(pool, 1, timeout=60.0)
    finally:
        pool.close()  # stopped processes are killed (SIGKILL works on a stopped process)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_failing_job_is_reported_with_the_workers_traceback(tiny, prompts):
    pool = _pool(tiny)
    pool.submit(RolloutJob(3, [[1, 2, 10_000]], _params(1)))
    with pytest.raises(RolloutWorkerError, match=(
            r"(?s)rollout worker rlvr-rollout-0 \(pid \d+\) failed while generating job 3 "
            r"\(1 prompts x 3, policy version 0\):.*token id 10000 outside \[0, 100\)")):
        _wait(pool, 1, timeout=60.0)

"""The asynchronous rollout source (``grpo.max_staleness: k >= 1``): rollout workers keep
generating the next steps' groups with the newest weights they have while the trainer
updates; a step trains only on groups sampled at most ``k`` updates ago.

:class:`AsyncSource` implements :class:`rlvr.train.rollouts.RolloutSource` over
:class:`rlvr.distributed.async_collector.AsyncCollector`: a rollout worker process on this
machine (:class:`rlvr.distributed.async_rollout.LocalRolloutPool`, half the threads) or, with
``rollout.ray_address``, ``rollout.ray_rollout_workers`` Ray actors
(:class:`rlvr.distributed.ray_async.RayRolloutPool`). Tasks are drawn from the run's sampler
when a job is admitted (ahead of the step that trains them); the completions are scored here,
after the step took them (dropped groups cost no verifier time). Each job of step-sized
``grpo.prompts_per_step`` prompts is sampled with the seed the synchronous loop gives the step
of the same number (``seed * 1_000_003 + job + 1``).

Per-step metrics (:meth:`AsyncSource.step_metrics`, merged into the step's): the staleness
histogram (``staleness_mean``, ``staleness_max``, ``staleness_hist_<s>``), ``dropped_stale``
and ``seconds_trainer_idle``, ``seconds_rollout_idle``, ``seconds_weight_sync``.

Resume: :meth:`AsyncSource.state_dict` (saved in every checkpoint) holds the groups waiting
with their versions and the jobs in flight; a resumed run hands out the waiting groups under
the same bound and samples the jobs that were in flight again, with the checkpoint's weights.
A health-check rollback discards the pipeline (:meth:`AsyncSource.discard`): groups sampled
by the weights it threw away are never trained.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

import torch

from rlvr.distributed.async_collector import AsyncCollector
from rlvr.distributed.async_rollout import LocalRolloutPool
from rlvr.distributed.ray_async import RayRolloutPool
from rlvr.distributed.ray_cluster import LOCAL, init_ray, local_num_cpus
from rlvr.distributed.rollout_jobs import RolloutJob
from rlvr.models.lora import is_lora, merged_state_dict
from rlvr.models.precision import resolve_precision
from rlvr.progress import announce
from rlvr.rollout.types import concat_rollouts
from rlvr.train.logs import console
from rlvr.train.rollouts import ScoredRollouts, sampling_params, score
from rlvr.train.rundir import plain_policy

if TYPE_CHECKING:
    from rlvr.train.state import TrainingState


def worker_weights(policy):
    """What the rollout workers load at a weight push: the policy, or a LoRA policy's merged
    weights (:func:`rlvr.models.lora.merged_state_dict`). The workers run a plain model of
    the base architecture (:func:`rollout_pool` builds theirs from a merged copy); only the
    run's own ``torch`` engine samples the LoRA policy itself."""
    return merged_state_dict(policy) if is_lora(policy) else policy


def rollout_pool(config, policy, pad_token_id: int, version: int):
    """The rollout workers of an asynchronous run: with ``rollout.ray_address`` the
    ``rollout.ray_rollout_workers`` Ray actors, else one process; on this machine (no Ray, or
    a local Ray cluster) the workers share half of the run's threads and the trainer keeps the
    rest. Returns ``(pool, trainer threads or None: unchanged)``."""
    r = config.rollout
    dtype = resolve_precision(config.model.precision).dtype
    model = plain_policy(policy)
    threads = config.threads or os.cpu_count() or 1
    half = max(1, threads // 2)
    trainer = max(1, threads - half)
    if r.ray_address:  # ray (extra `ray`) is imported by the calls below
        started = init_ray(r.ray_address, local_num_cpus(r.ray_rollout_workers
                                                         + r.ray_reward_workers))
        local = r.ray_address == LOCAL
        # a local cluster is this machine, whose CPUs the run's other actors (validation's
        # rollout engine, the reward workers) already reserve: share them rather than wait
        pool = RayRolloutPool(model, engine=r.engine, workers=r.ray_rollout_workers,
                              pad_token_id=pad_token_id, engine_options={"dtype": dtype},
                              threads_per_worker=max(1, half // r.ray_rollout_workers)
                              if local else None,
                              num_cpus_per_worker=0.0 if local else 1.0, version=version,
                              own_ray=started)
        return pool, trainer if local else None
    pool = LocalRolloutPool(model, engine=r.engine, pad_token_id=pad_token_id,
                            engine_options={"dtype": dtype}, threads=half, version=version)
    return pool, trainer


class AsyncSource:
    """:class:`rlvr.train.rollouts.RolloutSource` with rollouts generated ahead of time (see
    the module doc).

    Args:
        config: the run config (``grpo.max_staleness`` >= 1, single-turn rollouts).
        state: the run's state (its policy, tokenizer, sampler and step at construction).
        rewards: the reward pipeline that scores the completions.

    Raises:
        RolloutWorkerError: a worker did not start.
    """

    def __init__(self, config, state: TrainingState, rewards):
        self.config, self.rewards = config, rewards
        g = config.grpo
        self.max_staleness = g.max_staleness
        m = state.models
        self._threads = torch.get_num_threads()
        self.pool, trainer_threads = rollout_pool(config, m.policy, m.tokenizer.pad_token_id,
                                                  state.progress.step)
        if trainer_threads is not None:
            torch.set_num_threads(trainer_threads)
        if threading.current_thread() is threading.main_thread():
            self.pool.watch()  # a dead worker interrupts an update, not only a wait
        pids = ", ".join(f"{n} (pid {p})" for n, p in zip(self.pool.names, self.pool.pids))
        console.print(f"asynchronous rollouts (grpo.max_staleness {self.max_staleness}): "
                      f"rollout worker {pids}")
        self._state = state
        self.collector = AsyncCollector(self.pool, self._make_job,
                                        groups_per_step=g.prompts_per_step,
                                        max_staleness=self.max_staleness,
                                        version=state.progress.step)

    def _make_job(self, job_id: int, groups: int) -> RolloutJob:
        """The next ``groups`` tasks of the sampler, sampled like step ``job_id + 1``."""
        s = self._state
        idx = s.progress.sampler.next(groups)
        return RolloutJob(job_id, [s.data.train_prompts[i] for i in idx],
                          sampling_params(self.config, s.stop_ids, job_id + 1), meta=idx)

    def collect(self, state: TrainingState, step: int, groups: int,
                round_: int = 0) -> ScoredRollouts:
        """:meth:`rlvr.train.rollouts.RolloutSource.collect`: ``groups`` groups sampled at
        most ``grpo.max_staleness`` updates ago (the workers get the policy's weights first
        when it changed), scored here.

        Raises:
            RolloutWorkerError: a worker died, failed or stopped answering (named).
            TimeoutError: nothing came back for an hour from live workers.
        """
        self._state = state
        announce("rollout")
        policy = state.models.policy
        taken = self.collector.collect(groups, state.progress.step,
                                       weights=lambda: worker_weights(policy))
        idx = [g.meta for g in taken]
        tasks = [state.data.train_tasks[i] for i in idx]
        out = concat_rollouts([g.output for g in taken], [1] * len(taken))
        versions = torch.tensor([g.version for g in taken for _ in range(g.output.num_rows)],
                                dtype=torch.long)
        prompts = [taken[i].prompt for i in out.prompt_index.tolist()]
        announce("reward")
        t0 = time.perf_counter()
        texts, results = score(self.rewards, state.models.tokenizer, tasks, out)
        return ScoredRollouts(idx, tasks, prompts, out, texts, results, None, versions,
                              out.timing.total_seconds, time.perf_counter() - t0)

    def step_metrics(self) -> dict[str, float]:
        """The staleness histogram, drops and time split since the last call
        (:meth:`rlvr.distributed.async_collector.AsyncCollector.step_metrics`)."""
        return self.collector.step_metrics()

    def discard(self) -> None:
        """Drop every group waiting or in flight (a rollback replaced the weights that
        sampled them); their tasks are not drawn again."""
        self.collector.discard()

    def state_dict(self) -> dict:
        """The collector's versions, waiting groups and jobs in flight."""
        return {"collector": self.collector.state_dict()}

    def load_state_dict(self, d: dict) -> None:
        """Restore :meth:`state_dict` (before the first step; resubmits the jobs)."""
        if d:
            self.collector.load_state_dict(d["collector"])

    def close(self) -> None:
        """Stop the rollout workers and give the trainer its threads back."""
        self.pool.close()
        torch.set_num_threads(self._threads)

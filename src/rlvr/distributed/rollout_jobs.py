"""What asynchronous rollout workers exchange with the trainer (pure records, no processes):
a job of prompts in (:class:`RolloutJob`), completions tagged with the policy version that
sampled them out (:class:`RolloutResult`), the error that names a failed worker
(:class:`rlvr.distributed.errors.RolloutWorkerError`, re-exported here), and the split of
one job's output into its prompts' groups (:func:`split_groups`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvr.distributed.errors import RolloutWorkerError
from rlvr.rollout.types import RolloutOutput, RolloutTiming, SamplingParams

__all__ = ["RolloutJob", "RolloutResult", "RolloutWorkerError", "PoolTimes", "WorkerTimes",
           "split_groups"]

DEFAULT_HEARTBEAT_S = 2.0
DEFAULT_HEARTBEAT_TIMEOUT_S = 30.0
DEFAULT_STARTUP_TIMEOUT_S = 300.0


@dataclass
class RolloutJob:
    """Prompts for a rollout worker to sample.

    Attributes:
        job_id: the caller's id, unique among jobs in flight (comes back in the result).
        prompts: prompt token ids, one list per prompt (each prompt is one group).
        params: how to sample (``params.n`` completions per prompt).
        meta: anything picklable the caller wants back with the result (e.g. task indices).
    """

    job_id: int
    prompts: list[list[int]]
    params: SamplingParams
    meta: Any = None

    @property
    def groups(self) -> int:
        """Number of groups (prompts) in the job."""
        return len(self.prompts)


@dataclass
class RolloutResult:
    """A finished job.

    Attributes:
        job_id, meta: the job's.
        prompts: the job's prompts.
        output: the completions (``RolloutOutput``; ``params.n`` rows per prompt, in prompt
            order); None only from a simulated pool.
        version: the policy version (number of updates applied) of the weights that sampled
            every row of the job.
        worker: the name of the worker that ran it.
        seconds: the worker's wall time for the job (seconds).
    """

    job_id: int
    prompts: list[list[int]]
    output: RolloutOutput | None
    version: int
    worker: str
    seconds: float
    meta: Any = None


@dataclass
class WorkerTimes:
    """A worker's time split since it started (seconds).

    Attributes:
        busy: generating.
        idle: waiting for a job.
        loading: loading new weights.
        loads: weight loads done.
    """

    busy: float = 0.0
    idle: float = 0.0
    loading: float = 0.0
    loads: int = 0


@dataclass
class PoolTimes:
    """The pool's totals over its workers (seconds), for per-step differences.

    Attributes:
        rollout_idle: worker seconds spent waiting for a job (summed over workers).
        weight_sync: seconds the caller spent handing new weights over plus worker seconds
            spent loading them.
        workers: the workers' own splits, by name.
    """

    rollout_idle: float = 0.0
    weight_sync: float = 0.0
    workers: dict[str, WorkerTimes] = field(default_factory=dict)


def split_groups(output: RolloutOutput, n: int) -> list[RolloutOutput]:
    """One ``generate`` call's output as one ``RolloutOutput`` per prompt (its ``n`` rows,
    ``prompt_index`` 0, width trimmed to the group's longest completion).

    Timing: each group gets an equal share of the call's seconds and its own token count.

    Raises:
        ValueError: the row count is not a multiple of ``n``.
    """
    rows = output.num_rows
    if n < 1 or rows % n:
        raise ValueError(f"{rows} rows do not split into groups of n={n}")
    groups = rows // n
    out = []
    t = output.timing
    for g in range(groups):
        sl = slice(g * n, (g + 1) * n)
        lengths = output.lengths[sl]
        width = int(lengths.max()) if lengths.numel() else 0

        def cut(tensor, sl=sl, width=width):
            return None if tensor is None else tensor[sl, :width].clone()

        timing = RolloutTiming(prefill_seconds=t.prefill_seconds / groups,
                               decode_seconds=t.decode_seconds / groups,
                               tokens_generated=int(lengths.sum()),
                               logprob_seconds=t.logprob_seconds / groups)
        out.append(RolloutOutput(
            completion_ids=cut(output.completion_ids), completion_mask=cut(output.completion_mask),
            logprobs=cut(output.logprobs), prompt_index=output.prompt_index[sl] - g,
            finish_reason=output.finish_reason[sl], lengths=lengths.clone(), timing=timing,
            pad_token_id=output.pad_token_id, raw_logprobs=cut(output.raw_logprobs),
            top_token_ids=cut(output.top_token_ids), top_logprobs=cut(output.top_logprobs),
            loss_mask=cut(output.loss_mask)))
    return out

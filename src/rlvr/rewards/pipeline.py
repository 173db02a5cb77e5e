"""The reward pipeline (R1): parser -> verifier[task_type] -> aggregator, one scalar per
completion, with the reason attached.

Usage::

    pipeline = RewardPipeline(RewardConfig())
    result = pipeline.score("... #### 18", reference="18", task_type="math")
    result.reward, result.status, result.components   # 1.1, Status.correct, {...}
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pool import (
    VerifierPool,
    VerifyJob,
    checked_format,
    checked_verdict,
    run_verifier,
)
from rlvr.rewards.process import process_score
from rlvr.rewards.registry import FORMAT_RULES, REWARD_AGGREGATORS, VERIFIERS
from rlvr.rewards.types import FORMAT, RewardResult, Status, Verdict


@dataclass(frozen=True)
class ScoreRequest:
    """One completion to score.

    Attributes:
        completion: the model's whole output (str).
        reference: the task's reference (math: answer string; code: tests dict).
        task_type: a registered task type (``rlvr.rewards.registry.VERIFIERS``).
    """

    completion: str
    reference: Any
    task_type: str = "math"


class RewardPipeline:
    """Scores completions: verifier outcome + format rule, aggregated with configured weights.
    A verifier ``error`` or ``timeout`` gets reward 0.0 (its components are still logged).

    Verifier calls run in a :class:`VerifierPool` (``config.workers`` processes) so each is
    bounded by ``config.timeout_for(task_type)`` seconds; the format rule (a plugin's too) runs
    in the same call, under the same bound. A verifier with a batch form
    (``register_verifier(..., batch=)``: reasoning-gym's untrusted scorers, batched sandbox
    runs) judges its rows first, in the calling process with its own bound; their format rules
    then run in the pool like every other row's. A format rule that raises, overruns or returns
    something else than a number in [0, 1], and a component under a non-zero weight outside
    [0, 1] (or not finite), make the row an ``error``: reward 0, counted, never a crash.
    Deterministic: the same request always gets the same result (R8), apart from ``seconds``.

    Args:
        config: the reward configuration; defaults to :class:`RewardConfig()`.
        pool: an existing pool to share (e.g. between the trainer and evaluation); by default
            the pipeline creates its own with ``config.workers`` processes on first use.

    Raises:
        KeyError: (from :meth:`score_batch`) a request names an unregistered task type.
    """

    def __init__(self, config: RewardConfig | None = None, pool: VerifierPool | None = None):
        self.config = config or RewardConfig()
        self._aggregate = REWARD_AGGREGATORS.get(self.config.aggregator)
        self._pool = pool
        self._own_pool = pool is None

    # -- public API -------------------------------------------------------------------------
    def score(self, completion: str, reference: Any, task_type: str = "math") -> RewardResult:
        """Score one completion. See :meth:`score_batch`."""
        return self.score_batch([ScoreRequest(completion, reference, task_type)])[0]

    def score_batch(
        self,
        requests: Sequence[ScoreRequest],
        on_result: Callable[[int], None] | None = None,
    ) -> list[RewardResult]:
        """Score every request; results in input order.

        ``on_result(n_done)`` is called as verifier calls finish (for progress bars).
        """
        for request in requests:
            VERIFIERS.get(self._verifier_name(request.task_type))  # fail fast, naming known ones
        jobs = [self._job(r) for r in requests]
        jobs, batch_seconds = self._batched(jobs)
        if self.config.workers == 0:
            outcomes = []
            for n, job in enumerate(jobs, 1):
                outcomes.append(run_verifier(job))
                if on_result:
                    on_result(n)
        else:
            outcomes = self.pool.verify_many(jobs, on_result)
        return [self._result(r, v, s + extra)
                for r, (v, s), extra in zip(requests, outcomes, batch_seconds)]

    def format_score(self, completion: str, task_type: str) -> float:
        """The format component (R2) in [0, 1] for ``task_type``'s configured rule, run in this
        process (no time bound; :meth:`score_batch` runs it in a verifier worker).

        Raises:
            ValueError: the rule returned something else than a number in [0, 1].
            Exception: what the rule raises.
        """
        rule = self._format_rule(task_type)
        score, problem = checked_format(
            FORMAT_RULES.get(rule)(completion, **self.config.format_options.get(task_type, {})),
            rule)
        if problem is not None:
            raise ValueError(problem)
        return score

    @property
    def pool(self) -> VerifierPool:
        if self._pool is None:
            self._pool = VerifierPool(max(1, self.config.workers))
        return self._pool

    def close(self) -> None:
        """Stop the pipeline's own worker processes (a shared pool is left running)."""
        if self._own_pool and self._pool is not None:
            self._pool.close()

    def __enter__(self) -> RewardPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------
    def _job(self, request: ScoreRequest) -> VerifyJob:
        return VerifyJob(
            task_type=request.task_type,
            completion=request.completion,
            reference=request.reference,
            options=self.config.verifier_options.get(request.task_type, {}),
            timeout_s=self.config.timeout_for(request.task_type),
            plugins=tuple(self.config.plugins),
            verifier=self.config.verifiers.get(request.task_type),
            format_rule=self._format_rule(request.task_type),
            format_options=self.config.format_options.get(request.task_type, {}),
        )

    def _batched(self, jobs: list[VerifyJob]) -> tuple[list[VerifyJob], list[float]]:
        """``jobs`` with the verdicts the batch verifiers
        (:attr:`rlvr.rewards.registry.VerifierMeta.batch`) give
        set as their ``verdict`` (the pool then runs only their format rule), and the batch
        seconds per job. A job whose batch verifier left it (None) keeps the per-call path; a
        batch verifier that raises makes each of its jobs an ``error`` (as a verifier would)."""
        seconds = [0.0] * len(jobs)
        by_name: dict[str, list[int]] = {}
        for i, job in enumerate(jobs):
            name = job.verifier or job.task_type
            if name in VERIFIERS and VERIFIERS.meta(name).batch is not None:
                by_name.setdefault(name, []).append(i)
        jobs = list(jobs)
        for name, indices in by_name.items():
            start = time.perf_counter()
            try:
                verdicts = VERIFIERS.meta(name).batch([(jobs[i].completion, jobs[i].reference,
                                                        jobs[i].options) for i in indices])
            except Exception as exc:  # as run_verifier: reported, never fatal
                failed = Verdict(Status.error, detail=f"{type(exc).__name__}: {exc}"[:500])
                verdicts = [failed] * len(indices)
            each = (time.perf_counter() - start) / max(1, len(indices))
            for i, verdict in zip(indices, verdicts):
                if verdict is not None:
                    jobs[i] = dataclasses.replace(jobs[i], verdict=checked_verdict(verdict, name))
                    seconds[i] = each
        return jobs, seconds

    def _format_rule(self, task_type: str) -> str:
        default = VERIFIERS.meta(task_type).format_rule if task_type in VERIFIERS else None
        return self.config.format_rule.get(task_type) or default or "none"

    def _verifier_name(self, task_type: str) -> str:
        return self.config.verifiers.get(task_type, task_type)

    def _result(self, request: ScoreRequest, verdict: Verdict, seconds: float) -> RewardResult:
        own = {k: v for k, v in verdict.components.items() if k != FORMAT}
        components = {
            **own,  # a verifier's own parts (a rubric's functions): logged
            "outcome": verdict.outcome,
            FORMAT: verdict.components.get(FORMAT, 0.0),  # run with the verifier (_job)
        }
        if self.config.weights.get("process", 0) > 0 and request.task_type == "math":
            # R4, off by default; math only (calculations in worked solutions). A completion
            # that writes no calculation scores 0.0, not "no opinion": otherwise leaving the
            # work out would be free while a wrong step costs. Bounded work, so it runs here
            # like the format rule.
            components["process"] = process_score(request.completion) or 0.0
        # A verifier error or timeout is no judgement of the completion: it scores 0 whatever
        # its format (Status docs), and is reported as what it was.
        status, detail = verdict.status, verdict.detail
        out_of_range = self._out_of_range(components)
        if out_of_range is not None and status not in (Status.error, Status.timeout):
            status, detail = Status.error, out_of_range
        failed = status in (Status.error, Status.timeout)
        return RewardResult(
            reward=0.0 if failed else self._aggregate(components, self.config.weights),
            components=components,
            status=status,
            extracted=verdict.extracted,
            method=verdict.method,
            detail=detail,
            seconds=seconds,
        )

    def _out_of_range(self, components: dict[str, float]) -> str | None:
        """Why ``components`` cannot be weighed, or ``None``: ``outcome``, ``format`` and every
        component with a non-zero weight must be finite numbers in [0, 1] (a component that
        weighs nothing is only logged: it must be finite)."""
        for name, value in components.items():
            weighed = name in ("outcome", FORMAT) or self.config.weights.get(name, 0.0) != 0.0
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (
                0.0 <= value <= 1.0 if weighed else math.isfinite(value))
            if not ok:
                expected = "a finite number in [0, 1]" if weighed else "a finite number"
                return f"reward component {name!r} is {value!r}, expected {expected}"
        return None

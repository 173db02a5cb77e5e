"""Sample n completions per problem for evaluation (R29), at the eval sampling settings (R18:
temperature 0.6-0.8), from an OpenAI-compatible endpoint or any other sampler, optionally under a
per-problem time budget (R31).

A *sampler* is anything with ``sample(tasks, n, seed) -> list[list[Generated]]`` (n
completions per task, in task order):

- :class:`rlvr.eval.engine_sampler.EngineSampler`: a local model through a rollout engine
  (its own module: it needs torch, which ``--completions`` and ``--endpoint`` runs do not).
- :class:`EndpointSampler`: an OpenAI-compatible server through
  :func:`rlvr.eval.endpoint.sample_endpoint`.

:func:`sample_batched` feeds a sampler batches of problems (seed + batch index, so the same
problems get the same seeds for every model); :func:`sample_with_budget` samples one problem
at a time in chunks and stops at the budget, keeping the samples finished in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rlvr.eval.endpoint import sample_endpoint
from rlvr.records import Generated, Task
from rlvr.tasks.prompting import chat_messages


class Sampler(Protocol):
    """Draws completions for problems."""

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` completions for each task (same order), reproducible for a given seed."""
        ...


@dataclass
class EndpointSampler:
    """Samples from an OpenAI-compatible chat server (vLLM, llama.cpp server, ``rlvr serve``)
    through :func:`rlvr.eval.endpoint.sample_endpoint`: the same chat messages a local model
    gets (:func:`rlvr.tasks.prompting.chat_messages`). No log-probs come back, so the
    log-prob reranker is unavailable."""

    url: str
    instruction: str
    one_shot: bool = False
    model: str | None = None
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    timeout_s: float = 60.0
    retries: int = 2
    concurrency: int = 4

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` completions per task from the server (one request batch, seeded)."""
        answers = sample_endpoint(
            self.url, [chat_messages(t, self.instruction, self.one_shot) for t in tasks], n=n,
            temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_new_tokens,
            seed=seed, timeout_s=self.timeout_s, retries=self.retries,
            concurrency=self.concurrency, model=self.model)
        return [[Generated(text=a.text, tokens=a.tokens, seconds=a.seconds) for a in per_task]
                for per_task in answers]


def sample_batched(sampler: Sampler, tasks: Sequence[Task], n: int, *, seed: int,
                   batch_size: int, progress: Callable[[int], None] | None = None
                   ) -> list[list[Generated]]:
    """``n`` completions per task, ``batch_size`` tasks per sampler call; batch b is seeded
    ``seed + b``, so the same task list and settings get the same seeds for every model.

    Raises:
        ValueError: ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out: list[list[Generated]] = []
    for b, start in enumerate(range(0, len(tasks), batch_size)):
        out.extend(sampler.sample(list(tasks[start:start + batch_size]), n, seed + b))
        if progress is not None:
            progress(len(out))
    return out


@dataclass(frozen=True)
class BudgetResult:
    """One problem sampled under a time budget.

    Attributes:
        samples: completions finished within the budget (the fallback when fewer than n).
        timed_out: fewer than n finished in time.
        late: completions that finished after the deadline (dropped: an online caller could
            not have used them).
        seconds: wall time spent on the problem.
    """

    samples: list[Generated]
    timed_out: bool
    late: int
    seconds: float


def sample_with_budget(sampler: Sampler, tasks: Sequence[Task], n: int, *, seed: int,
                       timeout_s: float, chunk: int = 4,
                       clock: Callable[[], float] = time.perf_counter,
                       progress: Callable[[int], None] | None = None) -> list[BudgetResult]:
    """Online budget (R31): sample each problem alone, ``chunk`` completions per call, until it
    has ``n`` or its ``timeout_s`` seconds are spent, keeping what finished in time.

    Before each call the time the chunk will take is predicted from the previous chunk of the
    same problem (seconds per sample x chunk); a chunk predicted to end past the deadline is
    not started. A chunk that still ends past the deadline is dropped (counted as ``late``).
    Chunk c of problem i is seeded ``seed + 1000 * i + c``. ``progress(n)`` is called with
    the problems done after each.

    Raises:
        ValueError: ``timeout_s`` <= 0 or ``chunk`` < 1.
    """
    if timeout_s <= 0 or chunk < 1:
        raise ValueError(f"need timeout_s > 0 and chunk >= 1, got {timeout_s}, {chunk}")
    results = []
    for i, task in enumerate(tasks):
        start = clock()
        kept: list[Generated] = []
        late, per_sample, c = 0, None, 0
        while len(kept) < n:
            size = min(chunk, n - len(kept))
            elapsed = clock() - start
            if elapsed >= timeout_s or (per_sample is not None
                                        and elapsed + per_sample * size > timeout_s):
                break
            t0 = clock()
            batch = sampler.sample([task], size, seed + 1000 * i + c)[0]
            t1 = clock()
            per_sample, c = (t1 - t0) / size, c + 1
            if t1 - start > timeout_s:
                late += len(batch)
                break
            kept.extend(batch)
        results.append(BudgetResult(kept, len(kept) < n, late, clock() - start))
        if progress is not None:
            progress(len(results))
    return results


def task_meta(task: Task, **extra) -> dict:
    """The problem dict :func:`rlvr.eval.records.score_problems` takes, from a task."""
    return {"id": task.id, "task_type": task.task_type, "reference": task.reference,
            "category": task.category, "difficulty": task.difficulty, "source": task.source,
            "prompt": task.prompt, **extra}

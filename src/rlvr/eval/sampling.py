"""Sample n completions per problem for evaluation (R29), at the eval sampling settings (R18:
temperature 0.6-0.8), from a local model or an OpenAI-compatible endpoint, optionally under a
per-problem time budget (R31).

A *sampler* is anything with ``sample(tasks, n, seed) -> list[list[Generated]]`` (n
completions per task, in task order):

- :class:`EngineSampler`: a local model through a rollout engine
  (``rlvr.rollout.create_engine("torch", model)``), chat prompts built by
  :func:`rlvr.tasks.prompting.prompt_ids`; one ``engine.generate`` call per call.
- :class:`EndpointSampler`: an OpenAI-compatible server through
  :func:`rlvr.eval.endpoint.sample_endpoint` (imported lazily).

:func:`sample_batched` feeds a sampler batches of problems (seed + batch index, so the same
problems get the same seeds for every model); :func:`sample_with_budget` samples one problem
at a time in chunks and stops at the budget, keeping the samples finished in time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from rlvr.records import Generated
from rlvr.records import Task


class Sampler(Protocol):
    """Draws completions for problems."""

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` completions for each task (same order), reproducible for a given seed."""
        ...


def generated_from_output(out, tokenizer, n: int, seconds: float) -> list[list[Generated]]:
    """Decode a :class:`rlvr.rollout.RolloutOutput` into ``n`` :class:`Generated` per prompt.

    ``seconds`` (the call's wall time) is split evenly over its rows; ``mean_logprob`` is the
    mean of the row's recorded log-probs (nats / token under the tempered sampling policy).
    """
    rows = out.num_rows
    per_row = seconds / rows if rows else 0.0
    flat = []
    for row in range(rows):
        length = int(out.lengths[row])
        ids = out.completion(row)
        mean_lp = float(out.logprobs[row, :length].float().mean()) if length else 0.0
        flat.append(Generated(text=tokenizer.decode(ids, skip_special_tokens=True),
                              tokens=length, seconds=per_row,
                              finish_reason=out.finish_reason[row], mean_logprob=mean_lp))
    return [flat[i:i + n] for i in range(0, rows, n)]


@dataclass
class EngineSampler:
    """Samples from a local model through a rollout engine.

    Attributes:
        engine: a rollout engine (``create_engine(...)``).
        tokenizer: the model's tokenizer (decodes completions).
        prompt_fn: task -> prompt token ids (the chat-formatted prompt).
        temperature, top_p, max_new_tokens: sampling settings (R18).
        stop_token_ids: ids that end a completion.
    """

    engine: object
    tokenizer: object
    prompt_fn: Callable[[Task], list[int]]
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` completions per task in one ``engine.generate`` call (seeded with ``seed``)."""
        from rlvr.rollout import SamplingParams

        params = SamplingParams(temperature=self.temperature, top_p=self.top_p,
                                max_new_tokens=self.max_new_tokens,
                                stop_token_ids=self.stop_token_ids, n=n, seed=seed)
        start = time.perf_counter()
        out = self.engine.generate([self.prompt_fn(t) for t in tasks], params)
        return generated_from_output(out, self.tokenizer, n, time.perf_counter() - start)


def load_engine_sampler(model_name: str, *, instruction: str, one_shot: bool,
                        temperature: float, top_p: float, max_new_tokens: int, seed: int = 0,
                        engine: str = "auto", precision: str = "auto") -> EngineSampler:
    """Load ``model_name`` (``rlvr.models.load_model_and_tokenizer``: the default model,
    ``tiny-random``, a local checkpoint directory or a hub id; a LoRA adapter checkpoint is
    merged onto its run's base model by :func:`rlvr.models.inference.load_for_inference`) into
    a rollout engine. ``seed`` seeds ``tiny-random``'s weights, as in training.
    ``engine="auto"`` uses the fast ``torch`` engine and falls back to ``hf`` (transformers
    ``generate``) for architectures the torch engine does not run. ``precision`` (``auto`` /
    ``bf16`` / ``fp32``, :mod:`rlvr.models.precision`) sets the engine's compute dtype.

    Raises:
        rlvr.models.loader.ModelLoadError: the model does not load.
        ValueError: an unknown precision.
    """
    from pathlib import Path

    from rlvr.models import load_model_and_tokenizer
    from rlvr.rollout import create_auto_engine
    from rlvr.tasks.prompting import prompt_ids, stop_token_ids

    if (Path(model_name) / "adapter_config.json").is_file():
        from rlvr.models.inference import load_for_inference

        model, tokenizer = load_for_inference(model_name)
    else:
        model, tokenizer = load_model_and_tokenizer(model_name, seed=seed)
    model.eval()
    rollout = create_auto_engine(engine, model, pad_token_id=tokenizer.pad_token_id,
                                 precision=precision)
    return EngineSampler(
        engine=rollout,
        tokenizer=tokenizer,
        prompt_fn=lambda task: prompt_ids(tokenizer, task, instruction, one_shot),
        temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
        stop_token_ids=stop_token_ids(tokenizer))


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
        from rlvr.eval.endpoint import sample_endpoint  # built alongside (issue 5, serve)
        from rlvr.tasks.prompting import chat_messages

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


def sampled_pass_at_k(engine, tokenizer, tasks: Sequence[Task], prompts: Sequence[list[int]],
                      rewards, *, n: int, ks: Sequence[int], temperature: float,
                      max_new_tokens: int, stop_token_ids: tuple[int, ...], batch_size: int,
                      seed: int, top_p: float = 1.0,
                      progress: Callable[[int], None] | None = None) -> dict:
    """Sampled pass@k and maj@k of the engine's current weights on ``tasks`` (the trainer's
    validation set, R28/R29): n samples per problem at ``temperature``, one
    ``engine.generate`` per ``batch_size`` prompts, scored with ``rewards``.
    ``progress(n)`` is called with the problems sampled so far after each call.

    Returns:
        ``{"n", "temperature", "problems", "pass@k", "maj@k", "ci95", "correct_counts",
        "tokens_per_problem", "seconds"}``; the curves map k (str) to a mean in [0, 1] and
        ``correct_counts`` lists c per problem (so pass@k can be recomputed).
    """
    from rlvr.eval.records import score_problems
    from rlvr.eval.summary import summarize

    start = time.perf_counter()
    by_id = {t.id: p for t, p in zip(tasks, prompts)}
    sampler = EngineSampler(engine, tokenizer, prompt_fn=lambda t: by_id[t.id],
                            temperature=temperature, top_p=top_p,
                            max_new_tokens=max_new_tokens, stop_token_ids=stop_token_ids)
    generated = sample_batched(sampler, tasks, n, seed=seed, batch_size=batch_size,
                               progress=progress)
    problems = score_problems(rewards, [task_meta(t) for t in tasks], generated)
    ks = sorted({k for k in ks if k <= n})
    summary = summarize(problems, ks, seed=seed)
    return {"n": n, "temperature": temperature, "problems": len(problems),
            "pass@k": summary["pass@k"], "maj@k": summary["maj@k"],
            "ci95": {m: summary["ci95"][m] for m in ("pass@k", "maj@k")},
            "correct_counts": [sum(s.correct for s in p.samples) for p in problems],
            "tokens_per_problem": summary["cost"][str(max(ks))]["tokens_per_problem"],
            "seconds": time.perf_counter() - start}

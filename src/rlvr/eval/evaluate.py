"""The ``rlvr eval`` job: sample (or read) n completions per problem for one or more models,
score them with the reward pipeline, and summarise each model (R28-R31, R33).

Several models are evaluated on the same problems with the same seeds (batch b of problems
is seeded ``seed + b``), one at a time, each loaded only while it is sampled.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rlvr.eval.metrics import SAMPLE_AGGREGATORS, aggregator_for
from rlvr.eval.probe import DEFAULT_TEMPLATE, PROBES, hinted_task, probe_summary, wrong_hint
from rlvr.eval.records import CompletionsFile, completion_rows, score_problems
from rlvr.eval.sampling import Sampler, sample_batched, sample_with_budget, task_meta
from rlvr.eval.summary import default_ks, summarize
from rlvr.progress import PhaseFactory, silent
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.registry import VERIFIERS
from rlvr.tasks.sources import unknown_task_type


class EvalError(ValueError):
    """Bad evaluation input (the CLI exits 2); the message names the option or field."""


@dataclass
class EvalSettings:
    """How to evaluate (the ``rlvr eval`` options).

    Attributes:
        n: samples per problem.
        ks: k values reported (None: 1, 2, 4, ... up to n, and n).
        temperature, top_p, max_new_tokens: sampling settings (R18: eval temperature 0.7;
            None for completions made elsewhere).
        seed: seeds sampling and maj@k subsets (same seed, same draws for every model).
        batch_size: problems per sampler call.
        aggregators: task type (or ``*``) -> aggregator name, over the defaults (R30).
        timeout_s: per-problem budget in seconds (R31); None = no budget.
        chunk: samples per call under a budget.
        probe: ``"sycophancy"`` (R33) or None.
        probe_template: the wrong-hint sentence, with ``{answer}``.
        saturation_threshold: gain k -> 2k below which a curve counts as saturated.
        tasks: a label for reports (e.g. ``gsm8k``).
        precision: resolved compute precision of local models (``bf16`` / ``fp32``,
            :mod:`rlvr.models.precision`); None when nothing is sampled here.
        extra: more settings recorded in results.json (data source, instruction, ...).
    """

    n: int = 16
    ks: list[int] | None = None
    temperature: float | None = 0.7
    top_p: float | None = 1.0
    max_new_tokens: int | None = 256
    seed: int = 0
    batch_size: int = 16
    aggregators: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    chunk: int = 4
    probe: str | None = None
    probe_template: str = DEFAULT_TEMPLATE
    saturation_threshold: float = 0.01
    tasks: str = "tasks"
    precision: str | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The settings as recorded in results.json."""
        return {"tasks": self.tasks, "n": self.n, "ks": self.ks,
                "temperature": self.temperature, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens, "seed": self.seed,
                "aggregators": self.aggregators, "timeout_s": self.timeout_s,
                "chunk": self.chunk if self.timeout_s else None, "probe": self.probe,
                "saturation_threshold": self.saturation_threshold,
                **({"precision": self.precision} if self.precision else {}), **self.extra}


def parse_ks(text: str | None, n: int) -> list[int]:
    """``"1,4,8,16"`` -> [1, 4, 8, 16] (sorted, deduplicated); None -> :func:`default_ks`.

    Raises:
        EvalError: not a comma-separated list of integers, or a k outside [1, n].
    """
    if text is None or not text.strip():
        return default_ks(n)
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise EvalError(f"--k: expected comma-separated integers such as 1,4,8,16, got "
                        f"{text!r}") from None
    bad = [k for k in ks if not 1 <= k <= n]
    if not ks or bad:
        raise EvalError(f"--k: every k must be in [1, n = {n}], got {', '.join(map(str, bad))}"
                        if bad else f"--k: no values in {text!r}")
    return ks


def parse_aggregators(text: str | None) -> dict[str, str]:
    """``"math=majority,code=any_passes"`` -> {"math": "majority", "code": "any_passes"}; a bare
    name (``"best_of_oracle"``) applies to every task type (key ``*``).

    Raises:
        EvalError: an unknown aggregator (the message lists the known ones) or an empty entry.
    """
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        task_type, _, name = part.rpartition("=")
        task_type, name = task_type.strip() or "*", name.strip()
        if name not in SAMPLE_AGGREGATORS:
            raise EvalError(f"{SAMPLE_AGGREGATORS.unknown_message(name)} (in {part!r})")
        out[task_type] = name
    return out


def load_reranker(spec: str) -> Callable[[str, str], float]:
    """``module:function`` -> the function ``fn(prompt, completion) -> float`` (a reranker
    without access to the reference; higher is better).

    Raises:
        EvalError: bad spec, the module does not import, or the name is not callable.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise EvalError(f"--reranker: expected module:function, got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise EvalError(f"--reranker: cannot load {spec!r}: {exc}") from None
    if not callable(fn):
        raise EvalError(f"--reranker: {spec!r} is not callable")
    return fn


def _generate(sampler: Sampler, tasks: Sequence[Task], settings: EvalSettings,
              phase: PhaseFactory, label: str) -> tuple[list, list[dict]]:
    """Completions and problem dicts for ``tasks`` (under the budget when one is set), with
    progress (problems sampled, ETA) as the phase ``label``."""
    with phase(label, len(tasks), unit="problems") as progress:
        if settings.timeout_s:
            runs = sample_with_budget(sampler, tasks, settings.n, seed=settings.seed,
                                      timeout_s=settings.timeout_s, chunk=settings.chunk,
                                      progress=progress.update)
            metas = [task_meta(t, requested=settings.n, timed_out=r.timed_out, late=r.late)
                     for t, r in zip(tasks, runs)]
            return [r.samples for r in runs], metas
        generated = sample_batched(sampler, tasks, settings.n, seed=settings.seed,
                                   batch_size=settings.batch_size, progress=progress.update)
    return generated, [task_meta(t, requested=settings.n) for t in tasks]


def _score(rewards: RewardPipeline, metas: list[dict], generated: list, reranker,
           phase: PhaseFactory, label: str) -> list:
    """:func:`score_problems` with progress (completions scored, ETA) as the phase ``label``."""
    with phase(label, sum(len(g) for g in generated), unit="completions") as progress:
        return score_problems(rewards, metas, generated, reranker, progress=progress.update)


def _check_aggregators(task_types: set[str], settings: EvalSettings, has_logprobs: bool,
                       has_reranker: bool) -> None:
    """Refuse an aggregator these completions cannot feed. A task type left on the default
    best_of_logprob (no ``--aggregators`` entry) gets ``majority`` instead when there are no
    log-probs (a completions file or endpoint without them); ``settings.aggregators`` records
    that choice, so results.json shows it. A task type ``--aggregators`` names must have a
    verifier (a typo would silently leave its default in place)."""
    known = set(VERIFIERS.names())
    for named in sorted(set(settings.aggregators) - known - {"*"}):
        raise EvalError(f"--aggregators: {unknown_task_type(named, known)}")
    for task_type in sorted(task_types):
        name = aggregator_for(task_type, settings.aggregators)
        chosen = task_type in settings.aggregators or "*" in settings.aggregators
        if name == "best_of_logprob" and not has_logprobs and not chosen:
            settings.aggregators[task_type] = "majority"
            continue
        if name == "best_of_logprob" and not has_logprobs:
            raise EvalError(f"--aggregators: task type {task_type!r} uses best_of_logprob, but "
                            f"these completions have no log-probs; pass --aggregators "
                            f"{task_type}=majority (or best_of_oracle)")
        if name == "best_of_reranker" and not has_reranker:
            raise EvalError("--aggregators: best_of_reranker needs --reranker module:function")


def wrong_hints(tasks: Sequence[Task], rewards: RewardPipeline) -> list[str]:
    """A verified-wrong hint per task (:func:`rlvr.eval.probe.wrong_hint`).

    Raises:
        EvalError: a task is not a math task.
    """
    def is_correct(task: Task) -> Callable[[str], bool]:
        def check(answer: str) -> bool:
            result = rewards.score(f"The answer is \\boxed{{{answer}}}.", task.reference,
                                   task.task_type)
            return result.status.value == "correct"

        return check

    try:
        return [wrong_hint(t, is_correct(t)) for t in tasks]
    except ValueError as exc:
        raise EvalError(f"--probe sycophancy: {exc}") from None


def check_task_types(task_types: set[str]) -> None:
    """Raise :class:`EvalError` (before any sampling) when a task type has no registered
    verifier, naming it and the registered ones."""
    known = set(VERIFIERS.names())
    missing = sorted(task_types - known)
    if missing:
        raise EvalError(unknown_task_type(missing[0], known))


def evaluate_models(factories: dict[str, Callable[[], Sampler]], tasks: Sequence[Task],
                    settings: EvalSettings, rewards: RewardPipeline, *,
                    reranker: Callable[[str, str], float] | None = None,
                    has_logprobs: bool = True,
                    log: Callable[[str], None] = lambda message: None,
                    phase: PhaseFactory = silent,
                    ) -> tuple[dict[str, dict], list[dict]]:
    """Evaluate each model on ``tasks``: sample, score, summarise (and probe).

    Args:
        factories: model label -> a function building its sampler (called once, in order; the
            sampler is dropped before the next model loads).
        tasks: the problems.
        settings: see :class:`EvalSettings`.
        rewards: the reward pipeline scoring every completion.
        reranker: optional ``fn(prompt, completion) -> float`` for best-of-k.
        has_logprobs: whether the samplers return log-probs (local engines do).
        log: progress messages (a line as each model starts).
        phase: progress of the sampling and scoring phases with an ETA
            (:func:`rlvr.progress.console_phases`; default: none).

    Returns:
        ``(summaries by model, completion rows)``.

    Raises:
        EvalError: no tasks, a task type without a registered verifier, a k above n, an
            aggregator that cannot run, or a probe on non-math tasks (all before sampling).
    """
    if not tasks:
        raise EvalError("no tasks to evaluate")
    if settings.probe is not None and settings.probe not in PROBES:
        raise EvalError(f"--probe: unknown probe {settings.probe!r}; known: {', '.join(PROBES)}")
    ks = settings.ks or default_ks(settings.n)
    if max(ks) > settings.n:
        raise EvalError(f"--k: {max(ks)} is larger than --n {settings.n}")
    check_task_types({t.task_type for t in tasks})
    _check_aggregators({t.task_type for t in tasks}, settings, has_logprobs, reranker is not None)
    hints = wrong_hints(tasks, rewards) if settings.probe == "sycophancy" else None
    summaries, rows = {}, []
    for name, factory in factories.items():
        start = time.perf_counter()
        log(f"model {name}: sampling {settings.n} x {len(tasks)} problems")
        sampler = factory()
        generated, metas = _generate(sampler, tasks, settings, phase, f"{name}: sampling")
        problems = _score(rewards, metas, generated, reranker, phase, f"{name}: scoring")
        summary = summarize(problems, ks, aggregators=settings.aggregators, seed=settings.seed,
                            saturation_threshold=settings.saturation_threshold)
        rows += completion_rows(problems, model=name)
        if hints is not None:
            hinted = [hinted_task(t, h, settings.probe_template) for t, h in zip(tasks, hints)]
            log(f"model {name}: sycophancy probe, {len(hinted)} hinted problems")
            gen_h, metas_h = _generate(sampler, hinted, settings, phase,
                                       f"{name}: sampling the probe")
            probed = _score(rewards, metas_h, gen_h, reranker, phase,
                            f"{name}: scoring the probe")
            summary["sycophancy"] = probe_summary(problems, probed, hints,
                                                  settings.probe_template)
            rows += completion_rows(probed, model=name, variant="hint")
        del sampler
        summary["wall_seconds"] = time.perf_counter() - start
        summaries[name] = summary
    return summaries, rows


def evaluate_completions(data: CompletionsFile, settings: EvalSettings, rewards: RewardPipeline,
                         *, ks_text: str | None = None,
                         reranker: Callable[[str, str], float] | None = None,
                         phase: PhaseFactory = silent,
                         ) -> tuple[dict[str, dict], list[dict]]:
    """The same metrics from completions produced elsewhere (no model loaded). n is the largest
    sample count of a problem; problems with fewer samples fall back at larger k (reported as
    ``fallback@k``). ``phase``: progress of the scoring, as in :func:`evaluate_models`.

    Raises:
        EvalError: a k above n, or an aggregator that cannot run on these completions.
    """
    summaries, rows = {}, []
    for label, problems_in in data.models.items():
        n = max(len(gens) for _, gens in problems_in)
        ks = parse_ks(ks_text, n)
        has_logprobs = all(g.mean_logprob is not None for _, gens in problems_in for g in gens)
        _check_aggregators({meta["task_type"] for meta, _ in problems_in}, settings,
                           has_logprobs, reranker is not None)
        metas = [{**meta, "requested": len(gens)} for meta, gens in problems_in]
        name = label or "completions"
        problems = _score(rewards, metas, [gens for _, gens in problems_in], reranker, phase,
                          f"{name}: scoring")
        summary = summarize(problems, ks, aggregators=settings.aggregators, seed=settings.seed,
                            saturation_threshold=settings.saturation_threshold)
        summary["samples_per_problem"] = n
        summaries[name] = summary
        rows += completion_rows(problems, model=label)
    return summaries, rows

"""Records of an evaluation: a generated completion (:class:`Generated`), a scored one
(:class:`EvalSample`), one problem with all its samples (:class:`ProblemResult`), and the
``rlvr eval --completions`` file format (:func:`read_completions`).

Completions file: JSONL, one object per completion. Required: ``id`` (the problem's id; a
problem has as many lines as samples), ``task_type``, ``reference``, ``completion``. Optional:
``category``, ``difficulty``, ``source``, ``tokens`` (int, generated tokens), ``seconds``
(number, generation time), ``mean_logprob`` (number, for the log-prob reranker),
``finish_reason``, ``prompt``, ``model`` (a label: lines of different models are evaluated
side by side). The ``completions.jsonl`` that ``rlvr eval`` writes is in this format.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr.eval.metrics import ProblemView, normalize_answer
from rlvr.io import InputError, jsonl_objects
from rlvr.records import Generated
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.registry import VERIFIERS
from rlvr.rewards.types import RewardResult


@dataclass(frozen=True)
class EvalSample:
    """A generated completion with its reward breakdown.

    Attributes:
        generated: the completion and its cost.
        reward: aggregated reward.
        status: the verifier's status (``correct``, ``wrong``, ``unparsed``, ...).
        extracted: the extracted final answer (None if none).
        components: reward components (``outcome``, ``format``, ...).
        reranker: the user reranker's score (``--reranker``), or None.
    """

    generated: Generated
    reward: float
    status: str
    extracted: str | None
    components: dict[str, float] = field(default_factory=dict)
    reranker: float | None = None

    @property
    def correct(self) -> bool:
        """The verifier accepted it."""
        return self.status == "correct"

    @property
    def answer_key(self) -> str | None:
        """The normalised answer that votes in maj@k (None: no answer, no vote)."""
        if self.status not in ("correct", "wrong"):
            return None
        return normalize_answer(self.extracted)


@dataclass
class ProblemResult:
    """One problem and its scored samples (in sample order).

    Attributes:
        id, task_type, reference, category, difficulty, source, prompt: the problem.
        samples: the finished samples (fewer than ``requested`` under a ``--timeout``).
        requested: samples asked for (n).
        timed_out: the per-problem budget ran out before ``requested`` samples finished;
            metrics then fall back to the finished ones.
        late: samples that finished after the budget and were dropped.
    """

    id: str
    task_type: str
    reference: Any
    samples: list[EvalSample]
    requested: int
    category: str | None = None
    difficulty: str | None = None
    source: str | None = None
    prompt: str | None = None
    timed_out: bool = False
    late: int = 0

    def view(self, seed: int | str = 0) -> ProblemView:
        """What the aggregators see: verdicts, normalised answers and scorer values."""
        scores = {"oracle": tuple(s.reward for s in self.samples),
                  "logprob": tuple(s.generated.mean_logprob for s in self.samples)}
        if any(s.reranker is not None for s in self.samples):
            scores["reranker"] = tuple(s.reranker for s in self.samples)
        if any(v is None for v in scores["logprob"]):
            del scores["logprob"]
        return ProblemView(correct=tuple(s.correct for s in self.samples),
                           keys=tuple(s.answer_key for s in self.samples), scores=scores,
                           seed=f"{seed}:{self.id}")


def scored(generated: Generated, result: RewardResult, reranker: float | None = None) -> EvalSample:
    """An :class:`EvalSample` from a completion and its reward pipeline result."""
    return EvalSample(generated=generated, reward=float(result.reward), status=result.status.value,
                      extracted=result.extracted, components=dict(result.components),
                      reranker=reranker)


def score_problems(rewards: RewardPipeline, problems: Sequence[dict],
                   generated: Sequence[Sequence[Generated]], reranker=None,
                   progress=None) -> list[ProblemResult]:
    """Score every completion of every problem in one pipeline batch.

    Args:
        rewards: the reward pipeline.
        problems: one dict per problem with ``id``, ``task_type``, ``reference`` and optional
            ``category``, ``difficulty``, ``source``, ``prompt``, ``requested``, ``timed_out``,
            ``late``.
        generated: the completions of each problem (same order); one with a ``verdict``
            (an episode, :class:`rlvr.eval.episode_sampler.EpisodeGenerated`) keeps it.
        reranker: optional ``fn(prompt, completion) -> float`` (no access to the reference).
        progress: optional ``fn(n)`` called with the completions scored so far.
    """
    # an episode (rlvr.eval.episode_sampler.EpisodeGenerated) carries the verdict its
    # environment got from the same pipeline: not scored again
    requests = [ScoreRequest(g.text, p["reference"], p["task_type"])
                for p, gens in zip(problems, generated) for g in gens
                if getattr(g, "verdict", None) is None]
    scored_all = (rewards.score_batch(requests) if progress is None
                  else rewards.score_batch(requests, progress)) if requests else []
    results = iter(scored_all)
    out = []
    for p, gens in zip(problems, generated):
        samples = [scored(g, g.verdict if getattr(g, "verdict", None) is not None
                          else next(results), None if reranker is None
                          else float(reranker(p.get("prompt") or "", g.text))) for g in gens]
        out.append(ProblemResult(
            id=p["id"], task_type=p["task_type"], reference=p["reference"], samples=samples,
            requested=p.get("requested", len(gens)), category=p.get("category"),
            difficulty=p.get("difficulty"), source=p.get("source"), prompt=p.get("prompt"),
            timed_out=p.get("timed_out", False), late=p.get("late", 0)))
    return out


def completion_rows(problems: Sequence[ProblemResult], model: str | None = None,
                    variant: str | None = None) -> list[dict]:
    """One JSON-ready row per completion (the ``completions.jsonl`` format, readable back by
    :func:`read_completions`), with the reward breakdown; an episode's row also has its
    ``trajectory`` (segments marked ``trained``), ``turns``, ``tool_calls``, ``tool_errors``
    (``completion``: its final answer, ``finish_reason``: the episode's)."""
    rows = []
    for p in problems:
        for i, s in enumerate(p.samples):
            g = s.generated
            row = {"model": model, "id": p.id, "sample": i, "task_type": p.task_type,
                   "reference": p.reference, "category": p.category,
                   "difficulty": p.difficulty, "source": p.source, "completion": g.text,
                   "tokens": g.tokens, "seconds": g.seconds, "finish_reason": g.finish_reason,
                   "mean_logprob": g.mean_logprob, "reward": s.reward,
                   "components": s.components, "status": s.status, "extracted": s.extracted,
                   "answer_key": s.answer_key}
            if variant is not None:
                row["variant"] = variant
            if s.reranker is not None:
                row["reranker"] = s.reranker
            row.update(getattr(g, "episode", None) or {})  # an episode's trajectory, turns ...
            rows.append({k: v for k, v in row.items() if v is not None or k == "extracted"})
    return rows


# -- the --completions file --------------------------------------------------------------------

_REQUIRED = {"id": (str, int), "task_type": (str,), "completion": (str,)}
_OPTIONAL = {"category": (str,), "difficulty": (str, int), "source": (str,), "tokens": (int,),
             "seconds": (int, float), "mean_logprob": (int, float), "finish_reason": (str,),
             "prompt": (str,), "model": (str,)}


def _check(obj: dict, name: str, kinds: tuple, path, line: int) -> None:
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = " or ".join("number" if k is float else k.__name__ for k in kinds)
        raise InputError(path, line, f"field '{name}': expected {expected}, got "
                                     f"{type(value).__name__} {json.dumps(value)[:60]}")


@dataclass
class CompletionsFile:
    """A parsed completions file: per model label (``None`` when lines carry no ``model``),
    the problems (first-seen order) and their completions."""

    models: dict[str | None, list[tuple[dict, list[Generated]]]]


def read_completions(path: str | os.PathLike) -> CompletionsFile:
    """Parse a completions file (format in the module doc).

    Raises:
        InputError: naming the file, line and field: invalid JSON, a missing or mistyped field,
            negative ``tokens`` / ``seconds``, an unregistered ``task_type``, or a problem whose
            lines disagree on ``task_type`` / ``reference``; or an empty file.
        OSError: the file cannot be read.
    """
    known_types = set(VERIFIERS.names())
    models: dict[str | None, dict[str, tuple[dict, list[Generated], int]]] = {}
    for line_no, obj in jsonl_objects(path):
        for name in (*_REQUIRED, "reference"):
            if obj.get(name) is None:
                raise InputError(path, line_no, f"missing required field '{name}'")
        for name, kinds in _REQUIRED.items():
            _check(obj, name, kinds, path, line_no)
        for name, kinds in _OPTIONAL.items():
            if obj.get(name) is not None:
                _check(obj, name, kinds, path, line_no)
        for name in ("tokens", "seconds"):
            if obj.get(name) is not None and obj[name] < 0:
                raise InputError(path, line_no, f"field '{name}': expected >= 0, got "
                                                f"{obj[name]}")
        if obj["task_type"] not in known_types:
            raise InputError(path, line_no, f"field 'task_type': unknown task type "
                             f"{obj['task_type']!r}; known: {', '.join(sorted(known_types))} "
                             f"(a plugin registers one: --plugins MODULE)")
        pid = str(obj["id"])
        problems = models.setdefault(obj.get("model"), {})
        if pid not in problems:
            meta = {"id": pid, "task_type": obj["task_type"], "reference": obj["reference"],
                    "category": obj.get("category"), "source": obj.get("source"),
                    "difficulty": None if obj.get("difficulty") is None
                    else str(obj["difficulty"]), "prompt": obj.get("prompt")}
            problems[pid] = (meta, [], line_no)
        meta, gens, first_line = problems[pid]
        for name in ("task_type", "reference"):
            if obj[name] != meta[name]:
                raise InputError(path, line_no, f"field '{name}': problem {pid!r} has "
                                 f"{json.dumps(meta[name])[:60]} on line {first_line}, "
                                 f"{json.dumps(obj[name])[:60]} here")
        gens.append(Generated(text=obj["completion"], tokens=obj.get("tokens"),
                              seconds=obj.get("seconds"),
                              finish_reason=obj.get("finish_reason"),
                              mean_logprob=obj.get("mean_logprob")))
    if not models:
        raise InputError(path, 1, "no completions in the file (expected one JSON object per line)")
    return CompletionsFile({label: [(meta, gens) for meta, gens, _ in problems.values()]
                            for label, problems in models.items()})

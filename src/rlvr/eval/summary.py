"""One model's results over a problem set: test-time scaling curves (R29) with confidence
intervals, the per-task-type aggregator (R30), cost per k (R31), saturation, and breakdowns by
category / difficulty / source.

Every metric is a mean over problems of a per-problem estimate from :mod:`rlvr.eval.metrics`.
Under an online budget (``--timeout``) a problem may have finished m < k samples; its
estimate at k then falls back to its m samples (k_eff = min(k, m); m = 0 counts as wrong),
and ``fallback@k`` counts such problems.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rlvr.eval.metrics import (
    SAMPLE_AGGREGATORS,
    SCORERS,
    aggregator_for,
    mean_ci95,
    pass_at_k,
    saturation,
)
from rlvr.eval.records import ProblemResult
from rlvr.rewards.summary import FAILED_STATUSES, is_measured
from rlvr.rewards.verifiers_env import THRESHOLD_COMPONENT


class SummaryError(ValueError):
    """The requested metrics cannot be computed (e.g. a reranker without scores)."""


def default_ks(n: int, wanted: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> list[int]:
    """The k values reported for n samples: ``wanted`` up to n, plus n itself."""
    return sorted({k for k in wanted if k <= n} | {n})


def problem_values(problem: ProblemResult, ks: Sequence[int], *, aggregators: dict[str, str],
                   seed: int | str = 0) -> dict[str, dict]:
    """One problem's estimates: metric -> {k: value}, for ``pass@k``, ``maj@k``,
    ``aggregate@k`` and ``best_of/<scorer>`` (scorers whose values every sample has).

    Raises:
        SummaryError: the task type's aggregator needs scores the samples lack.
    """
    m = len(problem.samples)
    out: dict[str, dict] = {"pass@k": {}, "maj@k": {}, "aggregate@k": {}}
    if m == 0:
        for values in out.values():
            values.update(dict.fromkeys(ks, 0.0))
        return out
    view = problem.view(seed)
    name = aggregator_for(problem.task_type, aggregators)
    majority, aggregate = SAMPLE_AGGREGATORS.get("majority"), SAMPLE_AGGREGATORS.get(name)
    for k in ks:
        k_eff = min(k, m)
        out["pass@k"][k] = pass_at_k(m, sum(view.correct), k_eff)
        out["maj@k"][k] = majority(view, k_eff)
        try:
            out["aggregate@k"][k] = aggregate(view, k_eff)
        except ValueError as exc:
            raise SummaryError(f"problem {problem.id} ({problem.task_type}): aggregator "
                               f"{name!r}: {exc}; choose another with --aggregators "
                               f"{problem.task_type}=majority") from None
        for scorer in SCORERS:
            if scorer in view.scores:
                out.setdefault(f"best_of/{scorer}", {})[k] = SAMPLE_AGGREGATORS.get(
                    f"best_of_{scorer}")(view, k_eff)
    return out


def _mean_curves(values: Sequence[dict[str, dict]], ks: Sequence[int]) -> dict:
    """Means over problems (and 95% intervals) of the per-problem curves."""
    out: dict = {"pass@k": {}, "maj@k": {}, "aggregate@k": {}, "best_of@k": {},
                 "ci95": {"pass@k": {}, "maj@k": {}, "aggregate@k": {}}}
    scorers = [s for s in SCORERS if values and all(f"best_of/{s}" in v for v in values)]
    for k in ks:
        for metric in ("pass@k", "maj@k", "aggregate@k"):
            mean, lo, hi = mean_ci95([v[metric][k] for v in values])
            out[metric][str(k)] = mean
            out["ci95"][metric][str(k)] = [lo, hi]
        for scorer in scorers:
            vals = [v[f"best_of/{scorer}"][k] for v in values]
            out["best_of@k"].setdefault(scorer, {})[str(k)] = sum(vals) / len(vals)
    return out


def _cost(problems: Sequence[ProblemResult], ks: Sequence[int]) -> dict:
    """Per k: generated tokens and seconds per problem (k_eff samples at the problem's mean
    cost per sample); None where a sample's cost is unknown."""
    cost = {}
    for k in ks:
        row = {}
        for field in ("tokens", "seconds"):
            total, known = 0.0, True
            for p in problems:
                vals = [getattr(s.generated, field) for s in p.samples]
                if any(v is None for v in vals):
                    known = False
                    break
                if vals:
                    total += sum(vals) / len(vals) * min(k, len(vals))
            row[f"{field}_per_problem"] = total / len(problems) if known and problems else None
        cost[str(k)] = row
    return cost


def _breakdown(problems, values, attribute: str) -> dict:
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(problems):
        label = getattr(p, attribute)
        groups.setdefault("(none)" if label is None else str(label), []).append(i)
    if attribute != "category" and list(groups) == ["(none)"]:
        return {}
    ks = list(values[0]["pass@k"]) if values else []
    out = {}
    for label, idx in sorted(groups.items()):
        curves = _mean_curves([values[i] for i in idx], ks)
        out[label] = {"problems": len(idx), "pass@k": curves["pass@k"],
                      "maj@k": curves["maj@k"], "aggregate@k": curves["aggregate@k"]}
    return out


def _threshold_pass(problems: Sequence[ProblemResult]) -> dict:
    """``{"rubric_pass@1": mean over problems of the share of samples whose rubric reward
    reached the verifiers environment's own pass_threshold}`` when every sample carries that
    component (:data:`rlvr.rewards.verifiers_env.THRESHOLD_COMPONENT`), else ``{}``: the
    environment's pass mark, beside pass@1, which counts only full scores."""
    shares = []
    for p in problems:
        marks = [s.components.get(THRESHOLD_COMPONENT) for s in p.samples]
        if not marks or any(m is None for m in marks):
            return {}
        shares.append(sum(marks) / len(marks))
    return {"rubric_pass@1": sum(shares) / len(shares)} if shares else {}


def summarize(problems: Sequence[ProblemResult], ks: Sequence[int], *,
              aggregators: dict[str, str] | None = None, seed: int | str = 0,
              saturation_threshold: float = 0.01) -> dict:
    """The results of one model on ``problems`` (the JSON written to results.json).

    Keys: ``problems``, ``samples``, ``samples_per_problem`` (requested n), ``ks``,
    ``pass@k`` / ``maj@k`` / ``aggregate@k`` (k as a string -> mean over problems, in [0, 1]),
    ``best_of@k`` (scorer -> curve; ``oracle`` sees the reference), ``ci95`` (95% intervals),
    ``aggregators`` (task type -> aggregator used for ``aggregate@k``), ``cost`` (k ->
    tokens / seconds per problem), ``saturation`` (per curve, see
    :func:`rlvr.eval.metrics.saturation`), ``status_counts``, ``verifier_errors`` (samples
    whose verifier failed: status ``error`` or ``timeout``, counted wrong), ``measured``
    (``False`` when at least half the samples are such errors: the curves then say little
    about the model, :func:`rlvr.rewards.summary.is_measured`), ``rubric_pass@1`` (verifiers
    environments only: the share reaching the environment's own pass_threshold, where
    ``pass@k`` counts full scores only), ``truncation_rate``,
    ``timed_out_problems`` and ``fallback@k`` (online budget), ``by_category``,
    ``by_difficulty``, ``by_source``.

    Raises:
        SummaryError: no problems, or an aggregator cannot run on these samples.
    """
    if not problems:
        raise SummaryError("no problems to summarise")
    aggregators = dict(aggregators or {})
    ks = sorted(set(ks))
    values = [problem_values(p, ks, aggregators=aggregators, seed=seed) for p in problems]
    curves = _mean_curves(values, ks)
    samples = [s for p in problems for s in p.samples]
    errors = sum(s.status in FAILED_STATUSES for s in samples)
    finished = [s.generated.finish_reason for s in samples if s.generated.finish_reason]
    result = {
        "problems": len(problems),
        "samples": len(samples),
        "samples_per_problem": max(p.requested for p in problems),
        "ks": ks,
        **{key: curves[key] for key in ("pass@k", "maj@k", "aggregate@k", "best_of@k", "ci95")},
        "aggregators": {t: aggregator_for(t, aggregators)
                        for t in sorted({p.task_type for p in problems})},
        "cost": _cost(problems, ks),
        "saturation": {metric: saturation({int(k): v for k, v in curves[metric].items()},
                                          saturation_threshold)
                       for metric in ("pass@k", "maj@k", "aggregate@k")},
        "status_counts": dict(Counter(s.status for s in samples)),
        "verifier_errors": errors,
        "measured": is_measured(errors, len(samples)),
        **_threshold_pass(problems),
        "truncation_rate": (sum(r == "length" for r in finished) / len(finished)
                            if finished else None),
        "timed_out_problems": sum(p.timed_out for p in problems),
        "late_samples": sum(p.late for p in problems),
        "fallback@k": {str(k): sum(len(p.samples) < k for p in problems) for k in ks},
        "by_category": _breakdown(problems, values, "category"),
        "by_difficulty": _breakdown(problems, values, "difficulty"),
        "by_source": _breakdown(problems, values, "source"),
    }
    return result

"""Test-time metrics over n scored samples of one problem (R29, R30), and their curves.

Pure functions over plain lists (no torch): each takes what one problem's samples say
(correct or not, the normalised answer, a scorer value) and returns that problem's estimate;
:mod:`rlvr.eval.summary` averages them over problems.

- :func:`pass_at_k`: the unbiased estimator of Chen et al. 2021 (Codex, arXiv:2107.03374,
  eq. 1), ``1 - C(n - c, k) / C(n, k)``, computed as ``1 - prod_{i=n-c+1}^{n} (1 - k / i)``
  (docs/algorithms.md "Test-time metrics"), which never forms a binomial coefficient.
- :func:`maj_at_k`: self-consistency (Wang et al. 2022, arXiv:2203.11171): majority over the
  extracted answers of k samples after normalisation (:func:`normalize_answer`), then checked;
  for k < n averaged over k-subsets (all of them when there are at most ``subsets``, else
  ``subsets`` seeded random ones).
- :func:`best_of_k`: the sample with the highest scorer value among k is checked; averaged
  exactly over all k-subsets.
- The sample aggregators (:data:`SAMPLE_AGGREGATORS`, :func:`register_sample_aggregator`,
  :data:`DEFAULT_AGGREGATORS`): which of these answers "the model's answer with k samples" for
  a task type (R30).
- :func:`saturation`: where a curve stops paying (gain from k to 2k below a threshold).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlvr.registry import Registry
from rlvr.rewards.math.normalize import clean_latex, compact
from rlvr.rewards.math.numbers import parse_number
from rlvr.rewards.math.structure import Assign, Scalar, parse_answer


def _check_nk(n: int, k: int) -> None:
    if not isinstance(n, int) or not isinstance(k, int) or n < 1 or not 1 <= k <= n:
        raise ValueError(f"need integers 1 <= k <= n, got n={n!r}, k={k!r}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: the chance that at least one of k samples drawn without
    replacement from the n generated ones is correct.

    Chen et al. 2021 (arXiv:2107.03374) eq. 1: ``1 - C(n - c, k) / C(n, k)``, evaluated as
    ``1 - prod_{i=n-c+1}^{n} (1 - k / i)`` (their numerically stable form). Examples: n = 2,
    c = 1, k = 1 gives 0.5; c = 0 gives 0; c = n, or n - c < k, gives 1.

    Args:
        n: samples generated (>= 1).
        c: correct samples among them (0 <= c <= n).
        k: budget (1 <= k <= n).

    Raises:
        ValueError: if the integers are out of range.
    """
    _check_nk(n, k)
    if not isinstance(c, int) or not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c!r}, n={n}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def normalize_answer(answer: str | None) -> str | None:
    """The canonical form of an extracted final answer, so equal answers vote together.

    Numbers compare by exact value (``72``, ``72.0``, ``72.00`` and ``\\$72`` are one vote;
    ``0.5``, ``1/2`` and ``\\frac{1}{2}`` another; a percent keeps its sign: ``25%``), read as
    the math verifier reads them: words it ignores (``5 pencils``, ``72 dollars``) and a label
    naming the value (``x = 5``) drop out, a unit of measurement stays (``5 cm`` is not ``5 m``);
    anything else votes by its LaTeX-cleaned, whitespace-free text (``x + 1`` == ``x+1``).
    ``None`` or a blank answer (no answer extracted) gives ``None``: such a sample does not vote.
    """
    if answer is None or not str(answer).strip():
        return None
    text = str(answer).strip()
    cleaned = compact(clean_latex(text))
    number = parse_number(text) or parse_number(cleaned)
    if number is not None:
        return f"num:{number.value}{'%' if number.percent else ''}"
    shape = parse_answer(text)
    while isinstance(shape, Assign):
        shape = shape.value
    if isinstance(shape, Scalar):
        number = parse_number(shape.text)
        if number is not None:
            percent = "%" if number.percent or shape.percent else ""
            return f"num:{number.value}{percent}" + (f" {shape.unit}" if shape.unit else "")
    return f"text:{cleaned}"


def majority_index(keys: Sequence[str | None]) -> int | None:
    """Index of the sample whose answer wins the vote among ``keys`` (normalised answers,
    ``None`` = no answer, no vote), or ``None`` when nobody voted.

    Tie-break (deterministic): among answers with the most votes, the one whose first vote comes
    earliest in ``keys``; the returned index is that first vote (its correctness is the vote's).
    """
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, i)
    if not counts:
        return None
    best = max(counts, key=lambda key: (counts[key], -first[key]))
    return first[best]


def _subsets(n: int, k: int, subsets: int, rng: random.Random):
    """All k-subsets of range(n) when there are at most ``subsets``, else ``subsets`` random
    ones (each sorted, so the tie-break follows sample order)."""
    if math.comb(n, k) <= subsets:
        return list(itertools.combinations(range(n), k))
    return [tuple(sorted(rng.sample(range(n), k))) for _ in range(subsets)]


def maj_at_k(keys: Sequence[str | None], correct: Sequence[bool], k: int, *,
             subsets: int = 1000, seed: int | str = 0) -> float:
    """maj@k of one problem: the chance that the majority answer of k of its n samples is
    correct (Wang et al. 2022, self-consistency; docs/algorithms.md "Test-time metrics").

    Averaged over every k-subset of the n samples when there are at most ``subsets`` of them
    (exact), else over ``subsets`` random k-subsets drawn with ``random.Random(seed)`` (the same
    seed draws the same subsets, so two models are compared on the same draws). Inside a subset
    the vote follows :func:`majority_index`; a subset where no sample has an answer counts as
    wrong.

    Args:
        keys: the n normalised answers (:func:`normalize_answer`; ``None`` = no answer).
        correct: the n verdicts (True = the verifier accepted that sample).
        k: subset size, 1 <= k <= n.
        subsets: most subsets averaged.
        seed: seeds the random subsets.

    Raises:
        ValueError: lengths differ or k is out of range.
    """
    n = len(keys)
    if len(correct) != n:
        raise ValueError(f"keys ({n}) and correct ({len(correct)}) differ in length")
    _check_nk(n, k)
    chosen = _subsets(n, k, subsets, random.Random(seed))
    hits = 0
    for subset in chosen:
        winner = majority_index([keys[i] for i in subset])
        hits += winner is not None and bool(correct[subset[winner]])
    return hits / len(chosen)


def best_of_k(scores: Sequence[float], correct: Sequence[bool], k: int) -> float:
    """best-of-k of one problem: the chance that, among k of the n samples drawn without
    replacement, the one with the highest score is correct (exact over all k-subsets).

    Order the samples by (score descending, index ascending) - ties go to the earlier sample;
    the sample at rank r (0-based) is the best of a random k-subset with probability
    ``C(n - 1 - r, k - 1) / C(n, k)``; the result sums that over correct samples. Example:
    scores (0.9, 0.5, 0.1), correct (F, T, T), k = 2 gives 1/3. NaN scores rank last.

    Raises:
        ValueError: lengths differ, k out of range, or a score is None (scorer unavailable).
    """
    n = len(scores)
    if len(correct) != n:
        raise ValueError(f"scores ({n}) and correct ({len(correct)}) differ in length")
    _check_nk(n, k)
    if any(s is None for s in scores):
        raise ValueError("best_of_k: a sample has no score (is the scorer available?)")

    def rank_key(i: int):
        s = float(scores[i])
        return (math.isnan(s), -s if not math.isnan(s) else 0.0, i)

    order = sorted(range(n), key=rank_key)
    total = math.comb(n, k)
    return sum(math.comb(n - 1 - r, k - 1) for r, i in enumerate(order) if correct[i]) / total


# -- sample aggregators (R30) ----------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemView:
    """What an aggregator sees of one problem's samples (n of them, in sample order).

    Attributes:
        correct: verifier verdicts.
        keys: normalised answers (:func:`normalize_answer`), ``None`` = no answer.
        scores: scorer name -> one value per sample (``None`` where unavailable), e.g.
            ``"oracle"`` (the verifier reward), ``"logprob"`` (mean token log-prob).
        seed: seeds any random subsets (same problem, same seed across models).
    """

    correct: tuple[bool, ...]
    keys: tuple[str | None, ...]
    scores: dict[str, tuple[float | None, ...]]
    seed: str = "0"


Aggregator = Callable[[ProblemView, int], float]
MAJ_SUBSETS = 1000


@dataclass(frozen=True)
class SampleAggregatorMeta:
    """What a sample aggregator records beside its function.

    Attributes:
        scorer: the scorer whose values it ranks the samples by (a key of
            :attr:`ProblemView.scores`, e.g. ``logprob``); None: it reads only the verdicts and
            the answers (``any_passes``, ``majority``).
    """

    scorer: str | None = None


#: Sample aggregators by name (``rlvr eval --aggregators``): ``fn(view: ProblemView, k: int)
#: -> float``, one problem's estimate in [0, 1] of "the model's answer with k samples" (R30).
#: Not the reward aggregators of the reward pipeline
#: (:data:`rlvr.rewards.registry.REWARD_AGGREGATORS`).
SAMPLE_AGGREGATORS: Registry[Aggregator, SampleAggregatorMeta] = Registry(
    "sample aggregator", SampleAggregatorMeta, field="--aggregators")

#: Default aggregator per task type (R30): numeric answers vote, code passes if any sample
#: passes; other (open-ended) task types rerank by the model's own mean token log-prob.
DEFAULT_AGGREGATORS: dict[str, str] = {"math": "majority", "code": "any_passes"}
FALLBACK_AGGREGATOR = "best_of_logprob"


def register_sample_aggregator(name: str, *, scorer: str | None = None
                               ) -> Callable[[Aggregator], Aggregator]:
    """Decorator: register ``fn(view: ProblemView, k: int) -> float`` (one problem's estimate
    in [0, 1]) under ``name`` in :data:`SAMPLE_AGGREGATORS`.

    Raises:
        ValueError: ``name`` is already registered.
    """
    return SAMPLE_AGGREGATORS.register(name, scorer=scorer)


def aggregator_for(task_type: str, overrides: dict[str, str] | None = None) -> str:
    """The aggregator name for ``task_type``: ``overrides[task_type]``, else ``overrides["*"]``,
    else :data:`DEFAULT_AGGREGATORS`, else :data:`FALLBACK_AGGREGATOR`."""
    overrides = overrides or {}
    return overrides.get(task_type) or overrides.get("*") or DEFAULT_AGGREGATORS.get(
        task_type, FALLBACK_AGGREGATOR)


@register_sample_aggregator("any_passes")
def _any_passes(view: ProblemView, k: int) -> float:
    """Code (R30): solved when any of k samples passes the tests = pass@k."""
    return pass_at_k(len(view.correct), sum(view.correct), k)


@register_sample_aggregator("majority")
def _majority(view: ProblemView, k: int) -> float:
    """Numeric answers (R30): majority vote of k samples = maj@k."""
    return maj_at_k(view.keys, view.correct, k, subsets=MAJ_SUBSETS, seed=f"{view.seed}:{k}")


def _best_of(scorer: str) -> Aggregator:
    def aggregate(view: ProblemView, k: int) -> float:
        if scorer not in view.scores:
            raise ValueError(f"best_of_{scorer}: no {scorer!r} scores for these samples")
        return best_of_k(view.scores[scorer], view.correct, k)

    aggregate.__doc__ = f"best-of-k by the {scorer!r} scorer (exact over k-subsets)."
    return aggregate


#: scorer name -> label in reports; ``oracle`` reads the reference, so it is an upper bound.
SCORERS = {"oracle": "oracle (verifier reward, sees the reference)",
           "logprob": "reranker: mean token log-prob (no reference)",
           "reranker": "reranker: user function (no reference)"}
for _scorer in SCORERS:
    register_sample_aggregator(f"best_of_{_scorer}", scorer=_scorer)(_best_of(_scorer))


# -- curves -----------------------------------------------------------------------------------


def saturation(curve: dict[int, float], threshold: float = 0.01) -> dict:
    """Where a test-time scaling curve saturates (R29): the smallest k from which every
    doubling (k -> 2k, both on the curve) gains less than ``threshold`` (absolute, accuracy in
    [0, 1]).

    Args:
        curve: k -> accuracy.
        threshold: smallest gain worth the doubled cost (0.01 = one point).

    Returns:
        ``{"threshold": t, "gains": {"k->2k": gain, ...}, "saturated_at": k or None}``.
        Example: {1: .5, 2: .6, 4: .605, 8: .61} gives gains 0.1, 0.005, 0.005 and
        saturated_at 2; {1: .008, 2: .015, 4: .03, 8: .06} (gains .007, .015, .03) is not
        saturated although its first doubling gains under one point.
    """
    doubling = [k for k in sorted(curve) if 2 * k in curve]
    gains = {f"{k}->{2 * k}": curve[2 * k] - curve[k] for k in doubling}
    # The first k from which *every* further doubling gains too little: a flat step followed
    # by a rise (a small-accuracy curve: 0.8%, 1.5%, 3%, 6%) is not saturation.
    saturated = next((k for i, k in enumerate(doubling)
                      if all(curve[2 * j] - curve[j] < threshold for j in doubling[i:])), None)
    return {"threshold": threshold, "gains": gains, "saturated_at": saturated}


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean of per-problem estimates and its 95% normal interval over problems,
    ``mean -/+ 1.96 * s / sqrt(P)`` (s: sample standard deviation), clipped to [0, 1]. The
    interval covers both the choice of problems and the subset sampling of maj@k.

    Raises:
        ValueError: no values.
    """
    if not values:
        raise ValueError("mean_ci95: no values")
    p = len(values)
    mean = sum(values) / p
    if p < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (p - 1))
    half = 1.96 * sd / math.sqrt(p)
    return mean, max(0.0, mean - half), min(1.0, mean + half)

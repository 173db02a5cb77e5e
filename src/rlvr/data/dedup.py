"""Contamination checks between training and evaluation items (R25).

A training item is *contaminated* when its prompt is the same problem as an evaluation item:
a verbatim copy, a copy with its numbers changed, a light paraphrase (clauses reordered, a few
words swapped for synonyms, names changed) or both. :func:`find_contamination` finds, for each
training item, its closest evaluation item and reports it when the two are similar enough;
:func:`remove_contaminated` drops the reported items.

Method:

1. :func:`normalize` each prompt: NFKC, lowercase, punctuation stripped, whitespace
   collapsed, and every number (digits or a number word) replaced by the token ``<num>``.
   Number values are free parameters of a word problem: "48 clips" and "52 clips" pose the
   same problem, so they must normalize alike or a number-perturbed copy escapes detection.
2. Exact duplicates: equal SHA-1 digests of the normalized text (kind ``"exact"``). Because
   numbers are normalized away, a copy whose only change is its numbers is an exact match too.
3. Near duplicates: word 3-gram shingles of the normalized text (:func:`shingles`), a MinHash
   signature per item and MinHash LSH (``datasketch``) to retrieve candidate evaluation items;
   each candidate is then confirmed with the exact Jaccard similarity of the shingle sets
   (the MinHash estimate is only used to find candidates). A candidate at or above the
   threshold is a ``"near"`` match. Word 3-grams: long enough that unrelated word problems,
   which share many single words and pairs ("how many", "<num> dollars"), share few shingles,
   short enough that one swapped word only breaks 3 shingles.

Default threshold, :data:`DEFAULT_THRESHOLD` = 0.25. Measured on GSM8K (``shared/data/gsm8k``)
with exact Jaccard on the shingle sets over all 7,473 x 1,319 train/test pairs
(``tests/data/test_dedup.py`` plants the copies):

- Unrelated pairs. Over all pairs the 99th percentile is 0.023. For each training question
  the closest test question scores: median 0.045, 90th percentile 0.087, 99th 0.173, 99.9th
  0.317. 19 training questions (0.25%) reach 0.25. Reading them: 16 are *template siblings*
  (a test problem posed again with other names, objects and numbers, e.g. train-21 / test-633
  at 0.683, train-139 / test-309 at 0.270), which is contamination worth removing. 3 are
  different age problems that share a whole question sentence (train-6149 / test-624 at
  0.364, train-3964 / test-596 at 0.276, train-6293 / test-168 at 0.250), which are false
  positives. 45 reach 0.20, and most pairs from 0.20 to 0.25 are different problems on the
  same theme.
- Planted copies. Exact and number-perturbed copies score 1.0 (kind ``"exact"``). 11
  hand-written light paraphrases of test questions score 0.262-0.745. The lowest is 0.262: a
  name used three times was changed and two phrases were reworded; the next are 0.279 and
  0.300. A paraphrase that also has new numbers scores the same as the paraphrase.
- Rule of thumb: k one-word edits spread over an L-word question break about 3k shingles on
  each side, so J ~ (L - 3k) / (L + 3k). At 0.25 about L / 5 edits are tolerated (6 in a
  30-word question).

0.25 is below the weakest planted paraphrase; 0.30 would miss two of the 11. It flags 0.04% of
GSM8K training questions that are not the same problem. No 3-gram Jaccard threshold separates
every template sibling from every short problem that shares a question sentence. The default
prefers recall, since a missed copy inflates evaluation scores. Raise the threshold for
stricter matching.

Speed: GSM8K train (7,473) against test (1,319) takes 2.4-2.8 s with ``num_perm=128`` on a
2-core machine that is also running a training job (4.5 s under cProfile). At 0.25,
:func:`lsh_params` picks 128 bands of one row. LSH queries take about 40% of the time, MinHash
about 15%, and confirming the ~525k candidate pairs (70 per training item, 5% of all pairs)
about 15%.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from rlvr.records import Task

DEFAULT_THRESHOLD = 0.25
"""Default Jaccard threshold for a near match; measured on GSM8K, see the module docstring."""

DEFAULT_NGRAM = 3
"""Shingle length in words."""

NUM_TOKEN = "<num>"
"""The token every number becomes in :func:`normalize`."""

LSH_MIN_RECALL = 0.995
"""Probability that LSH retrieves a pair whose Jaccard equals the threshold (higher for
more similar pairs); the band layout is chosen to reach it, see :func:`lsh_params`."""

# A numeric literal: 48, 80,000, 1.5, .5 (signs and units are punctuation, stripped later).
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*|\.\d+")
_APOSTROPHES = re.compile(r"['\u2019\u2018`]")
_WORD = re.compile(r"<num>|[^\W_]+")
_NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion".split()
)


@dataclass(frozen=True)
class Match:
    """A contaminated training item and its closest evaluation item.

    Attributes:
        train_id: the training task's id.
        eval_id: the id of the closest evaluation task (the first one, in evaluation order,
            among equally close ones).
        similarity: Jaccard similarity of the two prompts' shingle sets, in [0, 1]
            (1.0 for exact matches).
        kind: ``"exact"`` when the normalized prompts are identical (so also when only
            numbers differ), else ``"near"``.
        train_text: the training prompt.
        eval_text: the evaluation prompt.
    """

    train_id: str
    eval_id: str
    similarity: float
    kind: Literal["exact", "near"]
    train_text: str
    eval_text: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of all fields."""
        return asdict(self)


def normalize(text: str) -> str:
    """Canonical form of a prompt for duplicate detection.

    Unicode NFKC, lowercase, apostrophes deleted ("Janet's" -> "janets"), other punctuation
    and symbols turned into spaces, whitespace collapsed, and every number replaced by
    :data:`NUM_TOKEN`: numeric literals (``48``, ``80,000``, ``1.5``) and the cardinal number
    words zero-twenty, the tens, hundred, thousand, million and billion. Numbers are the free
    parameters of a word problem, so a copy with different numbers ("48 clips" / "52 clips")
    must normalize to the same text.

    Args:
        text: any string.

    Returns:
        Space-separated lowercase tokens; ``""`` when ``text`` has no letters or digits.
    """
    text = unicodedata.normalize("NFKC", text).lower()
    text = _NUMBER.sub(f" {NUM_TOKEN} ", text)
    text = _APOSTROPHES.sub("", text)
    tokens = [NUM_TOKEN if t in _NUMBER_WORDS else t for t in _WORD.findall(text)]
    return " ".join(tokens)


def shingles(normalized: str, n: int = DEFAULT_NGRAM) -> frozenset[str]:
    """Word ``n``-grams of a normalized text (see :func:`normalize`).

    Args:
        normalized: output of :func:`normalize`.
        n: words per shingle, at least 1.

    Returns:
        The set of n-grams, each its words joined by single spaces. A text shorter than ``n``
        words gives one shingle (the whole text); an empty text gives the empty set.

    Raises:
        ValueError: if ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"shingle length n must be >= 1, got {n}")
    words = normalized.split()
    if not words:
        return frozenset()
    if len(words) <= n:
        return frozenset([" ".join(words)])
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Exact Jaccard similarity ``|a & b| / |a | b|`` in [0, 1]; 0.0 when both are empty."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def text_digest(normalized: str) -> bytes:
    """SHA-1 digest of a normalized text: the key for exact-duplicate detection."""
    return hashlib.sha1(normalized.encode("utf-8")).digest()


def lsh_params(threshold: float, num_perm: int,
               min_recall: float = LSH_MIN_RECALL) -> tuple[int, int]:
    """The LSH band layout ``(bands, rows)`` for candidate retrieval.

    A pair with Jaccard ``s`` becomes a candidate with probability ``1 - (1 - s**r)**b``.
    Returns the layout with the most rows per band (fewest false candidates) whose retrieval
    probability at ``s = threshold`` is at least ``min_recall``, using ``b = num_perm // r``
    bands. Falls back to one row per band when no layout reaches it.

    Args:
        threshold: the Jaccard threshold, in (0, 1].
        num_perm: MinHash permutations.
        min_recall: required retrieval probability at the threshold.
    """
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold**rows) ** bands >= min_recall:
            return bands, rows
    return num_perm, 1


def _minhashes(shingle_sets: Iterable[frozenset[str]], num_perm: int) -> list:
    # deferred: datasketch costs ~1.5 s to import; only the MinHash near-duplicate search needs it
    from datasketch import MinHash

    data = [[s.encode("utf-8") for s in sorted(sh)] for sh in shingle_sets]
    return MinHash.bulk(data, num_perm=num_perm)


def _closest(train_sh: frozenset[str], candidates: Iterable[int],
             eval_sh: Sequence[frozenset[str]]) -> tuple[int, float]:
    """Index and Jaccard of the most similar candidate (ties: lowest index); (-1, 0.0) if
    there are none."""
    best, best_sim = -1, 0.0
    for j in sorted(candidates):
        sim = jaccard(train_sh, eval_sh[j])
        if sim > best_sim:
            best, best_sim = j, sim
    return best, best_sim


def _check_args(threshold: float, num_perm: int, ngram: int) -> None:
    if not (isinstance(threshold, (int, float)) and 0.0 < threshold <= 1.0):
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if not (isinstance(num_perm, int) and num_perm >= 16):
        raise ValueError(f"num_perm must be an integer >= 16, got {num_perm!r}")
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, got {ngram}")


def find_contamination(
    train: Sequence[Task],
    evaluation: Sequence[Task],
    threshold: float = DEFAULT_THRESHOLD,
    num_perm: int = 128,
    ngram: int = DEFAULT_NGRAM,
) -> list[Match]:
    """Training items whose prompt duplicates an evaluation prompt, each with its closest
    evaluation item.

    Args:
        train: the training tasks (prompts are compared).
        evaluation: the evaluation tasks.
        threshold: Jaccard similarity of the shingle sets at or above which a training item is
            a near duplicate, in (0, 1]. The default 0.25 is measured on GSM8K (module
            docstring): planted paraphrases score >= 0.262. The closest test question of a
            training question scores <= 0.173 for 99% of GSM8K training questions, and
            0.25% reach 0.25, mostly template siblings of a test question.
        num_perm: MinHash permutations (>= 16); more gives LSH fewer false candidates, not
            different results (every candidate is confirmed with exact Jaccard).
        ngram: shingle length in words.

    Returns:
        One :class:`Match` per contaminated training item, in training order: ``kind="exact"``
        (similarity 1.0) when its normalized prompt equals an evaluation prompt's, else
        ``"near"`` with the highest Jaccard among the LSH candidates. Training items with an
        empty normalized prompt are never matched.

    Raises:
        ValueError: for a threshold outside (0, 1], ``num_perm`` < 16 or ``ngram`` < 1.
    """
    _check_args(threshold, num_perm, ngram)
    if not train or not evaluation:
        return []
    # deferred: datasketch costs ~1.5 s to import; only the MinHash near-duplicate search needs it
    from datasketch import MinHashLSH

    eval_norm = [normalize(t.prompt) for t in evaluation]
    eval_sh = [shingles(t, ngram) for t in eval_norm]
    exact: dict[bytes, int] = {}
    for j, text in enumerate(eval_norm):
        if text:
            exact.setdefault(text_digest(text), j)

    train_norm = [normalize(t.prompt) for t in train]
    train_sh = [shingles(t, ngram) for t in train_norm]
    pending = [i for i, text in enumerate(train_norm) if text and text_digest(text) not in exact]

    lsh = MinHashLSH(num_perm=num_perm, params=lsh_params(threshold, num_perm))
    with lsh.insertion_session() as session:
        for j, mh in enumerate(_minhashes(eval_sh, num_perm)):
            if eval_sh[j]:
                session.insert(j, mh)
    near: dict[int, tuple[int, float]] = {}
    for i, mh in zip(pending, _minhashes((train_sh[i] for i in pending), num_perm)):
        j, sim = _closest(train_sh[i], lsh.query(mh), eval_sh)
        if j >= 0 and sim >= threshold:
            near[i] = (j, sim)

    matches = []
    for i, task in enumerate(train):
        if not train_norm[i]:
            continue
        j = exact.get(text_digest(train_norm[i]))
        if j is not None:
            kind, sim = "exact", 1.0
        elif i in near:
            (j, sim), kind = near[i], "near"
        else:
            continue
        matches.append(Match(train_id=task.id, eval_id=evaluation[j].id, similarity=sim,
                             kind=kind, train_text=task.prompt, eval_text=evaluation[j].prompt))
    return matches


def remove_contaminated(train: Sequence[Task], matches: Iterable[Match]) -> list[Task]:
    """The training tasks that no match names, in their original order.

    Args:
        train: the training tasks given to :func:`find_contamination`.
        matches: its result (or a filtered subset, to keep some items).

    Returns:
        A new list without every task whose id is a match's ``train_id`` (all tasks sharing
        that id, if ids repeat).
    """
    flagged = {m.train_id for m in matches}
    return [t for t in train if t.id not in flagged]


__all__ = [
    "DEFAULT_NGRAM",
    "DEFAULT_THRESHOLD",
    "LSH_MIN_RECALL",
    "NUM_TOKEN",
    "Match",
    "find_contamination",
    "jaccard",
    "lsh_params",
    "normalize",
    "remove_contaminated",
    "shingles",
    "text_digest",
]

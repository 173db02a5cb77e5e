"""reasoning-gym tasks (``data.source: reasoning_gym``): items of reasoning-gym's procedural
datasets as rlvr task records, scored by the dataset's own ``score_answer``
(:mod:`rlvr.rewards.gym`, task type ``"reasoning_gym"``).

The mixture names reasoning-gym datasets with their generator options and weights::

    countdown(min_numbers=3, max_numbers=4):0.5, knights_knaves(n_people=2):0.5

(options: the dataset's config fields, Python literals; ``seed`` and ``size`` are rlvr's).
Each slot draws a dataset by weight, then that dataset's next item. Items come in chunks of
:data:`CHUNK` from ``create_dataset(name, **options, seed=s, size=CHUNK)``, ``s`` derived
from (run seed, split, dataset, chunk number), so train and validation are drawn with
different seeds. An item belongs to the split :func:`rlvr.tasks.logic.split_of` its question
text gives (a fifth to validation), so train and validation never share a question whatever
the seeds; within a split repeated questions are dropped. Each task's ``metadata`` holds
``dataset``, ``config``, ``seed``, ``index``: ``create_dataset(dataset, **config,
seed=seed, size=index + 1)[index]`` rebuilds the entry (:func:`rebuild_entry`), which the
reference also stores as JSON.
"""

from __future__ import annotations

import bisect
import difflib
import hashlib
import itertools
import json
import random
from collections import Counter
from dataclasses import dataclass, field

from rlvr.records import Task
from rlvr.rewards.gym import TASK_TYPE, import_gym, score_entry
from rlvr.tasks.logic import split_of
from rlvr.tasks.mixture import check_generator_args, check_weights, split_option_specs

SOURCE = "reasoning_gym"
CHUNK = 500  # items per generator instance (reasoning-gym's default dataset size)
DEFAULT_VAL_FRACTION = 0.2
SALT = "rlvr-gym-v1"
RESERVED = ("seed", "size")  # set by rlvr: the run seed and the chunking
INSTRUCTION = ("Think it through step by step, then give only the final answer between "
               "<answer> and </answer> tags.")


@dataclass(frozen=True)
class GymTask:
    """One reasoning-gym dataset in a mixture: its name, generator options (JSON-normalised:
    tuples become lists) and normalised weight."""

    name: str
    options: dict = field(default_factory=dict)
    weight: float = 1.0


def parse_mixture(spec: str) -> list[GymTask]:
    """The datasets of a mixture spec, checked against reasoning-gym.

    Args:
        spec: ``"countdown(min_numbers=3):0.5,knights_knaves:0.5"``
            (:func:`rlvr.tasks.mixture.split_option_specs`).

    Returns:
        The datasets with positive weights (normalised to sum 1), in spec order.

    Raises:
        ImportError: reasoning-gym is not installed.
        KeyError: an unknown dataset (the message names the closest ones).
        ValueError: a malformed spec, ``seed`` / ``size`` among the options, options the
            dataset's config rejects (its message), or bad weights.
    """
    gym = import_gym()
    items = split_option_specs(spec, "reasoning_gym mixture")
    total = check_weights([(name, w) for name, _, w in items], spec, "reasoning_gym mixture")
    known = gym.factory.DATASETS
    out = []
    for name, options, weight in items:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise KeyError(f"unknown reasoning-gym dataset {name!r}{hint} ({len(known)} "
                           f"datasets: reasoning_gym.factory.DATASETS)")
        reserved = sorted(set(options) & set(RESERVED))
        if reserved:
            raise ValueError(f"{name}: option(s) {', '.join(reserved)} are set by rlvr (the "
                             f"run seed; data.train_size / data.val_size)")
        options = json.loads(json.dumps(options))  # as the reference stores them
        try:
            gym.create_dataset(name, **options, seed=0, size=1)
        except (TypeError, ValueError, AssertionError) as exc:
            raise ValueError(f"{name}: bad options {options}: {exc}") from None
        if weight > 0:
            out.append(GymTask(name, options, weight / total))
    return out


def chunk_seed(seed: int, split: str, name: str, chunk: int) -> int:
    """The reasoning-gym seed of chunk ``chunk`` of dataset ``name`` in ``split`` (a 32-bit
    int derived by hashing, so runs with nearby seeds share no chunk)."""
    digest = hashlib.blake2b(f"{SALT}|{seed}|{split}|{name}|{chunk}".encode(), digest_size=4)
    return int.from_bytes(digest.digest(), "big")


def rebuild_entry(metadata: dict) -> dict:
    """The reasoning-gym entry a task was made from, generated again from its ``metadata``
    (``dataset``, ``config``, ``seed``, ``index``).

    Raises:
        ImportError: reasoning-gym is not installed. KeyError: a field is missing.
    """
    ds = import_gym().create_dataset(metadata["dataset"], **metadata["config"],
                                     seed=metadata["seed"], size=CHUNK)
    return ds[metadata["index"]]


def _json_entry(name: str, options: dict, entry: dict) -> dict:
    """``entry`` as JSON holds it, checked: its own answer must score the same after the
    round trip (tuples become lists), else scoring from the stored record would differ."""
    stored = json.loads(json.dumps(entry, default=str))
    answer = entry.get("answer")
    if isinstance(answer, str) and answer:
        before = score_entry(name, options, answer, entry)
        after = score_entry(name, options, answer, stored)
        if before != after:
            raise ValueError(f"reasoning-gym dataset {name!r}: its entries do not survive JSON "
                             f"(the answer scores {before} before, {after} after); rlvr "
                             f"cannot store its tasks")
    return stored


class _Stream:
    """One dataset's items in one split, chunk after chunk."""

    def __init__(self, task: GymTask, seed: int, split: str) -> None:
        self.task, self.seed, self.split = task, seed, split
        self.chunk, self.index, self.dataset = -1, CHUNK, None

    def next(self) -> tuple[dict, int, int]:
        """``(entry, chunk seed, index)`` of the next item."""
        if self.index >= CHUNK:
            self.chunk, self.index = self.chunk + 1, 0
            s = chunk_seed(self.seed, self.split, self.task.name, self.chunk)
            self.dataset = import_gym().create_dataset(self.task.name, **self.task.options,
                                                       seed=s, size=CHUNK)
        i, self.index = self.index, self.index + 1
        return self.dataset[i], self.dataset.seed, i


def _task(task: GymTask, entry: dict, seed: int, index: int, split: str) -> Task:
    question = entry.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"reasoning-gym dataset {task.name!r} gave an item without a question")
    stored = _json_entry(task.name, task.options, entry)
    answer = entry.get("answer")
    digest = hashlib.blake2b(question.encode(), digest_size=6).hexdigest()
    return Task(
        id=f"gym-{task.name}-{digest}",
        prompt=question,
        reference={"dataset": task.name, "config": task.options, "entry": stored},
        task_type=TASK_TYPE,
        source=SOURCE,
        difficulty=task.name,
        category=task.name,
        solution=f"<answer>{answer}</answer>" if isinstance(answer, str) and answer else None,
        metadata={"dataset": task.name, "config": task.options, "seed": seed, "index": index,
                  "split": split},
    )


def generate_gym(mixture: str, n: int, seed: int, split: str = "train", *, unique: bool = True,
                 val_fraction: float = DEFAULT_VAL_FRACTION,
                 stats: Counter | None = None) -> list[Task]:
    """``n`` reasoning-gym tasks of one split, deterministically from ``seed`` (module docs).

    Args:
        mixture: datasets, options and weights (:func:`parse_mixture`).
        n: number of tasks (>= 0).
        seed: the run seed; the same arguments give the same list.
        split: ``"train"`` or ``"validation"`` (never sharing a question).
        unique: drop repeated questions within the list (``False``: keep them).
        val_fraction: share of questions reserved for validation, in (0, 1).
        stats: if given, counts ``drawn``, ``other_split`` and ``repeated`` items.

    Raises:
        ValueError: bad arguments or mixture, or a dataset that keeps repeating questions
            (its question space in this split is used up; ask for fewer tasks).
        KeyError: an unknown dataset. ImportError: reasoning-gym is not installed.
    """
    check_generator_args(split, val_fraction, n)
    tasks_ = parse_mixture(mixture)
    cumulative = list(itertools.accumulate(t.weight for t in tasks_))
    streams = [_Stream(t, seed, split) for t in tasks_]
    rng = random.Random(f"{SALT}|{seed}|{split}")
    stats = Counter() if stats is None else stats
    seen: set[str] = set()
    taken: Counter[str] = Counter()
    repeats: Counter[str] = Counter()
    out: list[Task] = []
    while len(out) < n:
        k = min(bisect.bisect_right(cumulative, rng.random()), len(streams) - 1)
        entry, chunk, index = streams[k].next()
        name = tasks_[k].name
        stats["drawn"] += 1
        question = str(entry.get("question"))
        if split_of(question, val_fraction, SALT) != split:
            stats["other_split"] += 1
            continue
        if unique and question in seen:
            stats["repeated"] += 1
            repeats[name] += 1
            if repeats[name] > taken[name] + 200:
                raise ValueError(f"reasoning-gym dataset {name!r} ran out of distinct {split} "
                                 f"questions after {taken[name]}; ask for fewer tasks, give it "
                                 f"a lower weight or options with more variety")
            continue
        seen.add(question)
        taken[name] += 1
        out.append(_task(tasks_[k], entry, chunk, index, split))
    return out

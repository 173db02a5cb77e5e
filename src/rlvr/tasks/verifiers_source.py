"""Tasks from ``verifiers`` environments (``data.source: verifiers``): each dataset row of a
single-turn environment becomes a task of type ``"verifiers"``, scored by the environment's
rubric (:mod:`rlvr.rewards.verifiers_env`).

The mixture names environment modules with their ``load_environment`` keyword arguments and
weights, in the grammar of :func:`rlvr.tasks.mixture.split_option_specs`::

    my_math_env(num_examples=500, difficulty="easy"):0.7, my_format_env:0.3

Splits: an environment with both a dataset and an eval dataset gives train rows from the
first (minus rows whose prompt is also in the eval dataset) and validation rows from the
second; one with a single dataset is split by prompt text (a fifth to validation,
:func:`rlvr.tasks.logic.split_of`). Within a split, repeated prompts are dropped; rows are
shuffled with the seed and drawn by weight, and an environment whose rows run out stops
being drawn (a finite dataset gives at most its rows, as a data file does).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

from rlvr.records import Task
from rlvr.rewards.verifiers_env import TASK_TYPE, load, prompt_text
from rlvr.tasks.logic import split_of
from rlvr.tasks.mixture import check_generator_args, check_weights, split_option_specs

SOURCE = "verifiers"
SALT = "rlvr-verifiers-v1"
DEFAULT_VAL_FRACTION = 0.2


def mixture_spec(module: str, kwargs: dict) -> str:
    """The one-environment mixture ``module(key=value, ...)`` of ``env.module`` /
    ``env.kwargs`` (values as Python literals, the grammar :func:`parse_mixture` reads)."""
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{module}({args})" if args else module


def parse_mixture(spec: str, episodic: bool = False) -> list[tuple[str, dict, float]]:
    """``(module, kwargs, weight)`` per environment of ``spec`` (weights normalised, zero
    weights dropped); each environment is loaded once here, so that a missing module or a
    multi-turn environment is refused when the config is read (``episodic``: admitted, for
    ``env.source: verifiers``, which plays its episodes).

    Raises:
        ValueError: a malformed spec or weights; the environment's own load error.
        rlvr.rewards.verifiers_env.VerifiersEnvError: not a single-turn environment.
        ImportError: verifiers is not installed.
    """
    items = split_option_specs(spec, "verifiers mixture")
    total = check_weights([(m, w) for m, _, w in items], spec, "verifiers mixture")
    out = []
    for module, kwargs, weight in items:
        kwargs = json.loads(json.dumps(kwargs))  # as the reference stores them
        load(module, kwargs, episodic=episodic)
        if weight > 0:
            out.append((module, kwargs, weight / total))
    return out


def _rows(dataset) -> list[dict]:
    return [] if dataset is None else [json.loads(json.dumps(dict(r), default=str))
                                       for r in dataset]


def split_rows(env, module: str, split: str, val_fraction: float,
               stats: Counter) -> list[dict]:
    """The rows of ``env`` in ``split`` (module docs), distinct prompts, in dataset order."""
    has_train = env.dataset is not None or env.dataset_source is not None
    has_eval = env.eval_dataset is not None or env.eval_dataset_source is not None
    train = _rows(env.get_dataset()) if has_train else []
    held = _rows(env.get_eval_dataset()) if has_eval else []
    if has_train and has_eval:
        if split == "validation":
            rows = held
        else:
            taken = {prompt_text(r["prompt"], module) for r in held}
            rows = [r for r in train if prompt_text(r["prompt"], module) not in taken]
            stats["in_eval_dataset"] += len(train) - len(rows)
    else:
        rows = [r for r in (train or held)
                if split_of(prompt_text(r["prompt"], module), val_fraction, SALT) == split]
    seen, out = set(), []
    for row in rows:
        text = prompt_text(row["prompt"], module)
        if text in seen:
            stats["repeated"] += 1
            continue
        seen.add(text)
        out.append(row)
    return out


def _task(module: str, kwargs: dict, row: dict, split: str) -> Task:
    text = prompt_text(row["prompt"], module)
    digest = hashlib.blake2b(text.encode(), digest_size=6).hexdigest()
    return Task(id=f"vf-{module}-{digest}", prompt=text,
                reference={"env": module, "kwargs": kwargs, "row": row},
                task_type=TASK_TYPE, source=SOURCE, category=module,
                metadata={"env": module, "kwargs": kwargs, "split": split,
                          "example_id": row.get("example_id")})


def generate_verifiers(mixture: str, n: int, seed: int, split: str = "train", *,
                       unique: bool = True, val_fraction: float = DEFAULT_VAL_FRACTION,
                       stats: Counter | None = None, episodic: bool = False) -> list[Task]:
    """Up to ``n`` tasks of one split from the environments of ``mixture``, deterministically
    from ``seed`` (fewer when the datasets hold fewer rows; ``unique=False``: rows repeat
    instead of running out).

    Raises:
        ValueError, ImportError, VerifiersEnvError: as :func:`parse_mixture`; bad arguments.
    """
    check_generator_args(split, val_fraction, n)
    stats = Counter() if stats is None else stats
    envs = parse_mixture(mixture, episodic)
    pools = []
    for module, kwargs, _ in envs:
        rows = split_rows(load(module, kwargs, episodic=episodic), module, split,
                          val_fraction, stats)
        random.Random(f"{SALT}|{seed}|{split}|{module}").shuffle(rows)
        pools.append(rows)
    cursors = [0] * len(envs)
    rng = random.Random(f"{SALT}|{seed}|{split}")
    out: list[Task] = []
    while len(out) < n:
        live = [k for k, rows in enumerate(pools) if rows and (not unique
                                                              or cursors[k] < len(rows))]
        if not live:
            break
        k = rng.choices(live, [envs[i][2] for i in live])[0]
        row = pools[k][cursors[k] % len(pools[k])]
        cursors[k] += 1
        out.append(_task(envs[k][0], envs[k][1], row, split))
    return out


def verifiers_data(section: dict, module: str, kwargs: dict) -> dict:
    """The run's ``data`` section for ``env.source: verifiers``: ``section`` (as written) with
    ``source: verifiers_episodes`` and ``mixture`` the environment module with its kwargs
    (:func:`rlvr.tasks.verifiers_source.mixture_spec`); sizes and the rest stay the user's.

    Precedence: the environment supplies the tasks. A ``data.source`` of ``verifiers`` (or
    ``verifiers_episodes``) whose ``mixture`` names the same module and kwargs is accepted.

    Raises:
        ValueError: ``data.source`` / ``data.mixture`` / ``data.path`` / ``data.sources``
            written and disagreeing with ``env`` (the message names both).
    """
    spec = mixture_spec(module, kwargs)
    where = f"env.source verifiers (module {spec}) supplies the tasks"
    for field in ("sources", "path", "val_path"):
        if section.get(field):
            raise ValueError(f"data.{field}: {where}; leave data.{field} out")
    source = section.get("source")
    if source not in (None, "verifiers", "verifiers_episodes"):
        raise ValueError(f"data.source: {source!r} disagrees with {where}; leave data.source "
                         f"out")
    mixture = section.get("mixture")
    if mixture is not None:
        wanted = [(module, json.loads(json.dumps(kwargs)))]
        try:
            items = split_option_specs(mixture, "data.mixture")
        except ValueError:
            items = []
        if [(m, json.loads(json.dumps(k))) for m, k, _ in items] != wanted:
            raise ValueError(f"data.mixture: {mixture!r} disagrees with {where}; leave "
                             f"data.mixture out")
    return {**section, "source": "verifiers_episodes", "mixture": spec}

"""Where a reasoning-gym answer is scored: in the verifier process for the few datasets whose
scorer is proven pure, in the sandbox (:mod:`rlvr.sandbox`) for every other one.

Threat model: reasoning-gym's scorers are third-party code that takes the model's answer as
input, and some of them evaluate it as Python (``eval``, or sympy's ``parse_expr``, which
ends in ``eval``). Measured with an audit hook on ``compile`` / ``exec`` of string code
(reasoning-gym 0.1.25, 106 datasets): binary_matrix, bitwise_arithmetic, countdown,
intermediate_integration, n_queens, number_sorting, polynomial_multiplication, puzzle24,
simple_integration, spiral_matrix and string_insertion (bitwise_arithmetic and number_sorting
evaluate the entry, which a records file also carries). Any such call could run the answer
as a program, so every dataset is treated as untrusted unless it is in :data:`PURE_SCORERS`:
a short allow-list, each entry with the source of the functions its score depends on pinned
by a SHA-256 (:func:`pure_scorer`; a reasoning-gym release that changes one of them sends
that dataset back to the sandbox) and a test showing that adversarial answers reach no
``eval`` / ``exec`` / ``compile`` / sympy parsing.

An untrusted dataset's answers are scored by :mod:`rlvr.rewards.gym_scorer` in one sandbox
run per batch (up to :data:`MAX_BATCH` answers of one dataset and options): no network, no
writable host path, an empty environment, memory and CPU limits, a fresh child process per
answer. The sandbox imports only the dataset's own module from this interpreter's
site-packages (bound read-only), so the interpreter inside is this one's version
(:func:`scorer_python`). A batch run that fails as a whole is retried answer by answer, so
one answer can only ever fail itself.

Cost (reward pipeline, 64 correct answers per dataset after a warm-up, 2-core machine at load
average 12-14; end-to-end wall and CPU including the sandbox processes): in the verifier
process 1-6 ms wall, 0.3-1.2 ms CPU per answer; in the sandbox countdown (sympy) 67-134 ms
wall, 36-38 ms CPU, n_queens and spiral_matrix 19-37 ms wall, 6-10 ms CPU. A run's fixed
cost, the interpreter start and the dataset module's imports (sympy: about 1 s CPU), is
shared by the answers of its batch; each answer adds a fork and its own scoring.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvr.sandbox import SandboxJob, SandboxLimits, SandboxPool, SandboxStatus, environment

MAX_BATCH = 64  # answers per sandbox run (one interpreter start and import for all)
ANSWER_CPU_S = 5  # RLIMIT_CPU of one answer's scoring process, CPU seconds
ANSWER_WALL_S = 30.0  # wall-clock bound of one answer's scoring process, seconds
ANSWER_MEMORY_BYTES = 256 << 20  # address space one answer may add to the scorer's
# CPU seconds for the interpreter to start and import the dataset's module (sympy: 1.5-7 s
# measured on a loaded 2-core machine)
IMPORT_CPU_S = 30.0

_DECIMAL = "c6ae5adc9518cd192491227a0e57bdefb62a09d3077a988d5c7d0ea1ae38ba75"
_BASE = "d4c377f0ac8e002f2cc7809fd18f6359465da4faae08a43824c050926a1d83f4"
# name -> (functions its score depends on, SHA-256 of their source joined by NUL). Each entry
# was read: the score is string comparison and arithmetic on the answer text, nothing else.
PURE_SCORERS: dict[str, tuple[tuple[str, ...], str]] = {
    # Decimal(answer) == Decimal(oracle), else len(oracle) / len(answer) if a substring
    "chain_sum": (("reasoning_gym.arithmetic.chain_sum:ChainSumDataset.score_answer",
                   "reasoning_gym.utils:compute_decimal_reward"), _DECIMAL),
    "products": (("reasoning_gym.arithmetic.products:ProductsDataset.score_answer",
                  "reasoning_gym.utils:compute_decimal_reward"), _DECIMAL),
    # ProceduralDataset.score_answer: answer == oracle, else the substring ratio
    "basic_arithmetic": (("reasoning_gym.dataset:ProceduralDataset.score_answer",), _BASE),
    "word_sequence_reversal": (("reasoning_gym.dataset:ProceduralDataset.score_answer",),
                               _BASE),
    # lower-case, strip punctuation, split into (name, role) pairs, compare the sets
    "knights_knaves": (("reasoning_gym.logic.knights_knaves:KnightsKnavesDataset.score_answer",
                        "reasoning_gym.logic.knights_knaves:KnightsKnavesDataset."
                        "_normalize_answer"),
                       "796d1b4365774ced13219b9e8c15d3496072aa19b1328d00aaaa61dd7a44e317"),
}


def _function(path: str):
    module, _, attrs = path.partition(":")
    obj: Any = importlib.import_module(module)
    for attr in attrs.split("."):
        obj = getattr(obj, attr)
    return obj


def scorer_fingerprint(functions: Sequence[str]) -> str:
    """SHA-256 (hex) of the source of ``functions`` (``"module:Class.method"``), in order.

    Raises:
        ImportError, AttributeError, OSError: a function is missing or has no source.
    """
    sources = [inspect.getsource(_function(f)) for f in functions]
    return hashlib.sha256("\0".join(sources).encode()).hexdigest()


@functools.cache
def pure_scorer(dataset: str) -> bool:
    """Whether ``dataset``'s scorer may run in the verifier process: it is in
    :data:`PURE_SCORERS`, its class still inherits ``score_answer`` from the pinned function,
    and the pinned functions' source still has the recorded SHA-256."""
    if dataset not in PURE_SCORERS:
        return False
    functions, digest = PURE_SCORERS[dataset]
    try:
        from reasoning_gym.factory import DATASETS

        cls = DATASETS[dataset][0]
        if getattr(cls.score_answer, "__code__", None) is not _function(functions[0]).__code__:
            return False
        return scorer_fingerprint(functions) == digest
    except (ImportError, AttributeError, KeyError, OSError, TypeError):
        return False


@dataclass(frozen=True)
class Scored:
    """One answer's outcome from the sandbox.

    Attributes:
        kind: ``ok`` (``value`` is the score), ``trip`` (the evaluated answer did something no
            scorer does; ``value`` names the audit event), ``timeout``, ``memory``, ``error``
            (the scorer raised; ``value`` is the exception's type name), ``crash`` (the
            scoring process ended without a result; ``value`` its exit status) or
            ``sandbox`` (the sandbox run failed; ``value`` says how).
        value: see ``kind``.
    """

    kind: str
    value: Any = None


@functools.cache
def _python_version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([python, "-I", "-S", "-c",
                              "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30, env={})
        major, minor = out.stdout.split()
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def scorer_python() -> str | None:
    """The interpreter for the sandboxed scorer: the sandbox's own (``None``) when its
    version is this process's, else this process's base interpreter (whose
    ``site-packages`` the scorer imports from must match it)."""
    if _python_version(environment().python) == tuple(sys.version_info[:2]):
        return None
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


@functools.lru_cache(maxsize=1)
def site_dirs() -> tuple[str, ...]:
    """The directories the sandboxed scorer imports from: the one holding ``reasoning_gym``
    and every ``site-packages`` / ``dist-packages`` directory of this process's path.

    Raises:
        ImportError: reasoning-gym is not installed.
    """
    import reasoning_gym

    dirs = [str(Path(reasoning_gym.__file__).resolve().parent.parent)]
    for entry in sys.path:
        if entry and os.path.isdir(entry) and (
                "site-packages" in entry or "dist-packages" in entry):
            dirs.append(os.path.realpath(entry))
    return tuple(dict.fromkeys(dirs))


def _limits():
    return SandboxLimits(timeout_s=IMPORT_CPU_S + MAX_BATCH * ANSWER_CPU_S,
                         memory_bytes=1 << 30, max_file_bytes=1 << 20, tmpfs_bytes=16 << 20,
                         startup_timeout_s=60.0)


def build_job(dataset: str, config: dict, items: Sequence[tuple[str, dict]]):
    """The :class:`rlvr.sandbox.SandboxJob` that scores ``items`` (``(answer, entry)``
    pairs, at most :data:`MAX_BATCH`) with ``dataset`` built with ``config``; its one
    probe ``SCORES`` is the list of ``[kind, value]`` pairs (:mod:`rlvr.rewards.gym_scorer`).

    Raises:
        ValueError: more than :data:`MAX_BATCH` items, or an unknown dataset.
        ImportError: reasoning-gym is not installed.
    """
    from reasoning_gym.factory import DATASETS

    if len(items) > MAX_BATCH:
        raise ValueError(f"at most {MAX_BATCH} answers per sandbox run, got {len(items)}")
    if dataset not in DATASETS:
        raise ValueError(f"unknown reasoning-gym dataset {dataset!r}")
    dirs = site_dirs()
    batch = {"dataset": dataset, "config": config, "module": DATASETS[dataset][0].__module__,
             "site_dirs": list(dirs), "items": [[a, e] for a, e in items],
             "limits": {"cpu_s": ANSWER_CPU_S, "wall_s": ANSWER_WALL_S,
                        "memory_bytes": ANSWER_MEMORY_BYTES}}
    program = (_scorer_source() + "\nimport json as _json\n"
               f"SCORES = main(_json.loads({json.dumps(batch)!r}))\n")
    return SandboxJob(program=program, probes=("SCORES",), limits=_limits(),
                      python=scorer_python(),
                      read_only_paths=tuple(d for d in dirs if not d.startswith("/usr/")))


@functools.lru_cache(maxsize=1)
def _scorer_source() -> str:
    return Path(__file__).with_name("gym_scorer.py").read_text(encoding="utf-8")


def _outcomes(result, n: int) -> list[Scored] | None:
    """The ``n`` outcomes a finished run reports, or None if the run failed as a whole."""
    if result.status is not SandboxStatus.ok or len(result.probes) != 1 \
            or not result.probes[0].ok:
        return None
    value = result.probes[0].value
    if not isinstance(value, list) or len(value) != n:
        return None
    out = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return None
        kind, val = item
        if kind == "ok" and not (isinstance(val, float)):
            return None
        out.append(Scored(kind, val))
    return out


_pool = None
_pool_pid = -1
_pool_lock = threading.Lock()


def _sandbox_pool():
    """This process's pool of scorer sandboxes (no pre-started ones: a scorer run's
    interpreter start is small beside its imports)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool, _pool_pid = SandboxPool(prestart=False), os.getpid()
        return _pool


def score_untrusted(groups: Sequence[tuple[str, dict, Sequence[tuple[str, dict]]]]
                    ) -> list[list[Scored]]:
    """Score each group ``(dataset, config, [(answer, entry), ...])`` in the sandbox, the
    groups' chunks of :data:`MAX_BATCH` concurrently (bounded by the machine-wide sandbox
    slots). A chunk whose run fails as a whole is run again answer by answer; an answer
    whose own run fails gets ``Scored("sandbox", "<status>: <detail>")``.

    Returns:
        One list of :class:`Scored` per group, in item order.

    Raises:
        ValueError: an unknown dataset. ImportError: reasoning-gym is not installed.
    """
    chunks = []  # (group index, start, dataset, config, items)
    for g, (dataset, config, items) in enumerate(groups):
        for start in range(0, len(items), MAX_BATCH):
            chunks.append((g, start, dataset, config, list(items[start:start + MAX_BATCH])))
    pool = _sandbox_pool()
    jobs = [build_job(d, c, it) for _, _, d, c, it in chunks]
    results = pool.map(jobs)
    out: list[list[Scored | None]] = [[None] * len(items) for _, _, items in groups]
    retry = []
    for (g, start, dataset, config, items), result in zip(chunks, results):
        scored = _outcomes(result, len(items))
        if scored is None and len(items) == 1:
            scored = [Scored("sandbox", f"{result.status}: {result.detail}"[:200])]
        if scored is None:
            retry += [(g, start + i, dataset, config, [item]) for i, item in enumerate(items)]
            continue
        out[g][start:start + len(items)] = scored
    if retry:
        again = pool.map([build_job(d, c, it) for _, _, d, c, it in retry])
        for (g, i, *_), result in zip(retry, again):
            scored = _outcomes(result, 1)
            out[g][i] = scored[0] if scored else Scored(
                "sandbox", f"{result.status}: {result.detail}"[:200])
    return out  # type: ignore[return-value]

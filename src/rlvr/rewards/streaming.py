"""Scoring a stream of ``rlvr verify`` records in chunks: the records are read, scored and
handed on one chunk at a time, so memory stays flat whatever the input's size.

:func:`score_records` takes any iterable of records (a generator reading the input file:
:func:`rlvr.rewards.records_io.iter_records`) and yields each chunk with its results; the
caller writes them out and counts them (:class:`rlvr.rewards.summary.SummaryAccumulator`)
before the next chunk is read. A chunk is scored by one
:meth:`~rlvr.rewards.pipeline.RewardPipeline.score_batch` call, so the verifier processes
stay busy across its records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TypeVar

from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.records_io import VerifyRecord
from rlvr.rewards.types import RewardResult

T = TypeVar("T")

#: Records scored per chunk: enough to keep a few dozen verifier processes busy.
CHUNK = 256


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), reading ``items`` only as far as
    the list being built.

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"batches: size must be >= 1, got {size}")
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def score_records(
    pipeline: RewardPipeline,
    records: Iterable[VerifyRecord],
    *,
    chunk: int = CHUNK,
    on_result: Callable[[int], None] | None = None,
) -> Iterator[tuple[list[VerifyRecord], list[RewardResult]]]:
    """Score ``records`` a chunk at a time: yields ``(chunk_records, results)`` (same order,
    ``chunk`` records or fewer for the last), reading the next chunk of ``records`` only when
    the caller asks for it.

    Args:
        pipeline: the reward pipeline (its verifier processes are reused across chunks).
        records: the records, read lazily (a generator is consumed one chunk at a time).
        chunk: records per chunk (>= 1).
        on_result: called with the number of records scored so far, for progress bars.

    Raises:
        ValueError: ``chunk`` < 1.
        rlvr.io.InputError: as ``records`` raises it (a bad line of the input).
    """
    done = 0
    for batch in batches(records, chunk):
        requests = [ScoreRequest(r.completion, r.reference, r.task_type) for r in batch]
        progress = None if on_result is None else (lambda n, base=done: on_result(base + n))
        results = pipeline.score_batch(requests, progress)
        done += len(batch)
        yield batch, results

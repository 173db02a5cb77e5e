"""Where a step's rows are cut into micro-batches: by rows, and optionally by padded tokens.

A micro-batch's forward and backward pad every row to its longest completion, so its cost is
``rows x longest`` completion tokens (plus its prompts). One runaway completion (64 tokens where
the others stop at 17) in a one-micro-batch step makes that step's update ~3x as long. A token
budget (``grpo.micro_batch_tokens``; verl's dynamic batch size, ``ppo_max_token_len_per_gpu``,
bounds tokens the same way) cuts the rows, sorted by completion length, so the long rows pad
only each other.
"""

from __future__ import annotations

from collections.abc import Sequence


def micro_batch_slices(lengths: Sequence[int], max_rows: int,
                       max_tokens: int | None = None) -> list[slice]:
    """Consecutive micro-batches over rows with completion ``lengths``, in the given order.

    A micro-batch holds at most ``max_rows`` rows and, with ``max_tokens``, at most
    ``max_tokens`` padded completion tokens (its rows times its longest completion); a row
    longer than ``max_tokens`` alone still forms a micro-batch of one. Greedy: each
    micro-batch takes rows until the next would break a bound, which for lengths sorted
    ascending gives the fewest micro-batches.

    Args:
        lengths: completion tokens of each row (any order; sort ascending for the tightest cut).
        max_rows: the most rows per micro-batch (``grpo.micro_batch_size``), >= 1.
        max_tokens: the most padded completion tokens per micro-batch, >= 1; None: rows only.

    Returns:
        Slices covering ``range(len(lengths))`` in order (empty for no rows).

    Raises:
        ValueError: ``max_rows`` or ``max_tokens`` below 1.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1 or None, got {max_tokens}")
    slices, start, longest = [], 0, 0
    for i, length in enumerate(map(int, lengths)):
        rows, longest = i - start + 1, max(longest, length)
        if i > start and (rows > max_rows
                          or (max_tokens is not None and rows * longest > max_tokens)):
            slices.append(slice(start, i))  # row i starts the next micro-batch
            start, longest = i, length
    if len(lengths) > start:
        slices.append(slice(start, len(lengths)))
    return slices

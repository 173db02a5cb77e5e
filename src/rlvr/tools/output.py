"""Size bounds on observation text: cut to a byte budget, saying how much was cut."""

from __future__ import annotations

from rlvr.tools.types import MIN_OUTPUT_BYTES


def bound_text(text: str, max_bytes: int, *, keep: str = "head") -> tuple[str, int]:
    """``text`` cut to at most ``max_bytes`` bytes of UTF-8, **marker included**.

    When ``text`` fits it is returned unchanged. Otherwise whole characters are kept from the
    start (``keep="head"``) or the end (``keep="tail"``) and a marker line names the bytes cut:
    ``"...kept text\\n[... 1048012 bytes cut]"`` (head) or ``"[... 120 bytes cut]\\nkept..."``
    (tail).

    Args:
        text: any text.
        max_bytes: the budget in bytes of UTF-8, >= :data:`MIN_OUTPUT_BYTES` (64).
        keep: ``"head"`` or ``"tail"``.

    Returns:
        ``(bounded text, bytes of the original cut)``; the count is 0 when nothing was cut.

    Raises:
        ValueError: ``max_bytes`` below the minimum, or ``keep`` another value.
    """
    if keep not in ("head", "tail"):
        raise ValueError(f"keep must be 'head' or 'tail', not {keep!r}")
    if max_bytes < MIN_OUTPUT_BYTES:
        raise ValueError(f"max_bytes must be >= {MIN_OUTPUT_BYTES}, got {max_bytes}")
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text, 0
    # The marker's length with the largest count it can show (the whole text cut).
    room = max_bytes - len(_marker(len(data), keep).encode())
    kept = data[:room] if keep == "head" else data[len(data) - room:]
    kept_text = kept.decode("utf-8", "ignore")  # a character split at the cut is dropped
    cut = len(data) - len(kept_text.encode("utf-8"))
    marker = _marker(cut, keep)
    return (kept_text + marker if keep == "head" else marker + kept_text), cut


def _marker(cut: int, keep: str) -> str:
    return f"\n[... {cut} bytes cut]" if keep == "head" else f"[... {cut} bytes cut]\n"

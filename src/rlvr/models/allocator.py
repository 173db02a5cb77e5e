"""The process's allocators set up for tensors that are allocated and freed over and over, two
ways: the rollout engine's decode steps keep freed memory in glibc's heap
(:func:`keep_freed_memory`), the policy update maps its large blocks on their own
(:func:`mapped_large_blocks`), through rlvr's caching allocator where it builds
(:mod:`rlvr.kernels.block_cache`: freed blocks reused within a bound, the measurements there),
else through glibc (``malloc``), which the rest of this page is about.

glibc's default serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB at start) with
its own ``mmap`` and unmaps it on free, but raises the threshold to the size of each such block
freed (up to 32 MiB); blocks under the threshold come from the heap, whose freed holes stay
resident and are reused only by requests that fit them, and whose top is returned to the OS
only when free. An update allocates activations of MiB each, keeps some for the backward and
frees the rest, so with its activations in the heap the heap can grow past what is live and
stay there. Measured (SmolLM2-135M, LoRA r16, one update of 4 rows x 316 tokens, fp32, in a
process that had run no rollout engine): live bytes (``mallinfo2``) peaked at 2.2 GiB in every
run, while the heap reached 1.7 GiB in some runs and 2.8 GiB in most, as the forward grew it
~1.6x faster than the live bytes; peak resident memory 3.1 or 4.2 GiB. Fixing the threshold at
32 MiB (the engine's setting) did not stop it (3.1 / 4.2 GiB). With the threshold fixed at
128 KiB every activation is its own mapping, so resident memory is what is live: 3.0 GiB.

A fresh mapping costs page faults and zeroed pages on first touch, and on a 2-core VM the
update spent 39-40 s of CPU time in the kernel that way in a 52-55 s update (SmolLM2-135M,
16 rows x 256 tokens, 9.3 M minor faults). Two settings bring that down while memory stays
bounded: torch backs tensors of 2 MiB or more with transparent huge pages
(``THP_MEM_ALLOC_ENABLE``, set by importing :mod:`rlvr` before torch: one fault per 2 MiB
instead of per 4 KiB), and the update maps only blocks of 2 MiB or more, the rest coming from
the heap, where blocks that small fragment little. Measured on the 2-core AVX2-only EPYC
(fp32), one update each, with the mapping threshold and page size of each column:

| update (MiB: peak) | 128 KiB, 4 KiB pages | 128 KiB, huge | 2 MiB, huge | heap (32 MiB) |
|---|---|---|---|---|
| full, 16 x 256 | 52.2-55.2 s | 46.1 s, 6,764 | 42.5 s, 7,380 | 38.2 s, 8,490 |
| LoRA + ckpt, 4 x 1,024 | 61.0 s, 2,227 | 56.3 s, 2,225 | 53.0 s, 2,333 | 52.8 s, 7,164 |

(Both rows were measured with torch's fused AdamW in the update, 0.3 s a step faster at 135M
full fine-tuning than the single-tensor AdamW rlvr uses; the LoRA row's 4 KiB and heap figures
before the update took its entropy from the log-probs' log-softmax, which changes little there:
56.3 s with huge pages both before and after.)
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rlvr.kernels import block_cache

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: The decode regime: blocks under 32 MiB (glibc's dynamic maximum) from the heap.
KEEP_MMAP_THRESHOLD = 32 << 20
#: Free memory at the heap's top kept for the next decode step instead of returned to the OS.
KEEP_TRIM_THRESHOLD = 1 << 30
#: The update regime: blocks of 2 MiB or more (a huge page) mapped on their own (module doc).
MAPPED_MMAP_THRESHOLD = 2 << 20
#: Freed blocks the caching allocator may keep beyond the update's live peak: without it a
#: forward pass, whose live total is at its running peak throughout, evicts every freed
#: temporary at each new activation (135M LoRA, one micro-batch of 4 x 256: 7.1-7.9 s with
#: none, 6.8-6.9 s with 512 MiB, +55 MiB peak; full fine-tuning: no change in time).
CACHE_HEADROOM = 256 << 20

_state = {"keep": False}  # whether keep_freed_memory is this process's regime


@functools.cache
def libc():
    """glibc through ctypes, or None off glibc (the settings here are then no-ops)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _mallopt(param: int, value: int) -> bool:
    lib = libc()
    if lib is None or not hasattr(lib, "mallopt"):
        return False
    return bool(lib.mallopt(param, value))


def keep_freed_memory() -> bool:
    """Serve blocks up to 32 MiB from the heap and keep up to 1 GiB of freed memory at its top,
    process-wide (the regime stays until changed; :func:`mapped_large_blocks` puts it back).

    By default glibc returns large blocks to the OS on free and maps fresh, zeroed pages on the
    next allocation, so every decode step page-faults through its activations and fp32 logits
    (measured: softmax over [64, 49152] 8 ms -> 1.6 ms).

    Returns:
        True if glibc accepted both settings; False off glibc (nothing changed).
    """
    ok = _mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD,
                                                                       KEEP_TRIM_THRESHOLD)
    _state["keep"] = _state["keep"] or ok
    return ok


@contextmanager
def mapped_large_blocks(cache: bool = True) -> Iterator[bool]:
    """Inside: every block of 2 MiB or more gets its own mapping, so the resident memory is
    the live memory (module doc: the heap fragmentation it avoids; blocks under 2 MiB still
    come from the heap).

    With ``cache`` and the native caching allocator available
    (:mod:`rlvr.kernels.block_cache`), torch's tensors of 2 MiB or more come from it: a freed
    block stays mapped for the next tensor of its size while everything mapped stays within
    the largest live total seen plus :data:`CACHE_HEADROOM` (no zero-filled fresh pages each
    micro-batch: 135M full fine-tuning, 16 rows x 256 tokens, 33.5-35.6 s -> 27.8 s at the
    same peak), and every kept block is unmapped on exit.
    Otherwise glibc maps each block on its own and unmaps it on free. On exit the
    :func:`keep_freed_memory` regime is put back if this process had it; otherwise glibc's
    threshold stays fixed at 2 MiB (no longer raised by glibc). Nested and concurrent uses
    (threads) share one cache, released when the last one exits.

    Yields:
        True if glibc accepted the setting; False off glibc (nothing changed).
    """
    ok = _mallopt(M_MMAP_THRESHOLD, MAPPED_MMAP_THRESHOLD)
    cached = cache and _enter_cache()
    try:
        yield ok
    finally:
        if cached:
            _exit_cache()
        if ok and _state["keep"]:
            _mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_THRESHOLD)


_CACHE_USERS = {"depth": 0}
_CACHE_LOCK = threading.Lock()


def _enter_cache() -> bool:
    with _CACHE_LOCK:
        first = _CACHE_USERS["depth"] == 0
        if first and not block_cache.enable(MAPPED_MMAP_THRESHOLD, CACHE_HEADROOM):
            return False
        _CACHE_USERS["depth"] += 1
        return True


def _exit_cache() -> None:
    with _CACHE_LOCK:
        _CACHE_USERS["depth"] -= 1
        if _CACHE_USERS["depth"] == 0:
            block_cache.disable()

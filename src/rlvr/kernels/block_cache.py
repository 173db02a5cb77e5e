"""A caching allocator for torch's large CPU tensors, for the policy update
(``block_cache.cpp`` beside this file; used by :func:`rlvr.models.allocator.mapped_large_blocks`).

An update allocates the same activations and gradients micro-batch after micro-batch. With
each large tensor its own mapping, returned to the OS on free (what keeps resident memory at
the live memory), every one of them is fresh memory that the kernel zero-fills on first touch:
on a 2-core VM, an update of SmolLM2-135M (16 rows x 256 tokens, fp32) spent 16-20 s of CPU
time in the kernel and ran at 1.8x its FLOP floor, its matmuls' fresh outputs slowing them
most. Glibc's heap reuses freed memory but fragments: resident memory up to 3x the live memory
(:mod:`rlvr.models.allocator`). This allocator keeps both properties: while enabled, every
tensor of at least ``min_bytes`` gets its own mapping, a freed one is kept and handed to the
next request of its size (up to 1/8 larger), and before a new block is mapped the least
recently freed ones are unmapped until everything mapped fits in the largest live total seen
since :func:`enable` plus ``headroom`` bytes, so resident memory stays
at what the live tensors needed at their peak, plus that margin: the kind of allocator torch
uses for CUDA, bounded for a machine whose memory is shared.

Measured (2-core AMD EPYC VM, AVX2 only, fp32, the update alone, each pair back to back):

| update | each block mapped on its own | cached, huge pages | cached, 4 KiB pages |
|---|---|---|---|
| 135M full, 16 x 256 (4 micro-batches) | 35.5 s | 29.9 / 30.2 s | 32.0 s |
| 135M LoRA r16, 4 x 256 (1 micro-batch) | 8.2 s | 8.4 / 7.3 s | 6.1 s |
| 135M LoRA + checkpointing, 4 x 256 | 12.0 s | 9.5 / 8.2 s | 7.9 s |
| 360M full, 16 x 256 | 85.9 s | 70.4 / 69.9 s | 69.0 s |
| 0.5B LoRA + checkpointing, 8 x 256 | 58.2 s | 48.8 / 48.8 s | 45.9 s |
| 135M LoRA, 16 x 256, 600-token prompt | 48.4 s | 39.9 / 36.4 s | 36.5 s |

(two sessions of pairs: the first two columns, then the last two; peaks within 2% in every
pair). Blocks get the system's default page size: reused blocks fault nothing whatever their
pages, but the activations an update keeps are fresh memory, and on this VM, which hands freed
memory back to its host, a fresh 2 MiB huge page took ~2.3 ms a MiB to fault in against ~0.56
ms for 4 KiB pages (recycled huge pages: ~0.2 ms).

The allocator is C++ (it implements torch's ``c10::Allocator``), built on first use with the
system C++ compiler (``$CXX``, else ``c++``) against the installed torch's headers and cached
with the kernels (:func:`rlvr.kernels.cache_dir`). Without a compiler, with a failed build or
with ``RLVR_NATIVE_KERNELS=0``, :func:`available` is False and callers keep their fallback.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.kernels.library import KernelBuildError, cached_build, check_compiler, find_compiler

SOURCE = "block_cache.cpp"
_FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC")
_STATE: dict = {"lib": None, "tried": False, "reason": None}


@dataclass(frozen=True)
class CacheStats:
    """Bytes and counts of the allocator since the process started (bytes: live now)."""

    live: int  #: bytes of blocks in use by tensors
    cached: int  #: bytes of freed blocks kept for reuse
    mapped: int  #: live + cached
    peak_mapped: int  #: the largest ``mapped`` seen
    hits: int  #: requests served by a kept block
    misses: int  #: requests that mapped a new block
    evictions: int  #: kept blocks unmapped to stay inside the bound


def _torch_flags() -> tuple[str, ...]:
    root = Path(torch.__file__).parent
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return (f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-I{root / 'include'}", f"-L{root / 'lib'}",
            "-lc10", f"-Wl,-rpath,{root / 'lib'}")


def build(force: bool = False) -> Path:
    """Compile ``block_cache.cpp`` (or reuse the cached build) and return the library's path.

    The cache key hashes the source, the compiler's version, the flags and torch's version
    (the library links torch's ``libc10``); the build links into a temporary file that is
    renamed into place, so concurrent builds never load a half-written file.

    Raises:
        KernelBuildError: no C++ compiler, or the compiler failed (its stderr in the message).
    """
    compiler = find_compiler("CXX", "c++", "C++")
    flags = (*_FLAGS, *_torch_flags())
    source = Path(__file__).with_name(SOURCE)

    def compile_into(_work: Path, output: str) -> None:
        done = subprocess.run([compiler, str(source), "-o", output, *flags],
                              capture_output=True, text=True)
        check_compiler(compiler, done.returncode, done.stderr)

    parts = [source.read_bytes(), " ".join(flags).encode(), torch.__version__.encode()]
    return cached_build("rlvr_block_cache", compiler, parts, compile_into, force)


def _library() -> ctypes.CDLL | None:
    if _STATE["tried"]:
        return _STATE["lib"]
    _STATE["tried"] = True
    if os.environ.get("RLVR_NATIVE_KERNELS", "1") == "0":
        _STATE["reason"] = "disabled by RLVR_NATIVE_KERNELS=0"
        return None
    try:
        lib = ctypes.CDLL(str(build()))
        lib.rlvr_block_cache_enable.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
        lib.rlvr_block_cache_enable.restype = ctypes.c_int
        lib.rlvr_block_cache_disable.argtypes, lib.rlvr_block_cache_disable.restype = [], None
        lib.rlvr_block_cache_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        lib.rlvr_block_cache_stats.restype = None
        _STATE["lib"] = lib
    except (KernelBuildError, OSError, AttributeError) as err:
        _STATE["reason"] = str(err)
        warnings.warn(f"rlvr's caching allocator unavailable ({err}); the policy update maps "
                      f"each large tensor on its own instead (slower)", stacklevel=3)
    return _STATE["lib"]


def available() -> bool:
    """Whether the allocator is built and loaded (builds it on the first call)."""
    return _library() is not None


def unavailable_reason() -> str | None:
    """Why :func:`available` is False (after it was called), or None."""
    return _STATE["reason"]


def enable(min_bytes: int = 2 << 20, headroom: int = 0) -> bool:
    """Install the caching allocator as torch's CPU allocator (process-wide, every thread).

    Args:
        min_bytes: tensors of at least this many bytes (raised to 2 MiB if smaller) are
            its blocks; smaller ones go to the allocator installed before.
        headroom: bytes mapped beyond the largest live total (bytes of its blocks in use)
            seen since this call: 0 maps no more than the live tensors needed at their peak;
            more keeps freed temporaries reusable while the live total is at its peak, as it
            is through a forward pass.

    Returns:
        True if installed (or already on); False if unavailable or another allocator was
        installed with a higher priority (nothing changed).
    """
    lib = _library()
    return bool(lib is not None and lib.rlvr_block_cache_enable(int(min_bytes), int(headroom)))


def disable() -> None:
    """Put the previous CPU allocator back and unmap every kept block (a block still in use
    is unmapped when its tensor is freed). A no-op when not enabled."""
    lib = _library()
    if lib is not None:
        lib.rlvr_block_cache_disable()


def stats() -> CacheStats:
    """The allocator's :class:`CacheStats` (all zero when it is unavailable)."""
    lib = _library()
    out = (ctypes.c_uint64 * 7)()
    if lib is not None:
        lib.rlvr_block_cache_stats(out)
    return CacheStats(*(int(v) for v in out))

"""Building and loading the native kernel library (see :mod:`rlvr.kernels`).

:func:`build` compiles the ``*.c`` sources beside this file with the system C compiler into a
shared library cached under :func:`cache_dir`, keyed by a hash of the sources, the compiler,
every flag and the CPU's feature flags; :func:`load` declares the C signatures of its
functions; :func:`native` does both once per process and returns None (with the reason in
:func:`unavailable_reason`) when the kernels are unavailable.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

# Imported before any kernel library is loaded: the library's libgomp.so.1 dependency then
# resolves to the one torch already loaded, so both share one OpenMP thread pool.
import torch  # noqa: F401

_SOURCES = ("decode_attention.c", "fused_ops.c", "sampling.c", "decode_attention_f32.c",
            "fused_ops_f32.c", "update_ops_f32.c")
_HEADERS = ("bf16.h", "simd_f32.h")
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC")
# What native() found, once per process: the library, whether it tried, why it is None.
_LIBRARY: ctypes.CDLL | None = None
_TRIED = False
_REASON: str | None = None
ENV_FLAGS = "RLVR_KERNEL_CFLAGS"


class KernelBuildError(RuntimeError):
    """The native kernels could not be compiled or loaded (the message holds the reason)."""


def cache_dir() -> Path:
    """Folder of compiled kernel libraries: ``$RLVR_KERNEL_CACHE`` or ``~/.cache/rlvr/kernels``."""
    return Path(os.environ.get("RLVR_KERNEL_CACHE") or Path.home() / ".cache" / "rlvr" / "kernels")


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def find_compiler(variable: str = "CC", default: str = "cc", language: str = "C") -> str:
    """``$variable``, else ``default``: the compiler a native build runs.

    Raises:
        KernelBuildError: it is not on PATH.
    """
    compiler = os.environ.get(variable) or default
    if shutil.which(compiler) is None:
        raise KernelBuildError(f"no {language} compiler ({compiler!r} not on PATH)")
    return compiler


def cached_build(prefix: str, compiler: str, key_parts: list[bytes],
                 compile_into: Callable[[Path, str], None], force: bool = False) -> Path:
    """The shared library ``<prefix>_<hash>.so`` in :func:`cache_dir`, built if missing.

    The hash covers ``key_parts`` and the compiler's ``--version``. ``compile_into(work,
    output)`` builds the library at ``output`` inside the temporary folder ``work`` (in the
    cache folder), which is then renamed into place, so concurrent builds never load a
    half-written file.

    Raises:
        KernelBuildError: from ``compile_into``.
    """
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256()
    for part in [*key_parts, version.encode()]:
        key.update(part)
    folder = cache_dir()
    target = folder / f"{prefix}_{key.hexdigest()[:16]}.so"
    if target.exists() and not force:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as work:
        tmp = str(Path(work) / target.name)
        compile_into(Path(work), tmp)
        os.replace(tmp, target)
    return target


def compiler_flags(extra_flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The flags :func:`build` compiles with: the defaults, then ``$RLVR_KERNEL_CFLAGS``, then
    ``extra_flags`` (later flags win, e.g. the last ``-march``).

    Raises:
        KernelBuildError: ``$RLVR_KERNEL_CFLAGS`` is not a valid shell-quoted flag list.
    """
    try:
        env = tuple(shlex.split(os.environ.get(ENV_FLAGS, "")))
    except ValueError as err:
        raise KernelBuildError(f"${ENV_FLAGS} cannot be parsed: {err}") from err
    return (*_FLAGS, *env, *extra_flags)


def build(extra_flags: tuple[str, ...] = (), force: bool = False) -> Path:
    """Compile the kernels (or reuse the cached build) and return the library's path.

    Args:
        extra_flags: appended to the compiler flags after ``$RLVR_KERNEL_CFLAGS`` (e.g.
            ``("-march=haswell",)`` builds the AVX2 paths, ``("-mno-avx512f",)`` the bf16
            kernels' portable loops; tests use them to check every code path on one machine).
        force: rebuild even when a cached library exists.

    The sources are compiled in parallel (one compiler process each: a first build takes
    about as long as the largest source), then linked into a temporary file in the cache folder
    that is renamed into place, so concurrent builds never load a half-written file.

    Raises:
        KernelBuildError: no compiler, unparsable ``$RLVR_KERNEL_CFLAGS``, or the compiler
            failed (its stderr is in the message).
    """
    compiler = find_compiler()
    here = Path(__file__).parent
    flags = compiler_flags(extra_flags)

    def compile_into(work: Path, output: str) -> None:
        objects = [str(work / f"{Path(name).stem}.o") for name in _SOURCES]
        jobs = [subprocess.Popen([compiler, *flags, "-c", str(here / name), "-o", obj],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for name, obj in zip(_SOURCES, objects)]
        errors = [job.communicate()[1] for job in jobs]  # every job finishes before a raise
        for job, err in zip(jobs, errors):
            check_compiler(compiler, job.returncode, err)
        result = subprocess.run([compiler, *flags, *objects, "-o", output, "-lm"],
                                capture_output=True, text=True)
        check_compiler(compiler, result.returncode, result.stderr)

    parts = [*((here / name).read_bytes() for name in _SOURCES + _HEADERS),
             _cpu_flags().encode(), " ".join(flags).encode()]
    return cached_build("rlvr_kernels", compiler, parts, compile_into, force)


def check_compiler(compiler: str, code: int, stderr: str) -> None:
    """Raise :class:`KernelBuildError` with the compiler's stderr if it exited non-zero."""
    if code != 0:
        raise KernelBuildError(f"{compiler} failed ({code}): {stderr.strip()[-2000:]}")


def load(path: Path | str) -> ctypes.CDLL:
    """Load a library built by :func:`build` and declare its functions' C signatures.

    Raises:
        OSError: the file cannot be loaded.
    """
    lib = ctypes.CDLL(str(path))
    ptr, i64, f32, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    per_dtype = {  # the same C signature for the bf16 and the fp32 build of each kernel
        "decode_attention": ([ptr, i64, ptr, ptr, i64, ptr, ptr, ptr, i64, i64, ptr, i64,
                              ptr, i64, ptr, i64, i64, i64, i64, f32, ptr, i32], i32),
        "add_rms_norm": ([ptr, ptr, ptr, f32, ptr, i64, i64, i32], None),
        "rope": ([ptr, i64, ptr, ptr, ptr, i64, i64, i64, i32], None),
        "silu_mul": ([ptr, ptr, i64, i64, i32], None),
        "sample": ([ptr, i64, i64, f32, ptr, ptr, ptr, i32], i32),
    }
    signatures = {f"{name}_{dtype}": sig for name, sig in per_dtype.items()
                  for dtype in ("bf16", "f32")}
    signatures["simd_f32_width"] = ([], i32)
    signatures["silu_mul_flat_f32"] = ([ptr, ptr, ptr, i64, i32], None)
    signatures["silu_mul_backward_f32"] = ([ptr, ptr, ptr, ptr, ptr, i64, i32], None)
    signatures["rms_norm_backward_f32"] = ([ptr, ptr, ptr, f32, ptr, ptr, i64, i64, i32], None)
    signatures["log_softmax_gather_f32"] = ([ptr, ptr, f32, ptr, ptr, ptr, i64, i64, i32], None)
    signatures["log_softmax_gather_backward_f32"] = (
        [ptr, ptr, f32, ptr, ptr, ptr, ptr, ptr, i64, i64, i32], None)
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return lib


def unavailable_reason() -> str | None:
    """Why :func:`native` returned None (after it was called), or None if it did not."""
    return _REASON


def native() -> ctypes.CDLL | None:
    """The loaded kernel library, or None when unavailable (reason warned once per process)."""
    global _LIBRARY, _TRIED, _REASON
    if _TRIED:
        return _LIBRARY
    _TRIED = True
    if os.environ.get("RLVR_NATIVE_KERNELS", "1") == "0":
        _REASON = "disabled by RLVR_NATIVE_KERNELS=0"
        return None
    if platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"):
        _REASON = f"unsupported platform {platform.machine()}"
    else:
        try:
            _LIBRARY = load(build())
        except (KernelBuildError, OSError, AttributeError) as err:
            _REASON = str(err)
    if _REASON is not None:
        warnings.warn(f"rlvr native kernels unavailable ({_REASON}); the torch rollout engine "
                      f"and the policy update run their pure-torch paths (slower)", stacklevel=2)
    return _LIBRARY


def vector_width(lib: ctypes.CDLL) -> int:
    """fp32 lanes per SIMD vector of this build of the library: 16 (AVX-512F), 8 (AVX2 + FMA) or
    4 (portable generic vectors), i.e. which ``simd_f32.h`` path its compiler flags selected."""
    return int(lib.simd_f32_width())


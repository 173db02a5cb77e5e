"""Native CPU kernels of the ``torch`` rollout engine, compiled on first use.

The kernels are plain C (``*.c`` beside this file) built with the system C compiler
(``$CC``, else ``cc``) at ``-O3 -march=native -fopenmp`` into a shared library cached under
``$RLVR_KERNEL_CACHE`` (default ``~/.cache/rlvr/kernels``), keyed by a hash of the source, the
compiler and the CPU's feature flags, so a cache shared across machines never runs code built
for another CPU. They are called through ``ctypes`` (which releases the GIL) and share torch's
OpenMP runtime: the library's ``libgomp.so.1`` dependency resolves to the one torch already
loaded, so both use one thread pool and ``torch.set_num_threads`` applies to both.

Nothing here is required: with no compiler, a failed build or a non-x86/ARM platform,
:func:`native` returns None (with a warning that names the reason, once per process), and so
it does, silently, when ``RLVR_NATIVE_KERNELS=0`` is set; the engine then runs its pure-torch
path. :func:`unavailable_reason` says why.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

_SOURCES = ("decode_attention.c", "fused_ops.c", "sampling.c")
_HEADERS = ("bf16.h",)
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC")
_LIBRARY: ctypes.CDLL | None = None
_TRIED = False
_REASON: str | None = None


# decode_attention.c's limits: MAX_GROUP query heads per kv head; a head dim that is a
# multiple of 16 (its AVX-512 path; the portable build takes any).
MAX_GROUP = 8
HEAD_DIM_MULTIPLE = 16


def supports(heads: int, kv_heads: int, head_dim: int) -> bool:
    """Whether :func:`decode_attention` handles this attention shape."""
    return heads % kv_heads == 0 and heads // kv_heads <= MAX_GROUP and head_dim % HEAD_DIM_MULTIPLE == 0


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


def _compiler() -> str:
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        raise KernelBuildError(f"no C compiler ({compiler!r} not on PATH)")
    return compiler


def build(extra_flags: tuple[str, ...] = (), force: bool = False) -> Path:
    """Compile the kernels (or reuse the cached build) and return the library's path.

    Args:
        extra_flags: appended to the compiler flags (e.g. ``("-mno-avx512f",)`` builds the
            portable loops; tests use it to check every code path on one machine).
        force: rebuild even when a cached library exists.

    The library is written to a temporary file in the cache folder and renamed into place, so
    concurrent builds never load a half-written file.

    Raises:
        KernelBuildError: no compiler, or the compiler failed (its stderr is in the message).
    """
    compiler = _compiler()
    here = Path(__file__).parent
    flags = (*_FLAGS, *extra_flags)
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256()
    for part in [*((here / name).read_bytes() for name in _SOURCES + _HEADERS),
                 version.encode(), _cpu_flags().encode(), " ".join(flags).encode()]:
        key.update(part)
    folder = cache_dir()
    target = folder / f"rlvr_kernels_{key.hexdigest()[:16]}.so"
    if target.exists() and not force:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        result = subprocess.run([compiler, *flags, *(str(here / n) for n in _SOURCES), "-o", tmp,
                                 "-lm"], capture_output=True, text=True)
        if result.returncode != 0:
            raise KernelBuildError(f"{compiler} failed ({result.returncode}): "
                                   f"{result.stderr.strip()[-2000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def load(path: Path | str) -> ctypes.CDLL:
    """Load a library built by :func:`build` and declare its functions' C signatures.

    Raises:
        OSError: the file cannot be loaded.
    """
    import torch  # noqa: F401  (loads torch's libgomp first, so the library shares it)

    lib = ctypes.CDLL(str(path))
    ptr, i64, f32, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
    signatures = {
        "decode_attention_bf16": ([ptr, i64, ptr, ptr, i64, ptr, ptr, ptr, i64, i64, ptr, i64,
                                   ptr, i64, ptr, i64, i64, i64, i64, f32, ptr, i32], i32),
        "add_rms_norm_bf16": ([ptr, ptr, ptr, f32, ptr, i64, i64, i32], None),
        "rope_bf16": ([ptr, i64, ptr, ptr, ptr, i64, i64, i64, i32], None),
        "silu_mul_bf16": ([ptr, ptr, i64, i64, i32], None),
        "sample_bf16": ([ptr, i64, i64, f32, ptr, ptr, ptr, i32], i32),
    }
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
                      f"runs its pure-torch path (slower)", stacklevel=2)
    return _LIBRARY


def block_keys(keys):
    """Keys ``[..., columns, D]`` -> the kernel's blocked layout
    ``[..., ceil(columns / 16), D / 2, 16, 2]`` (16 columns per block, transposed inside by
    pairs of dims; columns past the end are zero). D must be even."""
    import torch.nn.functional as F

    columns = keys.shape[-2]
    padded = F.pad(keys, (0, 0, 0, (-columns) % 16))
    blocks = padded.unflatten(-2, (-1, 16)).unflatten(-1, (-1, 2))  # [..., B, 16, D / 2, 2]
    return blocks.transpose(-3, -2).contiguous()


def pair_values(values):
    """Values ``[..., columns, D]`` (columns even) -> the kernel's pair layout
    ``[..., columns / 2, D, 2]`` (element (j, d) at ``[j // 2, d, j % 2]``).

    Raises:
        ValueError: an odd number of columns.
    """
    if values.shape[-2] % 2:
        raise ValueError(f"pair_values needs an even number of columns, got {values.shape[-2]}")
    return values.unflatten(-2, (-1, 2)).transpose(-2, -1).contiguous()


def decode_attention(lib: ctypes.CDLL, queries, prompt_keys, prompt_values, prompt_start,
                     keys, values, columns: int, row_prompt, new_keys=None, new_values=None,
                     out=None):
    """One query token per row over its prompt's keys, then its own completion keys (bf16).

    Args:
        lib: from :func:`native`.
        queries: BFloat16Tensor[R, Hq, D], rows contiguous in (head, dim) (any row stride).
        prompt_keys: [P, Hkv, ceil(W / 16), D / 2, 16, 2] prompt keys in blocked layout
            (:func:`block_keys`); prompt_values: [P, Hkv, W / 2, D, 2] in pair layout
            (:func:`pair_values`); W even (left-pad a prompt by one column if needed).
        prompt_start: LongTensor[P], first real (unpadded) column of each prompt.
        keys: [rows >= R, Hkv, ceil(Tmax / 16), D / 2, 16, 2] completion keys, blocked; values:
            [rows, Hkv, Tmax / 2, D, 2], paired (Tmax even); row r of the batch uses row r of
            both. Value columns past ``columns`` must be finite (zero-initialise the cache).
        columns: completion columns each row attends to (1 <= columns <= Tmax).
        row_prompt: LongTensor[R], prompt index of each row.
        new_keys, new_values: optional BFloat16Tensor[R, Hkv, D] (heads contiguous, any row
            stride): this step's keys / values, written into completion column ``columns - 1``
            of ``keys`` / ``values`` before attending (one pass instead of two indexing copies).
        out: optional BFloat16Tensor[R, Hq * D] to write into.

    Returns:
        BFloat16Tensor[R, Hq * D]: ``softmax(q k^T / sqrt(D)) v`` per query head: fp32 scores
        and softmax, the probabilities rounded to bf16 for the product with the values (as
        torch's CPU flash attention does in bf16), fp32 accumulation, one rounding to bf16.

    Raises:
        ValueError: shapes, dtypes or layouts the kernel does not handle (G = Hq / Hkv > 8, or
            a head dim not a multiple of 16 on AVX-512).
        MemoryError: a per-thread work buffer could not be allocated.
    """
    import torch

    rows, heads, dim = queries.shape
    prompts, kv_heads, width = prompt_values.shape[0], prompt_values.shape[1], 2 * prompt_values.shape[2]
    tmax = 2 * values.shape[2]
    tensors = (queries, prompt_keys, prompt_values, keys, values)
    if any(t.dtype != torch.bfloat16 for t in tensors):
        raise ValueError("decode_attention takes bf16 tensors")
    if queries.stride(2) != 1 or queries.stride(1) != dim:
        raise ValueError(f"queries must be [R, Hq, D] with contiguous heads; got shape "
                         f"{tuple(queries.shape)} strides {queries.stride()}")
    if (prompt_keys.shape != (prompts, kv_heads, (width + 15) // 16, dim // 2, 16, 2)
            or keys.shape[1:] != (kv_heads, (tmax + 15) // 16, dim // 2, 16, 2)):
        raise ValueError(f"keys must be blocked [.., Hkv, ceil(columns / 16), D / 2, 16, 2]; got "
                         f"{tuple(prompt_keys.shape)} and {tuple(keys.shape)}")
    if prompt_values.shape[3:] != (dim, 2) or values.shape[3:] != (dim, 2):
        raise ValueError(f"values must be paired [.., Hkv, columns / 2, D, 2]; got "
                         f"{tuple(prompt_values.shape)} and {tuple(values.shape)}")
    if not all(t.is_contiguous() for t in tensors[1:]) or not 1 <= columns <= tmax:
        raise ValueError(f"caches must be contiguous and 1 <= columns ({columns}) <= {tmax}")
    if keys.shape[0] < rows or row_prompt.numel() != rows or prompt_start.numel() != prompts:
        raise ValueError("row_prompt / prompt_start / cache rows do not match the batch")
    new = (new_keys, new_values)
    if (new_keys is None) != (new_values is None) or any(
            t is not None and (t.dtype != torch.bfloat16 or t.shape != (rows, kv_heads, dim)
                               or t.stride(2) != 1 or t.stride(1) != dim) for t in new):
        raise ValueError(f"new_keys / new_values must both be bf16 [R, Hkv, D] = "
                         f"{(rows, kv_heads, dim)} with contiguous heads")
    if out is None:
        out = torch.empty(rows, heads * dim, dtype=torch.bfloat16)
    launch_decode_attention(lib, queries, prompt_keys, prompt_values,
                            prompt_start.to(torch.int64).contiguous(), keys, values, columns,
                            row_prompt.to(torch.int64).contiguous(), new_keys, new_values, out)
    return out


def launch_decode_attention(lib: ctypes.CDLL, queries, prompt_keys, prompt_values, prompt_start,
                            keys, values, columns: int, row_prompt, new_keys, new_values, out
                            ) -> None:
    """:func:`decode_attention` without its argument checks, for callers that validated the
    layouts once (the engine's cache calls it 30 times per decode step; the checks cost about
    as much as the kernel's first microseconds). Index tensors must be contiguous int64 and
    ``out`` given.

    Raises:
        ValueError, MemoryError: the kernel's own refusals (see :func:`decode_attention`).
    """
    import torch

    rows, heads, dim = queries.shape
    code = lib.decode_attention_bf16(
        queries.data_ptr(), queries.stride(0), prompt_keys.data_ptr(), prompt_values.data_ptr(),
        2 * prompt_values.shape[2], prompt_start.data_ptr(), keys.data_ptr(), values.data_ptr(),
        2 * values.shape[2], columns,
        None if new_keys is None else new_keys.data_ptr(), 0 if new_keys is None else new_keys.stride(0),
        None if new_values is None else new_values.data_ptr(),
        0 if new_values is None else new_values.stride(0), row_prompt.data_ptr(), rows, heads,
        prompt_values.shape[1], dim, dim ** -0.5, out.data_ptr(), torch.get_num_threads())
    if code == 1:
        raise MemoryError("decode_attention: could not allocate a work buffer")
    if code == 2:
        raise ValueError(f"decode_attention: unsupported heads {heads} / kv heads "
                         f"{prompt_values.shape[1]} / head dim {dim} (or odd cache widths)")


def _check_bf16(name: str, *tensors) -> None:
    import torch

    for t in tensors:
        if t.dtype != torch.bfloat16 or t.stride(-1) != 1:
            raise ValueError(f"{name} takes bf16 tensors with a contiguous last dim, got "
                             f"{t.dtype} strides {t.stride()}")


def add_rms_norm(lib: ctypes.CDLL, x, delta, weight, eps: float):
    """``x += delta`` in place (when ``delta`` is given), then RMSNorm of ``x``:
    ``bf16(weight * bf16(x * rsqrt(mean(x^2) + eps)))`` (Zhang & Sennrich 2019, eq. 4, with
    transformers' LlamaRMSNorm roundings).

    Args:
        x: BFloat16Tensor[R, H], contiguous (the residual stream; updated in place).
        delta: BFloat16Tensor[R, H] contiguous, or None. weight: BFloat16Tensor[H].

    Returns:
        BFloat16Tensor[R, H], the normalised rows.

    Raises:
        ValueError: wrong dtype or layout.
    """
    import torch

    _check_bf16("add_rms_norm", x, weight, *(() if delta is None else (delta,)))
    if not x.is_contiguous() or (delta is not None and not delta.is_contiguous()):
        raise ValueError("add_rms_norm needs contiguous x and delta")
    rows, hidden = x.shape
    out = torch.empty_like(x)
    lib.add_rms_norm_bf16(x.data_ptr(), None if delta is None else delta.data_ptr(),
                          weight.data_ptr(), eps, out.data_ptr(), rows, hidden,
                          torch.get_num_threads())
    return out


def rope(lib: ctypes.CDLL, x, cos, signed_sin):
    """Rotary embedding ``x * cos + rotate_half(x) * sin`` (Su et al. 2021, RoFormer, eq. 34)
    of every head, with ``signed_sin = cat(-sin1, sin2)`` and torch's bf16 roundings.

    Args:
        x: BFloat16Tensor[R, heads, D], heads contiguous (any row stride); D even.
        cos, signed_sin: BFloat16Tensor[R, D] contiguous.

    Returns:
        BFloat16Tensor[R, heads, D] contiguous.

    Raises:
        ValueError: wrong dtype or layout.
    """
    import torch

    rows, heads, dim = x.shape
    _check_bf16("rope", x, cos, signed_sin)
    if x.stride(1) != dim or dim % 2 or cos.shape != (rows, dim) or signed_sin.shape != (rows, dim):
        raise ValueError(f"rope: x [R, heads, D] with contiguous heads and cos / sin [R, D]; got "
                         f"{tuple(x.shape)} strides {x.stride()}, cos {tuple(cos.shape)}")
    out = torch.empty(rows, heads, dim, dtype=torch.bfloat16)
    lib.rope_bf16(x.data_ptr(), x.stride(0), cos.contiguous().data_ptr(),
                  signed_sin.contiguous().data_ptr(), out.data_ptr(), rows, heads, dim,
                  torch.get_num_threads())
    return out


def silu_mul(lib: ctypes.CDLL, gate_up):
    """SwiGLU's gate: ``bf16(bf16(silu(gate)) * up)`` (Shazeer 2020, eq. 5) for
    ``gate_up = cat(gate, up)``.

    Args:
        gate_up: BFloat16Tensor[R, 2 I], contiguous.

    Returns:
        BFloat16Tensor[R, I].

    Raises:
        ValueError: wrong dtype, layout or an odd width.
    """
    import torch

    _check_bf16("silu_mul", gate_up)
    rows, width = gate_up.shape
    if not gate_up.is_contiguous() or width % 2:
        raise ValueError(f"silu_mul needs a contiguous [R, 2 I] tensor, got {tuple(gate_up.shape)}")
    out = torch.empty(rows, width // 2, dtype=torch.bfloat16)
    lib.silu_mul_bf16(gate_up.data_ptr(), out.data_ptr(), rows, width // 2,
                      torch.get_num_threads())
    return out


def sample(lib: ctypes.CDLL, logits, temperature: float, uniforms):
    """One token per row from ``softmax(logits / temperature)`` (no top-k / top-p) by a
    two-level inverse CDF on ``uniforms`` (see ``sampling.c``; the same draw as
    :func:`rlvr.rollout.sampling.sample_next` makes from the same uniforms, up to fp32
    summation order).

    Args:
        logits: BFloat16Tensor[N, V], contiguous.
        temperature: > 0.
        uniforms: FloatTensor[N] in [0, 1).

    Returns:
        ``(tokens LongTensor[N], logprobs FloatTensor[N])``: the drawn tokens and their fp32
        ``log_softmax(logits / temperature)``.

    Raises:
        ValueError: wrong dtype, layout or a non-positive temperature.
        MemoryError: a work buffer could not be allocated.
    """
    import torch

    _check_bf16("sample", logits)
    if logits.dim() != 2 or not logits.is_contiguous() or not temperature > 0:
        raise ValueError(f"sample needs contiguous [N, V] logits and a temperature > 0, got "
                         f"{tuple(logits.shape)} at {temperature}")
    rows, vocab = logits.shape
    uniforms = uniforms.to(torch.float32).contiguous().view(-1)
    if uniforms.numel() != rows:
        raise ValueError(f"sample: {uniforms.numel()} uniforms for {rows} rows")
    tokens = torch.empty(rows, dtype=torch.int64)
    logprobs = torch.empty(rows, dtype=torch.float32)
    if lib.sample_bf16(logits.data_ptr(), rows, vocab, 1.0 / temperature, uniforms.data_ptr(),
                       tokens.data_ptr(), logprobs.data_ptr(), torch.get_num_threads()):
        raise MemoryError("sample: could not allocate a work buffer")
    return tokens, logprobs

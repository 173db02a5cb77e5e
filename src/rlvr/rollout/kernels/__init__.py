"""Native CPU kernels of the ``torch`` rollout engine, compiled on first use.

The kernels are plain C (``*.c`` beside this file) built with the system C compiler
(``$CC``, else ``cc``) at ``-O3 -march=native -fopenmp``, then the flags in
``$RLVR_KERNEL_CFLAGS`` (split like a shell command line; appended, so e.g.
``RLVR_KERNEL_CFLAGS=-march=haswell`` overrides ``-march=native`` and builds the AVX2 code paths
on an AVX-512 machine), into a shared library cached under ``$RLVR_KERNEL_CACHE`` (default
``~/.cache/rlvr/kernels``), keyed by a hash of the sources, the compiler, every flag and the
CPU's feature flags, so a cache shared across machines never runs code built for another CPU.

Two families, selected by the tensors' dtype in every wrapper below:

- **bf16** (``decode_attention.c``, ``fused_ops.c``): AVX-512 (with AVX512-BF16 dot products
  where present) and portable loops; for CPUs with native bf16 matmuls (AVX512-BF16, AMX).
- **fp32** (``decode_attention_f32.c``, ``fused_ops_f32.c``): one source over the fp32 SIMD
  layer of ``simd_f32.h``, whose AVX-512F (16 lanes), AVX2 + FMA (8 lanes) or portable (4-lane
  generic vectors: SSE2, NEON) path is chosen at compile time by the ``-march`` flags; for CPUs
  without native bf16, where torch emulates bf16 matmuls far slower than fp32 ones.

The sampler (``sampling.c``) takes either logit dtype, on the same SIMD layer.

The kernels are called through ``ctypes`` (which releases the GIL) and share torch's OpenMP
runtime: the library's ``libgomp.so.1`` dependency resolves to the one torch already
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
import shlex
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

_SOURCES = ("decode_attention.c", "fused_ops.c", "sampling.c", "decode_attention_f32.c",
            "fused_ops_f32.c")
_HEADERS = ("bf16.h", "simd_f32.h")
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC")
_LIBRARY: ctypes.CDLL | None = None
_TRIED = False
_REASON: str | None = None


# The decode-attention kernels' limits: MAX_GROUP query heads per kv head; a head dim that is
# a multiple of 16 (the AVX-512 vector width; the narrower paths take multiples of 8 or 4).
MAX_GROUP = 8
HEAD_DIM_MULTIPLE = 16
# Key columns per block of the kernels' blocked key layouts (both dtypes).
KEY_BLOCK = 16
ENV_FLAGS = "RLVR_KERNEL_CFLAGS"


def supports(heads: int, kv_heads: int, head_dim: int) -> bool:
    """Whether :func:`decode_attention` handles this attention shape (either dtype)."""
    return (heads % kv_heads == 0 and heads // kv_heads <= MAX_GROUP
            and head_dim % HEAD_DIM_MULTIPLE == 0)


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
    compiler = _compiler()
    here = Path(__file__).parent
    flags = compiler_flags(extra_flags)
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
    with tempfile.TemporaryDirectory(dir=folder) as work:
        objects = [str(Path(work) / f"{Path(name).stem}.o") for name in _SOURCES]
        jobs = [subprocess.Popen([compiler, *flags, "-c", str(here / name), "-o", obj],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for name, obj in zip(_SOURCES, objects)]
        errors = [job.communicate()[1] for job in jobs]  # every job finishes before a raise
        for job, err in zip(jobs, errors):
            _check_compiler(compiler, job.returncode, err)
        tmp = str(Path(work) / target.name)
        result = subprocess.run([compiler, *flags, *objects, "-o", tmp, "-lm"],
                                capture_output=True, text=True)
        _check_compiler(compiler, result.returncode, result.stderr)
        os.replace(tmp, target)
    return target


def _check_compiler(compiler: str, code: int, stderr: str) -> None:
    if code != 0:
        raise KernelBuildError(f"{compiler} failed ({code}): {stderr.strip()[-2000:]}")


def load(path: Path | str) -> ctypes.CDLL:
    """Load a library built by :func:`build` and declare its functions' C signatures.

    Raises:
        OSError: the file cannot be loaded.
    """
    import torch  # noqa: F401  (loads torch's libgomp first, so the library shares it)

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


def vector_width(lib: ctypes.CDLL) -> int:
    """fp32 lanes per SIMD vector of this build of the library: 16 (AVX-512F), 8 (AVX2 + FMA) or
    4 (portable generic vectors), i.e. which ``simd_f32.h`` path its compiler flags selected."""
    return int(lib.simd_f32_width())


def _kernel_dtype(name: str, *tensors):
    """The common dtype of ``tensors``, bf16 or fp32, each with a contiguous last dim.

    Raises:
        ValueError: another dtype, mixed dtypes or a strided last dim.
    """
    import torch

    dtype = tensors[0].dtype
    for t in tensors:
        if t.dtype not in (torch.bfloat16, torch.float32) or t.dtype != dtype or t.stride(-1) != 1:
            raise ValueError(f"{name} takes bf16 or fp32 tensors of one dtype with a contiguous "
                             f"last dim, got {[t.dtype for t in tensors]} (strides {t.stride()})")
    return dtype


def block_keys(keys):
    """Keys ``[..., columns, D]`` -> the decode-attention kernel's blocked layout of their dtype
    (16 columns per block; columns past the end are zero):

    - bf16: ``[..., ceil(columns / 16), D / 2, 16, 2]``, transposed inside a block by pairs of
      dims (the pairs vdpbf16ps multiplies); D must be even.
    - fp32: ``[..., ceil(columns / 16), D, 16]``, transposed inside a block (element (j, d) of
      a block at ``d * 16 + j``).

    Raises:
        ValueError: a dtype other than bf16 / fp32.
    """
    import torch
    import torch.nn.functional as F

    columns = keys.shape[-2]
    padded = F.pad(keys, (0, 0, 0, (-columns) % KEY_BLOCK))
    if keys.dtype == torch.float32:
        return padded.unflatten(-2, (-1, KEY_BLOCK)).transpose(-2, -1).contiguous()
    if keys.dtype != torch.bfloat16:
        raise ValueError(f"block_keys takes bf16 or fp32 keys, got {keys.dtype}")
    blocks = padded.unflatten(-2, (-1, KEY_BLOCK)).unflatten(-1, (-1, 2))  # [..., B, 16, D/2, 2]
    return blocks.transpose(-3, -2).contiguous()


def pair_values(values):
    """Values ``[..., columns, D]`` (columns even) -> the bf16 kernel's pair layout
    ``[..., columns / 2, D, 2]`` (element (j, d) at ``[j // 2, d, j % 2]``).

    Raises:
        ValueError: an odd number of columns.
    """
    if values.shape[-2] % 2:
        raise ValueError(f"pair_values needs an even number of columns, got {values.shape[-2]}")
    return values.unflatten(-2, (-1, 2)).transpose(-2, -1).contiguous()


def kernel_values(values):
    """Values ``[..., columns, D]`` -> the decode-attention kernel's value layout of their dtype:
    bf16 :func:`pair_values` (columns even), fp32 plain contiguous rows ``[..., columns, D]``.

    Raises:
        ValueError: an odd number of bf16 columns, or a dtype other than bf16 / fp32.
    """
    import torch

    if values.dtype == torch.float32:
        return values.contiguous()
    if values.dtype != torch.bfloat16:
        raise ValueError(f"kernel_values takes bf16 or fp32 values, got {values.dtype}")
    return pair_values(values)


def decode_attention(lib: ctypes.CDLL, queries, prompt_keys, prompt_values, prompt_start,
                     keys, values, columns: int, row_prompt, new_keys=None, new_values=None,
                     out=None):
    """One query token per row over its prompt's keys, then its own completion keys, in one
    exact softmax per query head (bf16 or fp32, by the tensors' dtype).

    Args:
        lib: from :func:`native`.
        queries: Tensor[R, Hq, D] (bf16 or fp32: every tensor below has this dtype), rows
            contiguous in (head, dim) (any row stride).
        prompt_keys: [P, Hkv, ...] prompt keys in the blocked layout of :func:`block_keys`
            (bf16 ``[P, Hkv, ceil(W / 16), D / 2, 16, 2]``, fp32 ``[P, Hkv, ceil(W / 16), D,
            16]``); prompt_values: [P, Hkv, ...] in the layout of :func:`kernel_values` (bf16
            ``[P, Hkv, W / 2, D, 2]`` with W even: left-pad a prompt by one column if needed;
            fp32 ``[P, Hkv, W, D]``, any W).
        prompt_start: LongTensor[P], first real (unpadded) column of each prompt.
        keys: [rows >= R, Hkv, ...] completion keys, blocked (Tmax columns); values: [rows, Hkv,
            ...] in the value layout (bf16: Tmax even, and value columns past ``columns`` must
            be finite, so zero-initialise the cache; fp32: no constraint). Row r of the batch
            uses row r of both.
        columns: completion columns each row attends to (1 <= columns <= Tmax).
        row_prompt: LongTensor[R], prompt index of each row.
        new_keys, new_values: optional Tensor[R, Hkv, D] (heads contiguous, any row stride):
            this step's keys / values, written into completion column ``columns - 1`` of
            ``keys`` / ``values`` before attending (one pass instead of two indexing copies).
        out: optional Tensor[R, Hq * D] to write into.

    Returns:
        Tensor[R, Hq * D]: ``softmax(q k^T / sqrt(D)) v`` per query head (Vaswani et al. 2017,
        eq. 1), query head h on kv head ``h // (Hq / Hkv)`` (grouped-query attention, Ainslie
        et al. 2023). fp32 scores, softmax and accumulation in both dtypes; in bf16 the
        probabilities are rounded to bf16 for the product with the values (as torch's CPU
        flash attention does in bf16) and the output once to bf16.

    Raises:
        ValueError: shapes, dtypes or layouts the kernel does not handle (G = Hq / Hkv > 8, or
            a head dim not a multiple of the build's vector width: 16 on AVX-512).
        MemoryError: a per-thread work buffer could not be allocated.
    """
    import torch

    dtype = queries.dtype
    if dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"decode_attention takes bf16 or fp32 tensors, got {dtype}")
    rows, heads, dim = queries.shape
    tensors = (queries, prompt_keys, prompt_values, keys, values)
    if any(t.dtype != dtype for t in tensors):
        raise ValueError(f"decode_attention takes tensors of one dtype (bf16 or fp32), got "
                         f"{[t.dtype for t in tensors]}")
    if queries.stride(2) != 1 or queries.stride(1) != dim:
        raise ValueError(f"queries must be [R, Hq, D] with contiguous heads; got shape "
                         f"{tuple(queries.shape)} strides {queries.stride()}")
    _check_attention_layouts(dtype, dim, prompt_keys, prompt_values, keys, values)
    tmax = values.shape[2] * (2 if dtype == torch.bfloat16 else 1)
    prompts, kv_heads = prompt_values.shape[:2]
    if not all(t.is_contiguous() for t in tensors[1:]) or not 1 <= columns <= tmax:
        raise ValueError(f"caches must be contiguous and 1 <= columns ({columns}) <= {tmax}")
    if keys.shape[0] < rows or row_prompt.numel() != rows or prompt_start.numel() != prompts:
        raise ValueError("row_prompt / prompt_start / cache rows do not match the batch")
    new = (new_keys, new_values)
    if (new_keys is None) != (new_values is None) or any(
            t is not None and (t.dtype != dtype or t.shape != (rows, kv_heads, dim)
                               or t.stride(2) != 1 or t.stride(1) != dim) for t in new):
        raise ValueError(f"new_keys / new_values must both be {dtype} [R, Hkv, D] = "
                         f"{(rows, kv_heads, dim)} with contiguous heads")
    if out is None:
        out = torch.empty(rows, heads * dim, dtype=dtype)
    elif out.dtype != dtype or out.shape != (rows, heads * dim) or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} [R, Hq * D] = {(rows, heads * dim)}")
    launch_decode_attention(lib, queries, prompt_keys, prompt_values,
                            prompt_start.to(torch.int64).contiguous(), keys, values, columns,
                            row_prompt.to(torch.int64).contiguous(), new_keys, new_values, out)
    return out


def _check_attention_layouts(dtype, dim: int, prompt_keys, prompt_values, keys, values) -> None:
    """Raise ValueError unless the caches are in :func:`decode_attention`'s layouts of ``dtype``."""
    import torch

    prompts, kv_heads = prompt_values.shape[:2]
    if dtype == torch.bfloat16:
        width, tmax = 2 * prompt_values.shape[2], 2 * values.shape[2]
        key_tail, value_tail = (dim // 2, KEY_BLOCK, 2), (dim, 2)
        names = ("keys [.., Hkv, ceil(columns / 16), D / 2, 16, 2], "
                 "values [.., Hkv, columns / 2, D, 2]")
    else:
        width, tmax = prompt_values.shape[2], values.shape[2]
        key_tail, value_tail = (dim, KEY_BLOCK), (dim,)
        names = "keys [.., Hkv, ceil(columns / 16), D, 16], values [.., Hkv, columns, D]"
    blocks = (width + KEY_BLOCK - 1) // KEY_BLOCK, (tmax + KEY_BLOCK - 1) // KEY_BLOCK
    if (prompt_keys.shape != (prompts, kv_heads, blocks[0], *key_tail)
            or keys.shape[1:] != (kv_heads, blocks[1], *key_tail)
            or prompt_values.shape[3:] != value_tail or values.shape[1] != kv_heads
            or values.shape[3:] != value_tail):
        raise ValueError(f"{dtype} caches must be blocked / laid out as {names}; got keys "
                         f"{tuple(prompt_keys.shape)} and {tuple(keys.shape)}, values "
                         f"{tuple(prompt_values.shape)} and {tuple(values.shape)}")


def launch_decode_attention(lib: ctypes.CDLL, queries, prompt_keys, prompt_values, prompt_start,
                            keys, values, columns: int, row_prompt, new_keys, new_values, out
                            ) -> None:
    """:func:`decode_attention` without its argument checks, for callers that validated the
    layouts once (the engine's cache calls it 30 times per decode step; the checks cost about
    as much as the kernel's first microseconds). Index tensors must be contiguous int64 and
    ``out`` given; the kernel (bf16 or fp32) follows ``queries.dtype``.

    Raises:
        ValueError, MemoryError: the kernel's own refusals (see :func:`decode_attention`).
    """
    import torch

    rows, heads, dim = queries.shape
    if queries.dtype == torch.float32:
        kernel, width, tmax = lib.decode_attention_f32, prompt_values.shape[2], values.shape[2]
    else:
        kernel = lib.decode_attention_bf16
        width, tmax = 2 * prompt_values.shape[2], 2 * values.shape[2]
    code = kernel(
        queries.data_ptr(), queries.stride(0), prompt_keys.data_ptr(), prompt_values.data_ptr(),
        width, prompt_start.data_ptr(), keys.data_ptr(), values.data_ptr(), tmax, columns,
        None if new_keys is None else new_keys.data_ptr(),
        0 if new_keys is None else new_keys.stride(0),
        None if new_values is None else new_values.data_ptr(),
        0 if new_values is None else new_values.stride(0), row_prompt.data_ptr(), rows, heads,
        prompt_values.shape[1], dim, dim ** -0.5, out.data_ptr(), torch.get_num_threads())
    if code == 1:
        raise MemoryError("decode_attention: could not allocate a work buffer")
    if code == 2:
        raise ValueError(f"decode_attention: unsupported heads {heads} / kv heads "
                         f"{prompt_values.shape[1]} / head dim {dim} (or odd cache widths)")


def _function(lib: ctypes.CDLL, name: str, dtype):
    """``lib.<name>_bf16`` or ``lib.<name>_f32`` for ``dtype``."""
    import torch

    return getattr(lib, f"{name}_{'f32' if dtype == torch.float32 else 'bf16'}")


def add_rms_norm(lib: ctypes.CDLL, x, delta, weight, eps: float):
    """``x += delta`` in place (when ``delta`` is given), then RMSNorm of ``x`` (Zhang &
    Sennrich 2019, eq. 4) with transformers' LlamaRMSNorm arithmetic:
    ``weight * (x * rsqrt(mean(x^2) + eps))`` in fp32; in bf16 the sum ``x + delta`` and the
    normalised ``x * rsqrt(..)`` are rounded to bf16 where torch materialises them, i.e.
    ``bf16(weight * bf16(x * rsqrt(mean(x^2) + eps)))``.

    Args:
        x: Tensor[R, H] (bf16 or fp32: all arguments share it), contiguous (the residual
            stream; updated in place).
        delta: Tensor[R, H] contiguous, or None. weight: Tensor[H].

    Returns:
        Tensor[R, H] of x's dtype, the normalised rows.

    Raises:
        ValueError: wrong or mixed dtypes, or a layout other than the above.
    """
    import torch

    dtype = _kernel_dtype("add_rms_norm", x, weight, *(() if delta is None else (delta,)))
    rows, hidden = x.shape
    if (not x.is_contiguous() or (delta is not None and (not delta.is_contiguous()
                                                          or delta.shape != x.shape))
            or weight.shape != (hidden,)):
        raise ValueError(f"add_rms_norm needs contiguous x and delta [R, H] and weight [H]; got "
                         f"{tuple(x.shape)}, {None if delta is None else tuple(delta.shape)}, "
                         f"{tuple(weight.shape)}")
    out = torch.empty_like(x)
    _function(lib, "add_rms_norm", dtype)(
        x.data_ptr(), None if delta is None else delta.data_ptr(), weight.data_ptr(), eps,
        out.data_ptr(), rows, hidden, torch.get_num_threads())
    return out


def rope(lib: ctypes.CDLL, x, cos, signed_sin):
    """Rotary embedding ``x * cos + rotate_half(x) * sin`` (Su et al. 2021, RoFormer, eq. 34)
    of every head, with ``signed_sin = cat(-sin1, sin2)``; bf16 with torch's bf16 roundings of
    both products, fp32 with one fused multiply-add (within an ulp of torch's).

    Args:
        x: Tensor[R, heads, D] (bf16 or fp32: all arguments share it), heads contiguous (any
            row stride); D even.
        cos, signed_sin: Tensor[R, D] contiguous.

    Returns:
        Tensor[R, heads, D] contiguous, of x's dtype.

    Raises:
        ValueError: wrong or mixed dtypes, or a layout other than the above.
    """
    import torch

    rows, heads, dim = x.shape
    dtype = _kernel_dtype("rope", x, cos, signed_sin)
    if x.stride(1) != dim or dim % 2 or cos.shape != (rows, dim) or signed_sin.shape != (rows, dim):
        raise ValueError(f"rope: x [R, heads, D] with contiguous heads and cos / sin [R, D]; got "
                         f"{tuple(x.shape)} strides {x.stride()}, cos {tuple(cos.shape)}")
    out = torch.empty(rows, heads, dim, dtype=dtype)
    _function(lib, "rope", dtype)(x.data_ptr(), x.stride(0), cos.contiguous().data_ptr(),
                                  signed_sin.contiguous().data_ptr(), out.data_ptr(), rows, heads,
                                  dim, torch.get_num_threads())
    return out


def silu_mul(lib: ctypes.CDLL, gate_up):
    """SwiGLU's gate ``silu(gate) * up`` (Shazeer 2020, eq. 5; ``silu(g) = g / (1 + exp(-g))``)
    for ``gate_up = cat(gate, up)``: fp32 math, in bf16 as ``bf16(bf16(silu(gate)) * up)``.

    Args:
        gate_up: Tensor[R, 2 I] (bf16 or fp32), contiguous.

    Returns:
        Tensor[R, I] of gate_up's dtype.

    Raises:
        ValueError: wrong dtype, layout or an odd width.
    """
    import torch

    dtype = _kernel_dtype("silu_mul", gate_up)
    rows, width = gate_up.shape
    if not gate_up.is_contiguous() or width % 2:
        raise ValueError(f"silu_mul needs a contiguous [R, 2 I] tensor, got {tuple(gate_up.shape)}")
    out = torch.empty(rows, width // 2, dtype=dtype)
    _function(lib, "silu_mul", dtype)(gate_up.data_ptr(), out.data_ptr(), rows, width // 2,
                                      torch.get_num_threads())
    return out


def sample(lib: ctypes.CDLL, logits, temperature: float, uniforms):
    """One token per row from ``softmax(logits / temperature)`` (no top-k / top-p) by a
    two-level inverse CDF on ``uniforms`` (see ``sampling.c``; the same draw as
    :func:`rlvr.rollout.sampling.sample_next` makes from the same uniforms, up to fp32
    summation order).

    Args:
        logits: Tensor[N, V], bf16 or fp32, contiguous.
        temperature: > 0.
        uniforms: FloatTensor[N] in [0, 1).

    Returns:
        ``(tokens LongTensor[N], logprobs FloatTensor[N])``: the drawn tokens and their fp32
        ``log_softmax(logits / temperature)``.

    Raises:
        ValueError: wrong dtype, layout, uniform count or a non-positive temperature.
        MemoryError: a work buffer could not be allocated.
    """
    import torch

    dtype = _kernel_dtype("sample", logits)
    if logits.dim() != 2 or not logits.is_contiguous() or not temperature > 0:
        raise ValueError(f"sample needs contiguous [N, V] logits and a temperature > 0, got "
                         f"{tuple(logits.shape)} at {temperature}")
    rows, vocab = logits.shape
    uniforms = uniforms.to(torch.float32).contiguous().view(-1)
    if uniforms.numel() != rows:
        raise ValueError(f"sample: {uniforms.numel()} uniforms for {rows} rows")
    tokens = torch.empty(rows, dtype=torch.int64)
    logprobs = torch.empty(rows, dtype=torch.float32)
    if _function(lib, "sample", dtype)(logits.data_ptr(), rows, vocab, 1.0 / temperature,
                                       uniforms.data_ptr(), tokens.data_ptr(),
                                       logprobs.data_ptr(), torch.get_num_threads()):
        raise MemoryError("sample: could not allocate a work buffer")
    return tokens, logprobs

"""Native CPU kernels, compiled on first use: the ``torch`` rollout engine's decode step
(attention, fused elementwise ops, sampler) and the policy update's fused layer ops and
vocabulary log-softmax (:mod:`rlvr.update.fused_layers`, :mod:`rlvr.algo.logprobs`).

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
it does, silently, when ``RLVR_NATIVE_KERNELS=0`` is set; the engine and the update then run
their pure-torch paths. :func:`unavailable_reason` says why.

One more native piece is C++: :mod:`~rlvr.kernels.block_cache`, the policy update's caching
allocator for torch's large CPU tensors (a ``c10::Allocator``, so it is compiled with ``$CXX``,
else ``c++``, against the installed torch's headers; cached beside the kernels).

Modules: :mod:`~rlvr.kernels.library` (compiling, caching and loading the library),
:mod:`~rlvr.kernels.layouts` (shape limits and the cache layouts the attention kernels
read), :mod:`~rlvr.kernels.ops` (the checked Python wrappers of each kernel). Their
public names are this package's API: callers use ``kernels.<name>``.
"""

from rlvr.kernels.layouts import (
    HEAD_DIM_MULTIPLE,
    KEY_BLOCK,
    MAX_GROUP,
    block_keys,
    kernel_values,
    pair_values,
    supports,
)
from rlvr.kernels.library import (
    ENV_FLAGS,
    KernelBuildError,
    build,
    cache_dir,
    compiler_flags,
    load,
    native,
    unavailable_reason,
    vector_width,
)
from rlvr.kernels.ops import (
    add_rms_norm,
    decode_attention,
    launch_decode_attention,
    rope,
    sample,
    silu_mul,
)

__all__ = [
    "ENV_FLAGS",
    "HEAD_DIM_MULTIPLE",
    "KEY_BLOCK",
    "MAX_GROUP",
    "KernelBuildError",
    "add_rms_norm",
    "block_keys",
    "build",
    "cache_dir",
    "compiler_flags",
    "decode_attention",
    "kernel_values",
    "launch_decode_attention",
    "load",
    "native",
    "pair_values",
    "rope",
    "sample",
    "silu_mul",
    "supports",
    "unavailable_reason",
    "vector_width",
]

"""Python wrappers of the native kernels (ctypes calls into the library of
:func:`rlvr.kernels.native`): decode attention, the fused elementwise ops of a decode
step (residual add + RMSNorm, rotary embedding, SwiGLU) and the temperature sampler. Each
checks its arguments and picks the bf16 or the fp32 kernel by the tensors' dtype.
"""

from __future__ import annotations

import ctypes

import torch

from rlvr.kernels.layouts import check_attention_layouts


def _kernel_dtype(name: str, *tensors):
    """The common dtype of ``tensors``, bf16 or fp32, each with a contiguous last dim.

    Raises:
        ValueError: another dtype, mixed dtypes or a strided last dim.
    """
    dtype = tensors[0].dtype
    for t in tensors:
        if t.dtype not in (torch.bfloat16, torch.float32) or t.dtype != dtype or t.stride(-1) != 1:
            raise ValueError(f"{name} takes bf16 or fp32 tensors of one dtype with a contiguous "
                             f"last dim, got {[t.dtype for t in tensors]} (strides {t.stride()})")
    return dtype


def decode_attention(lib: ctypes.CDLL, queries, prompt_keys, prompt_values, prompt_start,
                     keys, values, columns: int, row_prompt, new_keys=None, new_values=None,
                     out=None):
    """One query token per row over its prompt's keys, then its own completion keys, in one
    exact softmax per query head (bf16 or fp32, by the tensors' dtype).

    Args:
        lib: from :func:`~rlvr.kernels.library.native`.
        queries: Tensor[R, Hq, D] (bf16 or fp32: every tensor below has this dtype), rows
            contiguous in (head, dim) (any row stride).
        prompt_keys: [P, Hkv, ...] prompt keys in the blocked layout of
            :func:`~rlvr.kernels.layouts.block_keys`
            (bf16 ``[P, Hkv, ceil(W / 16), D / 2, 16, 2]``, fp32 ``[P, Hkv, ceil(W / 16), D,
            16]``); prompt_values: [P, Hkv, ...] in the layout of
            :func:`~rlvr.kernels.layouts.kernel_values` (bf16
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
    check_attention_layouts(dtype, dim, prompt_keys, prompt_values, keys, values)
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

"""Shared fixtures: a tiny Llama whose random weights are scaled up so that greedy decoding
is not degenerate (the stock init, std 0.02, gives near-uniform logits and one repeated token)."""

from __future__ import annotations

import os
import platform
import shutil

import pytest
import torch

from rlvr.models import load_model_and_tokenizer
from rlvr.models.tiny import spread_weights


@pytest.fixture(scope="session")
def tiny():
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    return spread_weights(model).eval(), tokenizer


@pytest.fixture(scope="session")
def prompts(tiny):
    """Three prompts of lengths 6, 17 and 1 (left padding differs per row)."""
    _, tokenizer = tiny
    return [tokenizer.encode(t) for t in ("12+34=", "hello world, what", "a")]


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor,
                       min_expected: float = 5.0) -> float:
    """Pearson chi-square goodness-of-fit p-value of ``counts`` against ``probs``; categories
    with expected count < ``min_expected`` are pooled into one."""
    total = counts.sum().double()
    expected = probs.double() * total
    small = expected < min_expected
    obs = torch.cat([counts[~small].double(), counts[small].double().sum().view(1)])
    exp = torch.cat([expected[~small], expected[small].sum().view(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    if obs.numel() < 2:
        return 1.0  # a single possible outcome: nothing to test beyond its support
    stat = ((obs - exp) ** 2 / exp).sum()
    dof = torch.tensor(float(obs.numel() - 1), dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, stat / 2))


# Builds of the native kernels' sources that run each of their code paths on one machine
# (x86-64: the flags are GCC / clang x86 options). "native" is the engine's own build.
_X86 = platform.machine().lower() in ("x86_64", "amd64")
KERNEL_VARIANTS = {
    "native": (),
    "avx512f": ("-mno-avx512bf16",),  # AVX-512 without the bf16 dot products
    "avx2": ("-march=haswell",),  # AVX2 + FMA, no AVX-512 (the fp32 target CPUs)
    "portable": ("-mno-avx", "-mno-avx2", "-mno-fma", "-mno-avx512f"),  # generic vectors
}


def kernel_variants(*names: str) -> list[str]:
    """``names`` on x86-64, else just the native build (the flags are x86 options)."""
    return list(names) if _X86 else ["native"]


def have_compiler() -> bool:
    """Whether the kernels can be compiled here at all: a C compiler on PATH and a platform
    :func:`rlvr.kernels.native` builds for. Where this holds, a failed build is a test
    failure, never a skip."""
    supported = platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")
    return supported and shutil.which(os.environ.get("CC") or "cc") is not None


def build_variant(name: str):
    """The loaded kernel library built with ``KERNEL_VARIANTS[name]``'s flags (raises
    :class:`rlvr.kernels.KernelBuildError` on a failed build)."""
    from rlvr import kernels

    return kernels.load(kernels.build(KERNEL_VARIANTS[name]))


def attention_case(dtype: torch.dtype, prompts: int, n: int, width: int, tmax: int, heads: int,
                   kv: int, dim: int, seed: int = 0) -> dict:
    """Random decode-attention inputs in ``dtype`` for the kernel tests: ``prompts`` prompts of
    ``width`` left-padded keys (``start``: first real column, prompt 0 unpadded), ``n`` rows
    per prompt with ``tmax`` completion columns (two spare cache rows), strided queries as the
    engine passes them; ``randn`` draws more from the same generator."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(dtype)

    rows = prompts * n
    case = dict(q=randn(rows, heads + kv, dim)[:, :heads],
                pk=randn(prompts, kv, width, dim), pv=randn(prompts, kv, width, dim),
                ck=randn(rows + 2, kv, tmax, dim), cv=randn(rows + 2, kv, tmax, dim))
    start = torch.randint(0, width, (prompts,), generator=g)
    start[0] = 0
    return dict(case, start=start, row_prompt=torch.arange(rows) // n, rows=rows, randn=randn)

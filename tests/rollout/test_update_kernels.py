"""The policy update's fused fp32 ops (rlvr.update.fused_layers: RMSNorm, SwiGLU, rotary
embedding) and the vocabulary log-softmax (rlvr.algo.logprobs), forward and backward, against
float64 autograd of the textbook formulas, in each build of the native kernels (AVX-512 where
the CPU has it, AVX2, portable)."""

import pytest
import torch

from rlvr.algo.logprobs import LogSoftmaxGather, token_log_probs
from rlvr.update.fused_layers import RMSNormFunction, RotaryFunction, SiluMulFunction

from .conftest import build_variant, have_compiler, kernel_variants

pytestmark = pytest.mark.skipif(not have_compiler(), reason="no C compiler")


@pytest.fixture(scope="module", params=kernel_variants("native", "avx2", "portable"))
def lib(request):
    return build_variant(request.param)


def _grads(out64: torch.Tensor, inputs: list[torch.Tensor], upstream: torch.Tensor):
    return torch.autograd.grad(out64, inputs, upstream.double())


@pytest.mark.parametrize("hidden", [37, 64])  # a partial vector at the row's end, and none
@pytest.mark.parametrize("weight_grad", [True, False])
def test_rms_norm_forward_and_backward_equal_the_float64_formula(lib, hidden, weight_grad):
    g = torch.Generator().manual_seed(hidden)
    x = (3 * torch.randn(3, 5, hidden, generator=g)).requires_grad_()
    w = torch.randn(hidden, generator=g).requires_grad_(weight_grad)
    up = torch.randn(3, 5, hidden, generator=g)
    y = RMSNormFunction.apply(x, w, 1e-5, lib)
    dx, *dw = torch.autograd.grad(y, [x, w] if weight_grad else [x], up)

    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = w64 * x64 / torch.sqrt((x64 * x64).mean(-1, keepdim=True) + 1e-5)
    dx64, dw64 = _grads(y64, [x64, w64], up)
    torch.testing.assert_close(y.double(), y64, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(dx.double(), dx64, rtol=1e-5, atol=1e-5)
    if weight_grad:
        torch.testing.assert_close(dw[0].double(), dw64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width", [13, 64])
def test_silu_mul_forward_and_backward_equal_the_float64_formula(lib, width):
    g = torch.Generator().manual_seed(width)
    gate = (4 * torch.randn(2, 7, width, generator=g)).requires_grad_()
    up = torch.randn(2, 7, width, generator=g).requires_grad_()
    upstream = torch.randn(2, 7, width, generator=g)
    out = SiluMulFunction.apply(gate, up, lib)
    dg, du = torch.autograd.grad(out, [gate, up], upstream)

    g64, u64 = gate.detach().double().requires_grad_(), up.detach().double().requires_grad_()
    out64 = g64 / (1 + torch.exp(-g64)) * u64
    dg64, du64 = _grads(out64, [g64, u64], upstream)
    torch.testing.assert_close(out.double(), out64, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dg.double(), dg64, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(du.double(), du64, rtol=1e-5, atol=1e-6)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


@pytest.mark.parametrize("dim", [8, 64])
def test_rotary_forward_and_backward_equal_the_float64_formula(lib, dim):
    """x cos + rotate_half(x) sin (RoFormer, eq. 34) on a [B, heads, S, D] view of a
    [B, S, heads, D] projection (the attention's layout), gradient included."""
    b, heads, s = 2, 3, 5
    g = torch.Generator().manual_seed(dim)
    x = torch.randn(b, s, heads, dim, generator=g).transpose(1, 2).requires_grad_()
    angles = torch.randn(b, s, dim // 2, generator=g) * 3
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    rows_cos, rows_sin = cos.reshape(b * s, dim), sin.reshape(b * s, dim)
    half = dim // 2
    signed = torch.cat([-rows_sin[:, :half], rows_sin[:, half:]], 1)
    back = torch.cat([rows_sin[:, half:], -rows_sin[:, :half]], 1)
    upstream = torch.randn(b, heads, s, dim, generator=g)
    out = RotaryFunction.apply(x, rows_cos, signed, back, lib)
    (dx,) = torch.autograd.grad(out, [x], upstream)

    x64 = x.detach().double().requires_grad_()
    c64, s64 = cos.double().unsqueeze(1), sin.double().unsqueeze(1)
    out64 = x64 * c64 + _rotate_half(x64) * s64
    (dx64,) = _grads(out64, [x64], upstream)
    assert out.shape == (b, heads, s, dim)
    torch.testing.assert_close(out.double(), out64, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dx.double(), dx64, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("vocab", [50, 67])
@pytest.mark.parametrize("entropy", [None, "detached", "grad"])
def test_log_softmax_gather_and_its_gradient_equal_the_float64_formula(lib, vocab, entropy):
    """log p = x_id - logsumexp(x), H = -sum p log p at x = z / 0.7, and the logits' gradient
    of a loss weighting both (the entropy's only where it is differentiable)."""
    g = torch.Generator().manual_seed(vocab)
    z = (4 * torch.randn(9, vocab, generator=g)).requires_grad_()
    ids = torch.randint(0, vocab, (9,), generator=g)
    w_logp, w_ent = torch.randn(9, generator=g), torch.randn(9, generator=g)
    out = LogSoftmaxGather.apply(z, ids, 1 / 0.7, entropy, lib)
    logp, ent = out if entropy else (out, None)
    loss = (w_logp * logp).sum() + (0 if entropy != "grad" else (w_ent * ent).sum())
    (dz,) = torch.autograd.grad(loss, [z])

    z64 = z.detach().double().requires_grad_()
    full = torch.log_softmax(z64 / 0.7, -1)
    logp64, ent64 = full.gather(-1, ids[:, None]).squeeze(-1), -(full.exp() * full).sum(-1)
    loss64 = (w_logp.double() * logp64).sum()
    if entropy == "grad":
        loss64 = loss64 + (w_ent.double() * ent64).sum()
    (dz64,) = torch.autograd.grad(loss64, [z64])
    torch.testing.assert_close(logp.double(), logp64, rtol=1e-5, atol=1e-5)
    if entropy:
        torch.testing.assert_close(ent.double(), ent64.detach(), rtol=1e-5, atol=1e-5)
        assert ent.requires_grad == (entropy == "grad")
    torch.testing.assert_close(dz.double(), dz64, rtol=1e-5, atol=1e-6)


def test_log_probs_refuse_token_ids_outside_the_vocabulary():
    logits = torch.randn(1, 3, 10)
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 10\)"):
        token_log_probs(logits, torch.tensor([[1, 10, 2]]))

"""The native fp32 kernels (decode attention, fused elementwise ops, sampler) against fp64
references in each of their builds (AVX-512, AVX2, portable), and the engine's fp32 fused path
against its pure-torch cascade path on the tiny model."""

import pytest
import torch
import torch.nn.functional as F

from rlvr import kernels
from rlvr.kernels import block_keys, decode_attention, kernel_values
from rlvr.rollout import SamplingParams, TorchEngine
from rlvr.rollout.decoder.caches import FusedPrefixCache, SharedPrefixCache

from .conftest import (
    KERNEL_VARIANTS,
    attention_case,
    build_variant,
    chi_square_p_value,
    have_compiler,
    kernel_variants,
)

pytestmark = pytest.mark.skipif(not have_compiler(), reason="no C compiler")
VARIANTS = kernel_variants("native", "avx2", "portable")


@pytest.fixture(scope="module", params=VARIANTS)
def lib(request):
    return build_variant(request.param)


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(VARIANTS == ["native"], reason="the variant builds are x86-64 flags")
def test_each_build_runs_the_code_path_it_is_named_after(monkeypatch):
    """The three builds differ in the vector width their flags select, so the tests below do
    exercise the AVX-512, AVX2 and portable paths, not one path three times."""
    monkeypatch.delenv(kernels.ENV_FLAGS, raising=False)  # "native": this CPU's own flags
    flags = _cpu_flags()
    expected = 16 if "avx512f" in flags else 8 if {"avx2", "fma"} <= flags else 4
    assert kernels.vector_width(build_variant("native")) == expected
    assert kernels.vector_width(build_variant("avx2")) == 8
    assert kernels.vector_width(build_variant("portable")) == 4


def test_kernel_flags_from_the_environment_select_the_build(monkeypatch):
    """$RLVR_KERNEL_CFLAGS is appended after the defaults (so its -march wins) and before the
    call's own flags, and it is part of the build's cache key."""
    monkeypatch.delenv(kernels.ENV_FLAGS, raising=False)
    plain = kernels.build()
    monkeypatch.setenv(kernels.ENV_FLAGS, "-march=haswell")
    flags = kernels.compiler_flags(("-DEXTRA",))
    assert flags[-2:] == ("-march=haswell", "-DEXTRA") and "-march=native" in flags[:-2]
    via_env = kernels.build()
    assert via_env != plain
    monkeypatch.delenv(kernels.ENV_FLAGS)
    assert via_env == kernels.build(KERNEL_VARIANTS["avx2"])  # the same flags, the same library
    assert kernels.vector_width(kernels.load(via_env)) == 8
    monkeypatch.setenv(kernels.ENV_FLAGS, '"-march=haswell')
    with pytest.raises(kernels.KernelBuildError, match="cannot be parsed"):
        kernels.build()


def reference(q, pk, pv, start, ck, cv, columns, row_prompt):
    """fp64 softmax attention of each row over prompt[start:] + its first `columns` keys."""
    rows, heads, dim = q.shape
    kv = pk.shape[1]
    out = []
    for r in range(rows):
        p = int(row_prompt[r])
        k = torch.cat([pk[p, :, start[p]:], ck[r, :, :columns]], 1).double()
        v = torch.cat([pv[p, :, start[p]:], cv[r, :, :columns]], 1).double()
        scores = q[r].double().view(kv, heads // kv, dim) @ k.transpose(1, 2) / dim**0.5
        out.append((torch.softmax(scores, -1) @ v).reshape(-1))
    return torch.stack(out)


@pytest.mark.parametrize("prompts, n, width, tmax, columns, heads, kv, dim", [
    (3, 4, 11, 9, 5, 9, 3, 64),       # SmolLM2's 3 query heads per kv head, odd widths
    (2, 3, 37, 40, 33, 8, 1, 128),    # 8 per kv head (the maximum), head dim 128
    (2, 2, 5, 3, 1, 4, 4, 16),        # plain multi-head, head dim 16, first decode step
    (1, 5, 16, 17, 17, 4, 2, 32),     # block boundaries exactly (16 prompt, 16 + 1 completion)
    (2, 2, 33, 50, 47, 10, 2, 48),    # 5 per kv head
    (1, 3, 1, 32, 32, 12, 2, 80),     # 6 per kv head, a one-column prompt, two full blocks
    (2, 2, 20, 64, 49, 14, 2, 96),    # 7 per kv head
    (2, 1, 7, 8, 8, 8, 4, 112),       # 2 per kv head
])
@pytest.mark.parametrize("write_new", [False, True], ids=["cached", "new-kv"])
def test_kernel_matches_fp64_reference(lib, prompts, n, width, tmax, columns, heads, kv, dim,
                                       write_new):
    c = attention_case(torch.float32, prompts, n, width, tmax, heads, kv, dim)
    q, pk, pv, ck, cv = c["q"], c["pk"], c["pv"], c["ck"], c["cv"]
    start, row_prompt, rows, randn = c["start"], c["row_prompt"], c["rows"], c["randn"]
    expected = reference(q, pk, pv, start, ck, cv, columns, row_prompt)
    new = {}
    if write_new:  # this step's key / value arrive separately; the cache column is stale
        new = dict(new_keys=randn(rows, 2 * kv, dim)[:, kv:],
                   new_values=cv[:rows, :, columns - 1].clone())
        new["new_keys"].copy_(ck[:rows, :, columns - 1])
        ck[:, :, columns - 1] = float("nan")
        cv[:, :, columns - 1] = float("nan")
    keys, values = block_keys(ck), kernel_values(cv)
    assert keys.shape == (rows + 2, kv, -(-tmax // 16), dim, 16) and values.shape == cv.shape
    out = decode_attention(lib, q, block_keys(pk), kernel_values(pv), start, keys, values,
                           columns, row_prompt, **new)
    if write_new:  # and was written into the cache
        c = columns - 1
        assert torch.equal(keys[:rows, :, c // 16, :, c % 16], new["new_keys"])
        assert torch.equal(values[:rows, :, c], new["new_values"])
    assert out.dtype == torch.float32 and out.shape == (rows, heads * dim)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=2e-6)


def test_kernel_ignores_what_it_must_not_read(lib):
    """Key lanes past the last column of a block and value rows past the attended columns may
    hold anything (the engine never initialises them): NaNs there change nothing."""
    g = torch.Generator().manual_seed(1)
    q, pk, pv = (torch.randn(*s, generator=g) for s in ((2, 3, 32), (1, 1, 5, 32), (1, 1, 5, 32)))
    ck, cv = torch.randn(2, 1, 21, 32, generator=g), torch.randn(2, 1, 21, 32, generator=g)
    args = (torch.zeros(1, dtype=torch.long), 7, torch.zeros(2, dtype=torch.long))
    keys = block_keys(ck)
    clean = decode_attention(lib, q, block_keys(pk), pv, args[0], keys, cv, *args[1:])
    keys[:, :, 0, :, 7:] = float("nan")  # block 0 past column 7
    cv[:, :, 7:] = float("nan")
    dirty = decode_attention(lib, q, block_keys(pk), pv, args[0], keys, cv, *args[1:])
    assert torch.equal(clean, dirty)


def test_kernel_rejects_what_it_cannot_do(lib):
    def zeros(*shape):
        return torch.zeros(*shape)

    width = kernels.vector_width(lib)
    prompt = (block_keys(zeros(1, 1, 4, 64)), zeros(1, 1, 4, 64), torch.zeros(1, dtype=torch.long))
    completion = (block_keys(zeros(2, 1, 4, 64)), zeros(2, 1, 4, 64))
    rows = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="unsupported heads 9 / kv heads 1"):
        decode_attention(lib, zeros(2, 9, 64), *prompt, *completion, 1, rows)
    odd = width + width // 2  # a head dim that is no multiple of the vector width
    with pytest.raises(ValueError, match=f"head dim {odd}"):
        decode_attention(lib, zeros(2, 2, odd), block_keys(zeros(1, 1, 4, odd)),
                         zeros(1, 1, 4, odd), prompt[2], block_keys(zeros(2, 1, 4, odd)),
                         zeros(2, 1, 4, odd), 1, rows)
    with pytest.raises(ValueError, match="columns"):
        decode_attention(lib, zeros(2, 8, 64), *prompt, *completion, 5, rows)
    with pytest.raises(ValueError, match="laid out"):  # bf16's pair layout for fp32 values
        decode_attention(lib, zeros(2, 8, 64), *prompt, completion[0],
                         zeros(2, 1, 2, 64, 2), 1, rows)
    with pytest.raises(ValueError, match="one dtype"):
        decode_attention(lib, zeros(2, 8, 64).bfloat16(), *prompt, *completion, 1, rows)
    with pytest.raises(ValueError, match="bf16 or fp32"):
        block_keys(zeros(1, 1, 4, 64).double())


def test_fused_ops_match_fp64_references(lib):
    """Residual add + RMSNorm, rotary embedding and SwiGLU in fp32, with widths that leave a
    ragged last vector on every path, against the formulas in fp64; the residual update and
    the torch path's values to fp32 precision."""
    from rlvr.rollout.decoder.ops import rms_norm, rope, signed_sin

    g = torch.Generator().manual_seed(0)
    rows, hidden = 37, 77
    x = torch.randn(rows, hidden, generator=g) * 3
    delta = torch.randn(rows, hidden, generator=g)
    weight = torch.randn(hidden, generator=g)
    residual = x.clone()
    normed = kernels.add_rms_norm(lib, residual, delta, weight, 1e-5)
    assert torch.equal(residual, x + delta)  # one fp32 addition, exactly torch's
    y = (x + delta).double()
    exact = weight.double() * y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(normed.double(), exact, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(normed, rms_norm(x + delta, weight, 1e-5), rtol=1e-6, atol=1e-6)
    unchanged = x.clone()
    torch.testing.assert_close(kernels.add_rms_norm(lib, unchanged, None, weight, 1e-5),
                               rms_norm(x, weight, 1e-5), rtol=1e-6, atol=1e-6)
    assert torch.equal(unchanged, x)

    dim = 70  # half 35: ragged for 16, 8 and 4 lanes
    qkv = torch.randn(rows, 7, dim, generator=g)
    angles = torch.randn(rows, dim // 2, generator=g) * 3
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    rotated = kernels.rope(lib, qkv[:, :5], cos, signed_sin(sin))
    xd = qkv[:, :5].double()
    half = torch.cat([-xd[..., dim // 2:], xd[..., :dim // 2]], -1)  # rotate_half
    exact = xd * cos.double()[:, None] + half * sin.double()[:, None]
    torch.testing.assert_close(rotated.double(), exact, rtol=1e-6, atol=1e-6)
    in_torch = rope(qkv[:, :5], cos.unsqueeze(1), signed_sin(sin).unsqueeze(1))
    torch.testing.assert_close(rotated, in_torch, rtol=1e-6, atol=1e-6)

    gate_up = torch.randn(rows, 2 * 75, generator=g) * 4
    gate_up[0, :3] = torch.tensor([-100.0, 100.0, 0.0])  # exp's clamps and silu(0)
    gu = gate_up.double()
    torch.testing.assert_close(kernels.silu_mul(lib, gate_up).double(),
                               F.silu(gu[:, :75]) * gu[:, 75:], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.5])
def test_sampler_matches_the_exact_distribution(lib, temperature):
    """fp32 logits: chi-square against softmax(logits / T) over a 300-token vocabulary (three
    blocks, the last one partial, one block all -inf), no draw of a -inf token, and log-probs
    equal to the fp64 log-softmax of the drawn token."""
    from rlvr.rollout.sampling import sample_next

    vocab, draws = 300, 40_000
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(3)) * 2.5
    logits[128:256] = float("-inf")  # a whole block without mass
    logits[7] = float("-inf")
    params = SamplingParams(temperature=temperature)
    tokens, logprobs = sample_next(logits.expand(draws, vocab).contiguous(), params,
                                   torch.Generator().manual_seed(1234), lib)
    exact = torch.log_softmax(logits.double() / temperature, -1)
    counts = torch.bincount(tokens, minlength=vocab)
    assert counts[exact == float("-inf")].sum() == 0
    assert chi_square_p_value(counts, exact.exp()) > 1e-3
    # and a wrong temperature is rejected by the same test
    wrong = torch.softmax(logits.double() / (1.2 * temperature), -1)
    assert chi_square_p_value(counts, wrong) < 1e-3
    torch.testing.assert_close(logprobs.double(), exact[tokens], atol=2e-5, rtol=1e-5)


def test_sampler_draws_what_the_torch_sampler_draws(lib):
    """Same uniforms, same two-level inverse CDF on fp32 logits: the kernel and the torch path
    pick the same token on (nearly) every row of a 49k vocabulary (only fp32 summation order
    differs); the kernel is what sample_next runs for fp32 logits given the library."""
    from rlvr.rollout import sampling

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 49153, generator=g) * 3  # a partial last block
    params = SamplingParams(temperature=0.8)
    native_tokens, native_lp = sampling.sample_next(logits, params,
                                                    torch.Generator().manual_seed(1), lib)
    uniforms = torch.rand(64, 1, generator=torch.Generator().manual_seed(1))  # sample_next's
    direct = kernels.sample(lib, logits, 0.8, uniforms)
    assert torch.equal(direct[0], native_tokens)
    torch_tokens, torch_lp = sampling.sample_next(logits, params, torch.Generator().manual_seed(1))
    same = native_tokens == torch_tokens
    assert same.float().mean() >= 0.95
    torch.testing.assert_close(native_lp[same], torch_lp[same], atol=5e-5, rtol=1e-5)
    ends = torch.tensor([0.0, 1.0 - 2**-24] * 2)
    tokens, _ = kernels.sample(lib, logits[:4].contiguous(), 1.0, ends)
    assert int(tokens[0]) == 0  # u = 0: the first token (every token has mass)
    assert 0 <= int(tokens[1]) < 49153 and 0 <= int(tokens[3]) < 49153


def _teacher_forced_logits(engine, cache_cls, prompts, n, feed, compact_at):
    """Prefill + decode steps fed the tokens `feed` [steps, rows]; after step `compact_at` the
    odd rows leave the batch. Returns the logits of every step."""
    from rlvr.rollout.engine import left_pad

    decoder = engine._current_decoder()
    ids, mask = left_pad(prompts, engine.pad_token_id)
    width = ids.shape[1]
    extra = (kernels.native(),) if cache_cls is FusedPrefixCache else ()
    cache = cache_cls(decoder.w, len(prompts), n, width, feed.shape[0] + 1, mask, *extra)
    logits = [decoder.prefill(ids, mask, cache, n)]
    positions = mask.sum(1).repeat_interleave(n)
    rows = torch.arange(len(prompts) * n)
    for step in range(feed.shape[0]):
        if step == compact_at:
            keep = torch.arange(0, rows.numel(), 2)
            cache.compact(keep, width + step)
            rows, positions = rows[keep], positions[keep]
        logits.append(decoder.step(feed[step, rows], positions, width + step, None, cache))
        positions = positions + 1
    return logits


def test_fused_fp32_cache_matches_cascade_cache_on_the_model(tiny, prompts):
    """Same fp32 weights, same fed tokens (left-padded prompts, an odd prompt width, a
    compaction mid-way): the fused kernels and the flash-attention cascade give the same
    logits to fp32 precision."""
    model, _ = tiny
    engine = TorchEngine(model, dtype=torch.float32)
    n, steps = 3, 20
    feed = torch.randint(3, 100, (steps, len(prompts) * n),
                         generator=torch.Generator().manual_seed(0))
    fused = _teacher_forced_logits(engine, FusedPrefixCache, prompts, n, feed, compact_at=7)
    cascade = _teacher_forced_logits(engine, SharedPrefixCache, prompts, n, feed, compact_at=7)
    assert len(fused) == steps + 1
    for a, b in zip(fused, cascade):
        assert a.dtype == torch.float32 and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5 * float(b.abs().max()))


def test_fp32_engine_runs_the_fp32_kernels_and_can_opt_out(tiny, prompts, monkeypatch):
    """fp32 with a shared prefix decodes through the fused cache, the fp32 fused ops and the
    native sampler, with oneDNN-prepacked weights; greedy tokens equal the pure-torch path's.
    native_kernels=False and prepack_fp32=False opt out of each."""
    model, _ = tiny
    calls = {"attend": 0, "sample": 0, "norm": 0}

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(FusedPrefixCache, "attend", counting("attend", FusedPrefixCache.attend))
    import rlvr.rollout.sampling as sampling

    monkeypatch.setattr(sampling, "native_sample", counting("sample", sampling.native_sample))
    monkeypatch.setattr(kernels, "add_rms_norm", counting("norm", kernels.add_rms_norm))
    greedy = SamplingParams(temperature=0, max_new_tokens=12, n=2)
    sampled = SamplingParams(temperature=1.0, max_new_tokens=5, n=2, seed=0)
    fused = TorchEngine(model, dtype=torch.float32)
    fused_greedy = fused.generate(prompts, greedy)
    fused.generate(prompts, sampled)
    assert calls["attend"] and calls["sample"] and calls["norm"]
    decoder = fused._current_decoder()
    assert decoder.library is not None and decoder.w.layers[0].qkv.packed is not None
    calls.update(attend=0, sample=0, norm=0)
    pure = TorchEngine(model, dtype=torch.float32, native_kernels=False)
    pure_greedy = pure.generate(prompts, greedy)
    pure.generate(prompts, sampled)
    assert calls == {"attend": 0, "sample": 0, "norm": 0}
    assert torch.equal(fused_greedy.completion_ids, pure_greedy.completion_ids)
    torch.testing.assert_close(fused_greedy.logprobs, pure_greedy.logprobs, atol=1e-5, rtol=0)
    mkl = TorchEngine(model, dtype=torch.float32, prepack_fp32=False)._current_decoder()
    assert mkl.w.layers[0].qkv.packed is None and mkl.library is not None
    x = torch.randn(4, model.config.hidden_size)
    assert torch.equal(mkl.w.lm_head(x), F.linear(x, model.lm_head.weight))

"""The native bf16 decode-attention kernel against an fp32 reference, and the engine's fused
cache against its pure-torch cascade path (the fp32 kernels: test_kernels_f32.py)."""

import pytest
import torch
import torch.nn.functional as F

from rlvr import kernels
from rlvr.kernels import block_keys, decode_attention, native, pair_values
from rlvr.rollout import TorchEngine
from rlvr.rollout.decoder.caches import FusedPrefixCache, SharedPrefixCache

from .conftest import attention_case, build_variant, have_compiler, kernel_variants

pytestmark = pytest.mark.skipif(not have_compiler(), reason="no C compiler")
LIB = native() if have_compiler() else None


def test_native_library_builds_where_a_compiler_exists():
    assert LIB is not None, kernels.unavailable_reason()


# The other code paths of the same sources, built on this machine: AVX-512 without the BF16
# dot-product instructions, AVX2 (the bf16 kernels' portable loops, the sampler's AVX2 path)
# and the portable code without any x86 SIMD extension.
@pytest.fixture(scope="module", params=kernel_variants("native", "avx512f", "avx2", "portable"))
def lib(request):
    return build_variant(request.param)


def reference(q, pk, pv, start, ck, cv, columns, row_prompt):
    """fp32 softmax attention of each row over prompt[start:] + its first `columns` keys, the
    probabilities rounded to bf16 for the product with the values (the kernel's documented
    numerics, those of torch's CPU flash attention in bf16)."""
    rows, heads, dim = q.shape
    kv = pk.shape[1]
    out = []
    for r in range(rows):
        p = int(row_prompt[r])
        k = torch.cat([pk[p, :, start[p]:], ck[r, :, :columns]], 1).float()
        v = torch.cat([pv[p, :, start[p]:], cv[r, :, :columns]], 1).float()
        scores = q[r].float().view(kv, heads // kv, dim) @ k.transpose(1, 2) / dim**0.5
        e = (scores - scores.amax(-1, keepdim=True)).exp()
        out.append(((e.bfloat16().float() @ v) / e.sum(-1, keepdim=True)).reshape(-1))
    return torch.stack(out)


@pytest.mark.parametrize("prompts, n, width, tmax, columns, heads, kv, dim", [
    (3, 4, 11, 9, 5, 9, 3, 64),     # SmolLM2's 3 query heads per kv head
    (2, 3, 37, 40, 33, 8, 1, 128),  # 8 per kv head (the maximum), head dim 128
    (2, 2, 5, 3, 1, 4, 4, 16),      # plain multi-head, first decode step
    (1, 5, 16, 17, 17, 4, 2, 32),   # block boundaries exactly
])
@pytest.mark.parametrize("write_new", [False, True], ids=["cached", "new-kv"])
def test_kernel_matches_fp32_reference(lib, prompts, n, width, tmax, columns, heads, kv, dim,
                                       write_new):
    c = attention_case(torch.bfloat16, prompts, n, width, tmax, heads, kv, dim)
    q, pk, pv, ck, cv = c["q"], c["pk"], c["pv"], c["ck"], c["cv"]
    start, row_prompt, rows, randn = c["start"], c["row_prompt"], c["rows"], c["randn"]
    expected = reference(q, pk, pv, start, ck, cv, columns, row_prompt)
    new = {}
    if write_new:  # this step's key / value arrive separately; the cache column is stale
        new = dict(new_keys=randn(rows, 2 * kv, dim)[:, kv:], new_values=ck.new_empty(0))
        new["new_keys"].copy_(ck[:rows, :, columns - 1])
        new["new_values"] = cv[:rows, :, columns - 1].clone()
        ck[:, :, columns - 1] = 0
        cv[:, :, columns - 1] = 0
    # The kernel's layouts: an even prompt width (one more left-padding column if odd) and an
    # even completion width (one more column on the right).
    if width % 2:
        pk, pv, start = F.pad(pk, (0, 0, 1, 0)), F.pad(pv, (0, 0, 1, 0)), start + 1
    if tmax % 2:
        ck, cv = F.pad(ck, (0, 0, 0, 1)), F.pad(cv, (0, 0, 0, 1))
    keys, values = block_keys(ck), pair_values(cv)
    out = decode_attention(lib, q, block_keys(pk), pair_values(pv), start, keys, values, columns,
                           row_prompt, **new)
    if write_new:  # and was written into the cache
        c = columns - 1
        column = keys[:rows, :, c // 16, :, c % 16]  # [R, Hkv, D/2, 2]
        assert torch.equal(column.flatten(-2), new["new_keys"])
        assert torch.equal(values[:rows, :, c // 2, :, c % 2], new["new_values"])
    assert out.dtype == torch.bfloat16 and out.shape == (rows, heads * dim)
    # one bf16 rounding of the output (2^-8 relative) and nothing more
    torch.testing.assert_close(out.float(), expected, rtol=2**-8, atol=1e-3)


def test_kernel_rejects_what_it_cannot_do():
    def zeros(*shape):
        return torch.zeros(*shape, dtype=torch.bfloat16)

    prompt = (block_keys(zeros(1, 1, 4, 64)), pair_values(zeros(1, 1, 4, 64)),
              torch.zeros(1, dtype=torch.long))
    completion = (block_keys(zeros(2, 1, 4, 64)), pair_values(zeros(2, 1, 4, 64)))
    assert completion[0].shape == (2, 1, 1, 32, 16, 2)
    assert completion[1].shape == (2, 1, 2, 64, 2)
    rows = torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="unsupported heads 9 / kv heads 1"):
        decode_attention(LIB, zeros(2, 9, 64), *prompt, *completion, 1, rows)
    with pytest.raises(ValueError, match="columns"):
        decode_attention(LIB, zeros(2, 8, 64), *prompt, *completion, 5, rows)
    with pytest.raises(ValueError, match="even number of columns"):
        pair_values(zeros(1, 1, 3, 64))
    with pytest.raises(ValueError, match="laid out"):
        decode_attention(LIB, zeros(2, 8, 64), *prompt, completion[0], zeros(2, 1, 4, 64), 1, rows)
    with pytest.raises(ValueError, match="bf16"):
        decode_attention(LIB, zeros(2, 8, 64).float(), *prompt, *completion, 1, rows)


def _teacher_forced_logits(engine, cache_cls, prompts, n, feed, compact_at):
    """Prefill + decode steps fed the tokens `feed` [steps, rows]; after step `compact_at` the
    odd rows leave the batch. Returns the logits of every step, FloatTensor rows per step."""
    from rlvr.rollout.engine import left_pad

    decoder = engine._current_decoder()
    ids, mask = left_pad(prompts, engine.pad_token_id)
    width = ids.shape[1]
    extra = (LIB,) if cache_cls is FusedPrefixCache else ()
    cache = cache_cls(decoder.w, len(prompts), n, width, feed.shape[0] + 1, mask, *extra)
    logits = [decoder.prefill(ids, mask, cache, n).float()]
    positions = mask.sum(1).repeat_interleave(n)
    rows = torch.arange(len(prompts) * n)
    for step in range(feed.shape[0]):
        if step == compact_at:
            keep = torch.arange(0, rows.numel(), 2)
            cache.compact(keep, width + step)
            rows, positions = rows[keep], positions[keep]
        out = decoder.step(feed[step, rows], positions, width + step, None, cache)
        logits.append(out.float())
        positions = positions + 1
    return logits


def test_fused_cache_matches_cascade_cache_on_the_model(tiny, prompts):
    """Same weights, same fed tokens (left-padded prompts, a compaction mid-way): the fused
    kernel and the flash-attention cascade give the same logits up to bf16 rounding."""
    model, _ = tiny
    engine = TorchEngine(model, dtype=torch.bfloat16)
    n, steps = 3, 20
    feed = torch.randint(3, 100, (steps, len(prompts) * n),
                         generator=torch.Generator().manual_seed(0))
    fused = _teacher_forced_logits(engine, FusedPrefixCache, prompts, n, feed, compact_at=7)
    cascade = _teacher_forced_logits(engine, SharedPrefixCache, prompts, n, feed, compact_at=7)
    for a, b in zip(fused, cascade):
        assert a.shape == b.shape
        assert (a - b).abs().max() < 0.03 * b.abs().max()


def test_engine_uses_the_kernel_and_can_opt_out(tiny, prompts, monkeypatch):
    model, _ = tiny
    used = []
    original = FusedPrefixCache.attend

    def spy(self, *args):
        used.append(1)
        return original(self, *args)

    monkeypatch.setattr(FusedPrefixCache, "attend", spy)
    from rlvr.rollout import SamplingParams

    params = SamplingParams(temperature=1.0, max_new_tokens=5, n=2, seed=0)
    TorchEngine(model, dtype=torch.bfloat16).generate(prompts, params)
    assert used
    used.clear()
    TorchEngine(model, dtype=torch.bfloat16, native_kernels=False).generate(prompts, params)
    TorchEngine(model, dtype=torch.bfloat16, shared_prefix=False).generate(prompts, params)
    assert not used


def test_fused_ops_reproduce_the_torch_ops(lib):
    """Residual add + RMSNorm, rotary embedding and SwiGLU give the torch path's bf16 values:
    bit for bit where no fp32 reduction or exp is involved, else within one bf16 step on at
    most 0.1% of elements."""

    from rlvr.rollout.decoder.ops import rms_norm, rope, signed_sin

    g = torch.Generator().manual_seed(0)
    rows, hidden = 37, 80  # a ragged last vector
    x = (torch.randn(rows, hidden, generator=g) * 3).bfloat16()
    delta = torch.randn(rows, hidden, generator=g).bfloat16()
    weight = torch.randn(hidden, generator=g).bfloat16()
    residual = x.clone()
    normed = kernels.add_rms_norm(lib, residual, delta, weight, 1e-5)
    assert torch.equal(residual, x + delta)
    expected = rms_norm(x + delta, weight, 1e-5)
    close_in_bf16(normed, expected)
    close_in_bf16(kernels.add_rms_norm(lib, x.clone(), None, weight, 1e-5),
                  rms_norm(x, weight, 1e-5))

    qkv = torch.randn(rows, 7, 64, generator=g).bfloat16()
    angles = torch.randn(rows, 32, generator=g) * 3
    cos = torch.cat([angles.cos()] * 2, -1).bfloat16()
    sin = signed_sin(torch.cat([angles.sin()] * 2, -1).bfloat16())
    assert torch.equal(kernels.rope(lib, qkv[:, :5], cos, sin),
                       rope(qkv[:, :5], cos.unsqueeze(1), sin.unsqueeze(1)))

    gate_up = (torch.randn(rows, 2 * 72, generator=g) * 4).bfloat16()
    close_in_bf16(kernels.silu_mul(lib, gate_up), F.silu(gate_up[:, :72]) * gate_up[:, 72:])


def close_in_bf16(actual, expected):
    assert actual.dtype == expected.dtype == torch.bfloat16
    differ = actual != expected
    assert differ.float().mean() <= 1e-3
    step = expected.float().abs() * 2**-7 + 1e-30
    assert torch.all((actual.float() - expected.float()).abs() <= step)


@pytest.mark.slow
def test_default_model_log_probs_through_the_kernels_match_an_fp32_forward():
    """On SmolLM2 (30 layers, 3 query heads per kv head, head dim 64), in the precision the
    machine's policy picks (bf16 with native bf16, else fp32: forcing emulated bf16 here would
    take ~85x longer): the sampled tokens' log-probs of the kernel path agree with a
    teacher-forced fp32 forward as closely as the pure-torch path's do."""
    from rlvr.models import load_model_and_tokenizer
    from rlvr.models.precision import resolve_precision
    from rlvr.rollout import SamplingParams

    dtype = resolve_precision("auto").dtype
    model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
    prompts = [list(tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                                  add_generation_prompt=True,
                                                  tokenize=True)["input_ids"])
               for q in ("What is 37 + 48?", "Name a prime above 50.", "Why is the sky blue?")]
    params = SamplingParams(temperature=1.0, max_new_tokens=40, n=4, seed=0,
                            stop_token_ids=(tokenizer.eos_token_id,))
    errors = {}
    for native_kernels in (True, False):
        out = TorchEngine(model, dtype=dtype,
                          native_kernels=native_kernels).generate(prompts, params)
        gaps = []
        for row in range(out.num_rows):
            prompt, completion = prompts[int(out.prompt_index[row])], out.completion(row)
            with torch.no_grad():
                logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1]
            exact = torch.log_softmax(logits.float(), -1).gather(
                1, torch.tensor(completion)[:, None])[:, 0]
            gaps.append((out.logprobs[row, :len(completion)] - exact).abs())
        errors[native_kernels] = torch.cat(gaps)
    fused, pure = errors[True], errors[False]
    if dtype == torch.bfloat16:  # bf16 weights and activations: ~2^-8 relative per op
        assert fused.mean() < 0.05 and fused.mean() < 1.5 * pure.mean()
        assert torch.quantile(fused, 0.99) < 0.5
    else:  # fp32 end to end: only summation order differs from the reference forward
        assert fused.mean() < 1e-3 and fused.mean() < 1.5 * pure.mean() + 1e-5
        assert torch.quantile(fused, 0.99) < 1e-2


@pytest.mark.parametrize("temperature", [1.0, 0.6, 1.5])
def test_native_sampler_matches_the_exact_distribution(lib, temperature):
    """Plain sampling through the kernel: chi-square against softmax(logits / T) over a
    300-token vocabulary (three blocks, the last one partial, one block all -inf), no draw of
    a -inf token, and log-probs equal to the fp64 log-softmax of the drawn token."""
    from rlvr.rollout.sampling import sample_next
    from rlvr.rollout.types import SamplingParams

    from .conftest import chi_square_p_value

    vocab, draws = 300, 40_000
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(3)) * 2.5
    logits[128:256] = float("-inf")  # a whole block without mass
    logits[7] = float("-inf")
    logits = logits.bfloat16()
    params = SamplingParams(temperature=temperature)
    tokens, logprobs = sample_next(logits.expand(draws, vocab).contiguous(), params,
                                   torch.Generator().manual_seed(1234), lib)
    exact = torch.log_softmax(logits.double() / temperature, -1)
    counts = torch.bincount(tokens, minlength=vocab)
    assert counts[exact == float("-inf")].sum() == 0
    assert chi_square_p_value(counts, exact.exp()) > 1e-3
    torch.testing.assert_close(logprobs.double(), exact[tokens], atol=2e-5, rtol=1e-5)


def test_native_sampler_draws_what_the_torch_sampler_draws(lib):
    """Same uniforms, same two-level inverse CDF: the kernel and the torch path pick the same
    token on (nearly) every row of a 49k vocabulary; only fp32 summation order differs, which
    moves a token boundary by ~1e-7 of the mass. Extreme uniforms stay in range."""
    from rlvr.rollout import sampling
    from rlvr.rollout.types import SamplingParams

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(256, 49152, generator=g) * 3).bfloat16()
    params = SamplingParams(temperature=1.0)
    native_tokens, native_lp = sampling.sample_next(logits, params,
                                                    torch.Generator().manual_seed(1), lib)
    torch_tokens, torch_lp = sampling.sample_next(logits, params, torch.Generator().manual_seed(1))
    same = native_tokens == torch_tokens
    assert same.float().mean() >= 0.98
    torch.testing.assert_close(native_lp[same], torch_lp[same], atol=5e-5, rtol=1e-5)
    ends = torch.tensor([0.0, 1.0 - 2**-24] * 2)
    tokens, _ = kernels.sample(lib, logits[:4], 1.0, ends)
    assert tokens[0] == (logits[0] > float("-inf")).nonzero()[0, 0]  # u = 0: first token with mass
    assert 0 <= int(tokens[1]) < 49152 and 0 <= int(tokens[3]) < 49152


def test_native_sampler_rejects_bad_input():
    with pytest.raises(ValueError, match="temperature"):
        kernels.sample(LIB, torch.zeros(2, 8, dtype=torch.bfloat16), 0.0, torch.zeros(2))
    with pytest.raises(ValueError, match="bf16 or fp32"):
        kernels.sample(LIB, torch.zeros(2, 8, dtype=torch.float64), 1.0, torch.zeros(2))
    with pytest.raises(ValueError, match="uniforms"):
        kernels.sample(LIB, torch.zeros(2, 8, dtype=torch.bfloat16), 1.0, torch.zeros(3))

"""Rollout throughput: the ``torch`` engine vs transformers ``generate`` (``hf``), same run.

Model: the default SmolLM2-135M-Instruct. Workload: GRPO-shaped batches, groups of G = 8
samples per chat-formatted arithmetic prompt (batch 64 = 8 prompts x 8, batch 256 = 32 x 8),
128 new tokens per row with no stop token (every row generates exactly max_new_tokens, so both
engines produce the same number of tokens), temperature 1.0, no top-p / top-k (transformers'
cheapest sampling path). Every engine runs in one precision, ``--precision`` (``auto``: bf16
where the CPU computes it natively, i.e. ATen dispatches AVX-512 and the CPU has AVX512-BF16
or AMX; fp32 elsewhere, where torch emulates bf16 far slower than fp32). Two ``hf`` figures,
both in that precision (a bf16 copy of the model, or the fp32 model itself):

- ``hf``: the ``hf`` engine as rlvr runs it, returning what the rollout protocol returns
  (token ids *and* the sampling policy's per-token log-probs, which ``generate`` does not give,
  so the engine adds a teacher-forced forward pass). The ``torch`` engine's timings include
  its log-probs too, so this is the engine-for-engine comparison.
- ``generate``: transformers ``generate`` alone, no log-probs: a stricter baseline that does
  less work than either engine.

Roofline: this machine's matmul FLOP/s in the precision used, measured here (the best of
1024^3, 1536^3 and 2048^3 matmuls); a token costs 2 x parameters FLOPs, so roofline tokens/s =
matmul FLOP/s / (2 x params).
The header names the CPU, ATen's dispatch level (``torch.backends.cpu.get_cpu_capability()``)
and the precision.

``--int8`` adds a column: the ``torch`` engine with ``quantization="int8"`` (the decode steps'
layer matmuls with int8 weights through fbgemm, fp32 activations; ``rollout.quantization:
int8``), always in fp32 compute whatever ``--precision`` says; its log-probs are the int8
model's, not the policy's (a run corrects for that with ``algo.tis_cap``). Its roofline share
is not printed (the fp32 matmul roofline does not bound int8 matmuls).

``--floor`` runs the ``torch`` engine once more per batch with a timer around each of its
matmuls (the :class:`~rlvr.rollout.decoder.linear.Linear` calls: q / k / v, o, gate / up, down,
LM head) and prints how much of the call they took, and the bound they set: the tokens/s the
engine would reach if everything else (attention, norms, sampling, Python) took no time, as a
multiple of ``generate`` alone. In fp32 that bound, not attention or overhead, is what caps the
ratio against ``generate``: both sides' matmuls are vendor kernels (oneDNN in the engine, MKL in
``generate``) running at similar speeds.

Usage: python benchmarks/rollout_throughput.py [--quick] [--batches 64 256] [--new-tokens 128]
[--precision auto|bf16|fp32] [--int8] [--floor] (--quick: batch 32 and 16 new tokens, under a
minute on a 2-core AVX2-only CPU). Wrap timing runs in ``flock /tmp/rlvr-bench.lock`` on shared
machines. An AVX2-only CPU can be simulated on an AVX-512 one with ``ATEN_CPU_CAPABILITY=avx2
ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 RLVR_KERNEL_CFLAGS=-march=haswell``.
Last line (largest batch measured):
``rollout tokens/s: torch X, hf Y, ratio Zx, generate alone G (ratio Rx), roofline W%``
(with ``--int8``: then ``, torch int8 I (ratio Jx generate)``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

GROUP = 8


def matmul_flops(dtype: torch.dtype, sizes: tuple[int, ...] = (1024, 1536, 2048),
                 seconds: float = 0.5) -> float:
    """This machine's matmul throughput (FLOP/s) in ``dtype``: the best of ``size``-cubed
    products over ``sizes``. The best, not one size, because a roofline is an upper bound and
    single sizes have pathologies (MKL's AVX2 sgemm on 2 threads runs 2048^3 at ~5 GFLOP/s,
    1536^3 at ~110)."""
    best = 0.0
    for size in sizes:
        a = torch.randn(size, size).to(dtype)
        b = torch.randn(size, size).to(dtype)
        start = time.perf_counter()
        a @ b  # warm-up, and the measurement of a size too slow to repeat
        count, elapsed = 1, time.perf_counter() - start
        if elapsed < seconds:
            count, start = 0, time.perf_counter()
            while count < 1 or time.perf_counter() - start < seconds:
                a @ b
                count += 1
            elapsed = time.perf_counter() - start
        best = max(best, 2 * size**3 * count / elapsed)
    return best


def make_prompts(tokenizer, count: int) -> list[list[int]]:
    """``count`` chat-formatted arithmetic questions as token ids (deterministic)."""
    prompts = []
    for i in range(count):
        a, b = 17 + 7 * i, 23 + 11 * i
        text = f"What is {a} + {b}? Think step by step, then give the answer as #### N."
        encoded = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                add_generation_prompt=True, tokenize=True)
        prompts.append(list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded))
    return prompts


def measure(engine, prompts, params) -> float:
    """Generated tokens per second of one ``generate`` call (prefill, decode and, for ``hf``,
    its log-prob pass: ``RolloutTiming.total_seconds``)."""
    out = engine.generate(prompts, params)
    expected = len(prompts) * params.n * params.max_new_tokens
    assert out.timing.tokens_generated == expected, (out.timing.tokens_generated, expected)
    return out.timing.tokens_generated / out.timing.total_seconds


def timed_matmuls(engine, prompts, params) -> tuple[float, float, int]:
    """One more ``engine.generate`` call with each matmul timed: (seconds in the matmuls,
    seconds of the call, tokens generated). The timers add ~1 us per matmul."""
    from rlvr.rollout.decoder import linear

    spent = 0.0
    call = linear.Linear.__call__

    def timed(self, x):
        nonlocal spent
        start = time.perf_counter()
        try:
            return call(self, x)
        finally:
            spent += time.perf_counter() - start

    linear.Linear.__call__ = timed
    try:
        out = engine.generate(prompts, params)
    finally:
        linear.Linear.__call__ = call
    return spent, out.timing.total_seconds, out.timing.tokens_generated


def matmul_floor(engine, prompts, params, generate_rate: float) -> str:
    """The matmuls' share of one more ``engine.generate`` call (:func:`timed_matmuls`) and
    the tokens/s bound they set (matmuls alone), also as a multiple of ``generate_rate``
    (tokens/s of ``generate`` alone)."""
    spent, total, tokens = timed_matmuls(engine, prompts, params)
    bound = tokens / spent
    return (f"matmuls {spent:.1f} s of {total:.1f} s ({100 * spent / total:.0f}%), "
            f"matmuls alone <= {bound:.0f} tokens/s = {bound / generate_rate:.1f}x generate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="batch 32, 16 new tokens")
    parser.add_argument("--batches", type=int, nargs="+", default=None)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                        help="compute dtype of every engine (auto: bf16 where native)")
    parser.add_argument("--int8", action="store_true",
                        help="also the torch engine with int8 rollout weights (fp32 compute)")
    parser.add_argument("--floor", action="store_true",
                        help="time the torch engine's matmuls: the bound they set")
    args = parser.parse_args()
    from rlvr.models.precision import resolve_precision

    choice = resolve_precision(args.precision)
    dtype, precision = choice.dtype, choice.precision
    batches = args.batches or ([32] if args.quick else [64, 256])
    new_tokens = args.new_tokens or (16 if args.quick else 128)

    from rlvr.models import load_model_and_tokenizer
    from rlvr.rollout import HFEngine, SamplingParams, TorchEngine

    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
    model.eval()
    params_count = sum(p.numel() for p in model.parameters())
    # --quick: 2048^3 left out (one product can take seconds where sgemm has a pathology)
    flops = matmul_flops(dtype, (1024, 1536) if args.quick else (1024, 1536, 2048))
    roofline = flops / (2 * params_count)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine_line

    print(machine_line(args.precision))
    print(f"model smollm2-135m-instruct ({precision}), threads {torch.get_num_threads()}, "
          f"params {params_count / 1e6:.1f}M, "
          f"{precision} matmul {flops / 1e9:.0f} GFLOP/s -> roofline {roofline:.0f} tokens/s")

    copy = None if dtype == torch.float32 else dtype  # hf: the fp32 model itself, or a copy
    engines = {"torch": TorchEngine(model, dtype=dtype), "hf": HFEngine(model, dtype=copy),
               "generate": HFEngine(model, dtype=copy, compute_logprobs=False)}
    if args.int8:
        engines["torch int8"] = TorchEngine(model, dtype=torch.float32, quantization="int8")
    warm = SamplingParams(temperature=1.0, max_new_tokens=4, n=2, seed=0)
    for engine in engines.values():  # weight snapshots, allocator and kernel warm-up
        engine.generate(make_prompts(tokenizer, 2), warm)
    from rlvr.kernels import unavailable_reason, vector_width

    library = engines["torch"]._current_decoder().library
    lanes = None if library is None else vector_width(library)
    path = (f"native {precision} kernels ({lanes}-lane fp32 vectors)" if library is not None
            else f"pure-torch path ({unavailable_reason()})")
    print(f"torch engine: {path}")

    results = {}
    for batch in batches:
        prompts = make_prompts(tokenizer, batch // GROUP)
        params = SamplingParams(temperature=1.0, max_new_tokens=new_tokens, n=GROUP, seed=0)
        short = SamplingParams(temperature=1.0, max_new_tokens=2, n=GROUP, seed=1)
        # This batch shape's kernels, buffers and caches; --quick skips "generate" (it runs the
        # same transformers forward as "hf", whose call warms the shapes for both).
        for name, engine in engines.items():
            if not (args.quick and name == "generate"):
                engine.generate(prompts, short)
        rates = {name: measure(engine, prompts, params) for name, engine in engines.items()}
        results[batch] = rates
        print(f"batch {batch} ({len(prompts)} prompts x {GROUP}, {new_tokens} new tokens, "
              f"prompt ~{len(prompts[0])} tokens): {summary(rates, roofline)}", flush=True)
        if args.floor:
            floor = matmul_floor(engines["torch"], prompts, params, rates["generate"])
            print(f"batch {batch} torch engine: {floor}", flush=True)
    print(f"rollout tokens/s: {summary(results[max(batches)], roofline)}")


def summary(rates: dict[str, float], roofline: float) -> str:
    """``torch X, hf Y, ratio Zx, generate alone G (ratio Rx), roofline W%`` (tokens/s), then
    ``, torch int8 I (ratio Jx generate)`` when ``rates`` has the int8 engine."""
    torch_rate, generate = rates["torch"], rates["generate"]
    line = (f"torch {torch_rate:.0f}, hf {rates['hf']:.0f}, ratio {torch_rate / rates['hf']:.1f}x, "
            f"generate alone {generate:.0f} (ratio {torch_rate / generate:.1f}x), "
            f"roofline {100 * torch_rate / roofline:.0f}%")
    if "torch int8" in rates:
        int8 = rates["torch int8"]
        line += f", torch int8 {int8:.0f} (ratio {int8 / generate:.1f}x generate)"
    return line


if __name__ == "__main__":
    main()

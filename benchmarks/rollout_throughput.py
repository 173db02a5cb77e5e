"""Rollout throughput: the ``torch`` engine vs transformers ``generate`` (``hf``), same run.

Model: the default SmolLM2-135M-Instruct. Workload: GRPO-shaped batches, groups of G = 8
samples per chat-formatted arithmetic prompt (batch 64 = 8 prompts x 8, batch 256 = 32 x 8),
128 new tokens per row with no stop token (every row generates exactly max_new_tokens, so both
engines produce the same number of tokens), temperature 1.0, no top-p / top-k (transformers'
cheapest sampling path). Two ``hf`` figures, both on a bf16 copy of the model:

- ``hf``: the ``hf`` engine as rlvr runs it, returning what the rollout protocol returns
  (token ids *and* the sampling policy's per-token log-probs, which ``generate`` does not give,
  so the engine adds a teacher-forced forward pass). The ``torch`` engine's timings include
  its log-probs too, so this is the engine-for-engine comparison.
- ``generate``: transformers ``generate`` alone, no log-probs: a stricter baseline that does
  less work than either engine.

Roofline: this machine's bf16 matmul FLOP/s, measured here (2048^3 matmuls); a token costs
2 x parameters FLOPs, so roofline tokens/s = matmul FLOP/s / (2 x params).

Usage: python benchmarks/rollout_throughput.py [--quick] [--batches 64 256] [--new-tokens 128]
(--quick: batch 64 and 32 new tokens, under a minute). Wrap timing runs in
``flock /tmp/rlvr-bench.lock`` on shared machines.
Last line (largest batch measured):
``rollout tokens/s: torch X, hf Y, ratio Zx, generate alone G (ratio Rx), roofline W%``.
"""

from __future__ import annotations

import argparse
import time

import torch

GROUP = 8


def matmul_flops(size: int = 2048, seconds: float = 1.0) -> float:
    """Measured bf16 matmul throughput (FLOP/s) of a ``size``-cubed product."""
    a = torch.randn(size, size).to(torch.bfloat16)
    b = torch.randn(size, size).to(torch.bfloat16)
    for _ in range(3):
        a @ b
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="batch 64, 32 new tokens")
    parser.add_argument("--batches", type=int, nargs="+", default=None)
    parser.add_argument("--new-tokens", type=int, default=None)
    args = parser.parse_args()
    batches = args.batches or ([64] if args.quick else [64, 256])
    new_tokens = args.new_tokens or (32 if args.quick else 128)

    from rlvr.models import load_model_and_tokenizer
    from rlvr.rollout import HFEngine, SamplingParams, TorchEngine

    torch.manual_seed(0)
    model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
    model.eval()
    params_count = sum(p.numel() for p in model.parameters())
    flops = matmul_flops()
    roofline = flops / (2 * params_count)
    print(f"model smollm2-135m-instruct (bf16 copies), threads {torch.get_num_threads()}, "
          f"params {params_count / 1e6:.1f}M, "
          f"bf16 matmul {flops / 1e9:.0f} GFLOP/s -> roofline {roofline:.0f} tokens/s")

    engines = {"torch": TorchEngine(model), "hf": HFEngine(model, dtype=torch.bfloat16),
               "generate": HFEngine(model, dtype=torch.bfloat16, compute_logprobs=False)}
    warm = SamplingParams(temperature=1.0, max_new_tokens=4, n=2, seed=0)
    for engine in engines.values():  # weight snapshots, allocator and kernel warm-up
        engine.generate(make_prompts(tokenizer, 2), warm)
    from rlvr.rollout.kernels import unavailable_reason

    native = engines["torch"]._current_decoder().library is not None
    print(f"torch engine: "
          f"{'native kernels' if native else f'pure-torch path ({unavailable_reason()})'}")

    results = {}
    for batch in batches:
        prompts = make_prompts(tokenizer, batch // GROUP)
        params = SamplingParams(temperature=1.0, max_new_tokens=new_tokens, n=GROUP, seed=0)
        short = SamplingParams(temperature=1.0, max_new_tokens=2, n=GROUP, seed=1)
        for engine in engines.values():  # this batch shape's kernels, buffers and caches
            engine.generate(prompts, short)
        rates = {name: measure(engine, prompts, params) for name, engine in engines.items()}
        results[batch] = rates
        print(f"batch {batch} ({len(prompts)} prompts x {GROUP}, {new_tokens} new tokens, "
              f"prompt ~{len(prompts[0])} tokens): {summary(rates, roofline)}", flush=True)
    print(f"rollout tokens/s: {summary(results[max(batches)], roofline)}")


def summary(rates: dict[str, float], roofline: float) -> str:
    """``torch X, hf Y, ratio Zx, generate alone G (ratio Rx), roofline W%`` (tokens/s)."""
    torch_rate = rates["torch"]
    return (f"torch {torch_rate:.0f}, hf {rates['hf']:.0f}, ratio {torch_rate / rates['hf']:.1f}x, "
            f"generate alone {rates['generate']:.0f} (ratio {torch_rate / rates['generate']:.1f}x), "
            f"roofline {100 * torch_rate / roofline:.0f}%")


if __name__ == "__main__":
    main()

"""Seconds to prefill a validation set whose prompts share a system message, with the ``torch``
engine's shared prefill (the common prefix runs once, src/rlvr/models/common_prefix.py) and
without it (every prompt runs whole), side by side in one process on the same prompts.

Workload: the default model (or ``--model``), ``--prompts`` prompts of the ``tool``
environment (its calculator system message, ~110 tokens, then a question of ~40 tokens), one
bucket as greedy validation runs them; the precision the run would pick (``--precision``).
Each mode runs once as a warm-up, then ``--repeats`` times (median). ``--quick``: 16 prompts.

    python benchmarks/shared_prefill.py [--quick] [--precision auto|bf16|fp32]

Last line: ``prefill s: shared X, whole Y, ratio Rx (N prompts, P-token common prefix)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _machine import machine_line


def tool_prompts(tokenizer, count: int) -> list[list[int]]:
    """``count`` chat prompts (token ids): the tool env's system message and a distinct word
    problem (also benchmarks/update_prefix.py's prompts)."""
    from rlvr.envs.tool_env import tools_prompt
    from rlvr.tools.registry import get_tool

    system = tools_prompt([get_tool("calculator")])
    out = []
    for i in range(count):
        question = (f"A shop packs {347 + i} boxes with {628 - 3 * i} pens each and sells "
                    f"{12 + i} boxes. How many pens are left? Show the calculation, then the "
                    "answer as '#### <answer>'.")
        out.append(tokenizer.apply_chat_template(
            [{"role": "system", "content": system}, {"role": "user", "content": question}],
            add_generation_prompt=True, tokenize=True, return_dict=False))
    return out


def time_prefill(engine, ids, mask, shared: bool, repeats: int) -> float:
    """Median seconds of ``repeats`` prefills (after one warm-up) of ``ids`` / ``mask``."""
    from rlvr.rollout.decoder import forward

    decoder = engine._current_decoder()
    old, forward.MIN_SHARED_PREFILL = forward.MIN_SHARED_PREFILL, (
        forward.MIN_SHARED_PREFILL if shared else 10**9)
    try:
        times = []
        for i in range(repeats + 1):
            cache = engine.new_cache(decoder, ids.shape[0], 1, ids.shape[1], 2, mask)
            t0 = time.perf_counter()
            decoder.prefill(ids, mask, cache, 1)
            if i:
                times.append(time.perf_counter() - t0)
    finally:
        forward.MIN_SHARED_PREFILL = old
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="16 prompts, one timed prefill")
    parser.add_argument("--model", default=None, help="model name or path (default model)")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    from rlvr.models.common_prefix import common_prefix_length
    from rlvr.models.loader import DEFAULT_MODEL, load_model_and_tokenizer
    from rlvr.models.precision import resolve_precision
    from rlvr.rollout.engine import left_pad
    from rlvr.rollout.torch_engine import TorchEngine

    print(machine_line(args.precision))
    count, repeats = (16, 1) if args.quick else (args.prompts, args.repeats)
    model, tokenizer = load_model_and_tokenizer(args.model or DEFAULT_MODEL)
    engine = TorchEngine(model, dtype=resolve_precision(args.precision).dtype,
                         max_batch_size=max(count, 1))
    ids, mask = left_pad(tool_prompts(tokenizer, count), engine.pad_token_id)
    common = common_prefix_length(ids, mask)
    shortest = int(mask.sum(1).min())
    sizes = f"{shortest}" if shortest == ids.shape[1] else f"{shortest}-{ids.shape[1]}"
    print(f"{count} prompts of {sizes} tokens, common prefix {common} tokens")
    with torch.no_grad():
        shared = time_prefill(engine, ids, mask, True, repeats)
        print(f"  shared: {shared:.2f} s", flush=True)
        whole = time_prefill(engine, ids, mask, False, repeats)
        print(f"  whole: {whole:.2f} s", flush=True)
    print(f"prefill s: shared {shared:.2f}, whole {whole:.2f}, ratio {whole / shared:.2f}x "
          f"({count} prompts, {common}-token common prefix)")


if __name__ == "__main__":
    sys.exit(main())

"""Seconds per policy update (one optimizer step: forward, backward, AdamW) for the three ways
the update can run the groups' shared prompts (``grpo.shared_prefix``), side by side in one
process on the same rows:

- ``step``: each distinct prompt once per step, rows sorted by length (src/rlvr/models/
  step_prefix.py), what rlvr runs by default;
- ``micro_batch``: each distinct prompt once per micro-batch, rows in group order;
- ``off``: every row with its own copy of the prompt (the usual trainer's forward).

Workload: the default model (or ``--model``), the tool preset's shapes: ``--prompts`` tasks x
``--group`` rows, each prompt the ``tool`` environment's system message and a question
(~150 tokens), completions of uniformly random length in [20, 90] tokens (multi-turn
episodes run 20-96), micro-batches of ``--micro-batch`` rows; the precision the run would
pick (``--precision``). The first update of each mode is a warm-up. ``--quick`` (2 prompts
x 2 rows, micro-batches of 2) only checks that the three modes run: at that size the step
prefix's fixed costs (a separate prompt forward and backward) outweigh what it saves, so its
ratio is below 1 there; the default workload gives the figure that matters.

    python benchmarks/update_prefix.py [--quick] [--precision auto|bf16|fp32]

Last line: ``update s: step X, micro_batch Y, off Z, ratio micro_batch/step R1x, off/step R2x``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _machine import machine_line


def rows(tokenizer, prompts: int, group: int, seed: int = 0):
    """A :class:`rlvr.models.forward.SequenceBatch` of ``prompts * group`` rows, group order."""
    from shared_prefill import tool_prompts

    from rlvr.models.forward import build_sequences

    chats = tool_prompts(tokenizer, prompts)
    g = torch.Generator().manual_seed(seed)
    n = prompts * group
    lengths = torch.randint(20, 91, (n,), generator=g)
    ids = torch.randint(1000, 20000, (n, int(lengths.max())), generator=g)
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    return build_sequences([chats[i // group] for i in range(n)], ids, mask,
                           tokenizer.pad_token_id)


def time_update(model, seqs, mode: str, micro: int, bf16: bool, repeats: int) -> float:
    """Median seconds of ``repeats`` updates after one warm-up."""
    from rlvr.algo.loss_agg import BatchCounts
    from rlvr.train.config import RunConfig
    from rlvr.update import LocalBackend, policy_update

    config = RunConfig.model_validate({"grpo": {"micro_batch_size": micro,
                                                "shared_prefix": mode}})
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)  # lr 0: same weights each time
    n = seqs.input_ids.shape[0]
    advantages = torch.linspace(-1.0, 1.0, n)
    counts = BatchCounts(n, int(seqs.loss_mask.sum()))
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        policy_update(LocalBackend(model), optimizer, seqs, advantages, None, config, counts,
                      bf16=bf16)
        if i:
            times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 prompts x 2 rows, micro-batches of 2, one timed update")
    parser.add_argument("--model", default=None, help="model name or path (default model)")
    parser.add_argument("--precision", default="auto", choices=["auto", "bf16", "fp32"])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    from rlvr.models.loader import DEFAULT_MODEL, load_model_and_tokenizer
    from rlvr.models.precision import resolve_precision

    print(machine_line(args.precision))
    bf16 = resolve_precision(args.precision).dtype == torch.bfloat16
    prompts, repeats = (2, 1) if args.quick else (args.prompts, args.repeats)
    if args.quick:
        args.group, args.micro_batch = 2, 2
    model, tokenizer = load_model_and_tokenizer(args.model or DEFAULT_MODEL)
    seqs = rows(tokenizer, prompts, args.group)
    real = int(seqs.completion_mask.sum())
    print(f"{prompts} prompts x {args.group} rows, prompt {len(seqs.prompts[0])} tokens, "
          f"{real} completion tokens, micro-batches of {args.micro_batch}")
    seconds = {}
    for mode in ("step", "micro_batch", "off"):
        seconds[mode] = time_update(model, seqs, mode, args.micro_batch, bf16, repeats)
        print(f"  {mode}: {seconds[mode]:.2f} s", flush=True)
    s = seconds
    print(f"update s: step {s['step']:.2f}, micro_batch {s['micro_batch']:.2f}, off "
          f"{s['off']:.2f}, ratio micro_batch/step {s['micro_batch'] / s['step']:.2f}x, "
          f"off/step {s['off'] / s['step']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

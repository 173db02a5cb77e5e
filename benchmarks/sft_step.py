"""Seconds of one SFT cold-start step (loss forward + backward) on a preset's SFT examples, with
the shared prompt prefix run once per batch (src/rlvr/train/sft.py ``_step``) and
without it (every row runs prompt and answer whole), side by side in one
process on the same batches.

Workload: the preset's (default: configs/arithmetic.yaml) model, SFT examples and batch size,
chat prompts as a run builds them (the default preset: a ~30-token system message and user
header shared by every prompt of ~55 tokens, answers of ~12), the precision the run would pick.
Each mode runs every batch once as a warm-up, then ``--repeats`` times (median).
``--quick``: 2 batches, 1 repeat.

    python benchmarks/sft_step.py [--quick] [--config PRESET] [--batches N] [--set KEY=VALUE]

Last line: ``sft step s: shared-prefix X, plain Y, ratio Rx (B rows, P-token common prefix)``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def sft_batches(config, batches: int):
    """``(run, [batch, ...], shared)``: the preset's loaded run, ``batches`` SFT batches of
    encoded ``(ids, labels)`` rows built as the cold start builds them, and the tokens every
    prompt of the first batch starts with."""
    from rlvr.tasks.prompting import prompt_ids
    from rlvr.train.cold_start import sft_pool
    from rlvr.train.run import Run
    from rlvr.train.sft import _pad, _shared_prompt_length, encode_examples, verified_examples

    config = config.model_copy(deep=True)
    size = config.sft.batch_size
    config.sft.examples = batches * size
    run = Run(config, Path(tempfile.mkdtemp(prefix="rlvr-bench-sft-")))
    run.load()
    tasks, _ = verified_examples(sft_pool(run.state, config), run.eval_rewards)
    tokenizer = run.state.models.tokenizer
    prompts = [prompt_ids(tokenizer, t, run.state.data.instruction(t), config.data.one_shot)
               for t in tasks]
    data, _ = encode_examples(tokenizer, tasks, prompts, config.sft.max_length,
                              log=lambda _: None)
    rows = [data[i:i + size] for i in range(0, len(data), size)][:batches]
    ids, labels, attention = _pad(rows[0], tokenizer.pad_token_id)
    return run, rows, _shared_prompt_length(ids, attention, labels != -100)


def time_mode(model, batches, shared_prefix: bool, pad_id: int, bf16: bool, repeats: int
              ) -> float:
    """Median seconds of one SFT loss and backward over the batches and repeats (a first pass
    over the batches untimed)."""
    from rlvr.train.sft import _step

    times = []
    for r in range(repeats + 1):
        for batch in batches:
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            _step(model, batch, pad_id, bf16, shared_prefix).backward()
            if r:
                times.append(time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    from _preset import preset_parser

    parser = preset_parser(__doc__.split("\n")[0], "2 batches, 1 repeat", 4, "unused")
    parser.add_argument("--batches", type=int, default=4, help="SFT batches timed per mode")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes over the batches")
    args = parser.parse_args(argv)

    from _machine import machine_line

    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    config = load_config(RunConfig, Path(args.config), args.sets)
    batches, repeats = (2, 1) if args.quick else (args.batches, args.repeats)
    print(machine_line(config.model.precision))
    run, rows, shared = sft_batches(config, batches)
    models = run.state.models
    model, pad_id, bf16 = models.policy, models.tokenizer.pad_token_id, config.model.bf16
    model.train()
    tokens = statistics.mean(len(ids) for batch in rows for ids, _ in batch)
    print(f"preset {config.name}: model {config.model.name}, {len(rows)} batches of "
          f"{len(rows[0])} rows, {tokens:.0f} tokens a row on average, {repeats} timed passes")
    shared_s = time_mode(model, rows, True, pad_id, bf16, repeats)
    plain_s = time_mode(model, rows, False, pad_id, bf16, repeats)
    run.rewards.close()
    print(f"sft step s: shared-prefix {shared_s:.2f}, plain {plain_s:.2f}, ratio "
          f"{plain_s / shared_s:.2f}x ({len(rows[0])} rows, {shared}-token common prefix)")


if __name__ == "__main__":
    sys.exit(main())

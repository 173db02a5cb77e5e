"""Seconds per GRPO step and its phase split (rollout, reward, update) for a run preset.

Workload: the preset's model, data, SFT cold start, group size, prompts per step and algorithm
(default ``configs/arithmetic.yaml``: SmolLM2-135M-Instruct, 8 prompts x G = 8); the KL
reference is built as in a real run. ``--quick`` cuts the cold start to 32 examples,
the prompts per step to a quarter, the group to half and new tokens to 32
(``_preset.quick_config``).
The same steps are timed twice in this process: as rlvr runs them (the ``torch`` rollout
engine, shared-prefix policy forward) and as a baseline built the usual way (transformers
``generate`` as the rollout, every completion forwarded with its own copy of the prompt), so
the ratio shows what both buy for a whole step. The first step of each is a warm-up and is
not counted.

Usage: python benchmarks/grpo_step.py [--quick] [--config configs/arithmetic.yaml]
  [--steps 4] [--set KEY=VALUE ...]     (--quick: 2 timed steps, torch engine only)
Never time two heavy jobs at once on this machine: results swing 2-5x.
Last line: ``grpo step s: torch X (rollout a, reward b, update c), hf Y, ratio Zx``
(hf: the baseline, transformers generate + plain forward).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def time_steps(config, engine_name: str, steps: int, shared_prefix: str = "step") -> list[dict]:
    """SFT cold start as configured (so completions look like a real run's: the base model
    rambles to the length cap), then ``steps + 1`` GRPO steps with ``engine_name``; metrics of
    the last ``steps``."""
    import torch
    from _preset import grpo_step_for

    run, step = grpo_step_for(config, engine_name, shared_prefix)
    rows = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        batch = step.run(run.state, i + 1)
        wall = time.perf_counter() - t0
        m = batch.metrics
        print(f"  {engine_name} step {i + 1}{' (warm-up)' if i == 0 else ''}: {wall:.2f} s = "
              f"rollout {m['seconds_rollout']:.2f} + reward {m['seconds_reward']:.2f} + update "
              f"{m['seconds_update']:.2f}; {int(m['length_mean'] * len(batch.results))} "
              f"completion tokens, {m['train_rows']} rows trained", flush=True)
        if i:
            rows.append({"wall": wall, **m})
    run.rewards.close()
    del run
    torch.set_num_threads(torch.get_num_threads())
    return rows


def summary(rows: list[dict]) -> dict[str, float]:
    """Median seconds per step and per phase."""
    med = lambda key: statistics.median(r[key] for r in rows)  # noqa: E731
    return {"step": med("wall"), "rollout": med("seconds_rollout"),
            "reward": med("seconds_reward"), "update": med("seconds_update")}


def main(argv: list[str] | None = None) -> None:
    from _preset import preset_parser

    parser = preset_parser(__doc__.split("\n")[0], "2 timed steps, torch only", 4,
                           "timed steps per engine")
    args = parser.parse_args(argv)

    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    config = load_config(RunConfig, Path(args.config), args.sets)
    steps = 2 if args.quick else args.steps
    if args.quick:
        from _preset import quick_config

        quick_config(config)
    g = config.grpo
    from _machine import machine_line

    print(machine_line(config.model.precision))
    print(f"preset {config.name}: model {config.model.name}, {g.prompts_per_step} prompts x "
          f"G={g.group_size}, max {g.max_new_tokens} new tokens, micro-batch "
          f"{g.micro_batch_size}, kl_coef {config.algo.kl_coef}, {steps} timed steps")
    torch_s = summary(time_steps(config, "torch", steps))
    line = (f"grpo step s: torch {torch_s['step']:.2f} (rollout {torch_s['rollout']:.2f}, "
            f"reward {torch_s['reward']:.2f}, update {torch_s['update']:.2f})")
    if args.quick:
        print(line)
        return
    hf_s = summary(time_steps(config, "hf", steps, shared_prefix="off"))
    print(f"hf: {hf_s['step']:.2f} s (rollout {hf_s['rollout']:.2f}, reward "
          f"{hf_s['reward']:.2f}, update {hf_s['update']:.2f})")
    print(f"{line}, hf {hf_s['step']:.2f}, ratio {hf_s['step'] / torch_s['step']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

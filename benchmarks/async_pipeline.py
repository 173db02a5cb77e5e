"""Steps per hour of asynchronous GRPO: the pipeline simulator (rlvr.distributed.pipeline_sim),
calibrated with rollout and trainer costs measured here, checked against rlvr's own steps with
the real rollout worker process, then asked about GPU-like cost ratios next to the published
speed-ups of other trainers.

Measured, back to back in this process on one run (a preset's model, data, SFT cold start,
KL reference and reward pipeline as in ``rlvr train``; ``GRPOStep`` steps):
- sync: ``grpo.max_staleness: 0``, today's loop (rollout, reward, update in this process,
  every thread);
- async: ``grpo.max_staleness: k`` (``--max-staleness``, default 1) continuing the same run:
  the rollout worker process (half the threads) generates ahead while this process (the other
  half) scores and updates (rlvr.train.async_source).
The first step of each is a warm-up and is not counted; figures are means over the timed steps
(steps per hour = timed steps / their total time). The simulator is calibrated with the async
steps' own costs (the worker's generation seconds per step, the trainer's busy seconds per
step: its step time less the time it waited for groups), so its prediction can be set against
what the two processes measured.

On the tiny model (``--quick``) a step is a fraction of a second, the short cold start leaves
most groups without reward variance (no update), and one process with 2 threads on a tiny
model loses more to thread synchronisation than it gains (on a loaded machine, 10x), hence
``threads=1``: its figures check that the pipeline runs, overlaps and matches the simulator,
not the speed-up on a real model (run the default preset for that).

GPU-like table: costs in units of one device's update time, for rollout:update ratios seen in
RL on reasoning (rollout 50-80% of a synchronous step), fixed or long-tailed rollouts (a job's
cost log-normal with CV 1), D = 4 devices, perfect scaling of each side. Baselines:
``turns`` = the same split taking turns (k = 0), ``colocated`` = all D devices rollout then
update (k = 0, N = M = D). The anchors' figures come from other systems, models and clusters;
they are printed for scale, not as a like-for-like check.

Usage: python benchmarks/async_pipeline.py [--quick] [--config configs/arithmetic.yaml]
  [--steps 4] [--max-staleness 1] [--set KEY=VALUE ...]
  [--rollout-s S --update-s S [--sync-s S]]   (costs from flags: no measurement)
  (--quick: configs/smoke.yaml (tiny model), 32-example cold start, threads=1 (the async
  run's two processes then use up to twice the cores of the sync run), 4 timed steps per mode)
Last line: ``async pipeline k=K: simulator A steps/h; measured async B vs sync C steps/h (Rx)``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = [
    ("verl fully-async trainer, Qwen2.5-7B, 128 GPUs", "2.35-2.67x over colocated sync"),
    ("AReaL (Fu et al. 2025, arXiv:2505.24298)", "synchronous 'typically 2x slower'; up to "
     "2.77x"),
    ("NeMo-RL one step off-policy (async GRPO)", "1.26-1.73x"),
]


def _steps(run, step_fn, first: int, count: int, label: str) -> list[dict]:
    """``count + 1`` steps from ``first``; the timed ones' walls and metrics."""
    rows = []
    for i in range(count + 1):
        t0 = time.perf_counter()
        batch = step_fn.run(run.state, first + i)
        wall = time.perf_counter() - t0
        run.state.progress.advance(first + i)
        m = batch.metrics
        idle = m.get("seconds_trainer_idle")
        print(f"  {label} step {first + i}{' (warm-up)' if not i else ''}: {wall:.2f} s "
              + (f"(waited {idle:.2f}, staleness {m['staleness_mean']:.1f}) " if idle is not None
                 else f"= rollout {m['seconds_rollout']:.2f} + reward {m['seconds_reward']:.2f} "
                 f"+ update {m['seconds_update']:.2f}"), flush=True)
        if i:
            rows.append({"wall": wall, **m})
    return rows


def measure(config, k: int, steps: int) -> tuple[dict, dict]:
    """Sync steps, then async steps with ``k`` continuing the same run. Returns the means of
    each (``wall`` and the step metrics)."""
    import torch
    from _preset import grpo_step_for

    from rlvr.train import setup
    from rlvr.train.async_source import AsyncSource
    from rlvr.train.grpo import GRPOStep

    threads = torch.get_num_threads()
    run, step_fn = grpo_step_for(config, config.rollout.engine)
    try:
        sync = _steps(run, step_fn, 1, steps, "sync")
        async_config = config.model_copy(deep=True)
        async_config.grpo.max_staleness = k
        setup.close_step_runner(run.state)
        run.state.source = AsyncSource(async_config, run.state, run.rewards)
        run_async = _steps(run, GRPOStep(async_config), steps + 2, steps, f"async k={k}")
    finally:
        setup.close_step_runner(run.state)
        run.rewards.close()
        torch.set_num_threads(threads)

    def means(rows):
        keys = {key for r in rows for key, v in r.items() if isinstance(v, (int, float))}
        return {key: statistics.fmean(r.get(key, 0.0) for r in rows) for key in keys}

    return means(sync), means(run_async)


def gpu_table(seed: int) -> list[str]:
    """Predictions for GPU-like cost ratios (units: one device's update time)."""
    from rlvr.distributed.pipeline_sim import simulate

    lines = [f"{'rollout:update':>14} {'tail':>5} {'N+M':>5} {'k':>2} {'vs turns':>9} "
             f"{'vs colocated':>12} {'trainer idle':>12} {'rollout idle':>12}"]
    devices = 4
    for ratio in (1.0, 2.0, 4.0):
        for cv in (0.0, 1.0):
            colocated = None
            for n, k in ((2, 1), (3, 1), (3, 4)):
                m = devices - n
                rollout, update = ratio * devices, 1.0 * devices  # one device's seconds
                common = dict(groups_per_step=12, steps=80, rollout_cv=cv, seed=seed)
                run = simulate(rollout, update, workers=n, update_processes=m,
                               max_staleness=k, **common)
                turns = simulate(rollout, update, workers=n, update_processes=m,
                                 max_staleness=0, **common)
                colocated = colocated or simulate(rollout, update, workers=devices,
                                                  update_processes=devices, max_staleness=0,
                                                  **common)
                lines.append(
                    f"{ratio:>12.0f}:1 {'CV 1' if cv else 'fixed':>5} {n:>3}+{m} {k:>2} "
                    f"{run.steps_per_hour / turns.steps_per_hour:>8.2f}x "
                    f"{run.steps_per_hour / colocated.steps_per_hour:>11.2f}x "
                    f"{run.trainer_idle:>12.0%} {run.rollout_idle:>12.0%}")
    return lines


def main(argv: list[str] | None = None) -> None:
    from _preset import preset_parser

    parser = preset_parser(__doc__.split("\n")[0], "the smoke preset (tiny model), 4 timed "
                           "steps", 4, "timed steps per mode")
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--rollout-s", type=float, default=None,
                        help="a rollout worker's seconds per step (skips the measurement)")
    parser.add_argument("--update-s", type=float, default=None,
                        help="the trainer's busy seconds per step")
    parser.add_argument("--sync-s", type=float, default=0.0,
                        help="the trainer's weight-push seconds per step")
    args = parser.parse_args(argv)

    from _machine import machine_line

    from rlvr.configio import load_config
    from rlvr.distributed.pipeline_sim import simulate
    from rlvr.train.config import RunConfig

    k = args.max_staleness
    measured = None
    groups = 8
    if args.rollout_s is None or args.update_s is None:
        path = ROOT / "configs" / "smoke.yaml" if args.quick and args.config == str(
            ROOT / "configs" / "arithmetic.yaml") else Path(args.config)
        sets = list(args.sets)
        if args.quick:
            # one thread per process: on the tiny model more threads only add synchronisation
            sets = ["threads=1", "sft.examples=32", "sft.epochs=1", "data.val_size=4", *sets]
        config = load_config(RunConfig, path, sets)
        steps = 4 if args.quick else args.steps
        groups = config.grpo.prompts_per_step
        print(machine_line(config.model.precision))
        print(f"measuring {path.name} ({config.model.name}): {groups} prompts x "
              f"{config.grpo.group_size}, {config.grpo.max_new_tokens} new tokens, {steps} "
              f"timed steps per mode, threads {config.threads or 'all'} (async: split between "
              f"the trainer and its rollout worker)", flush=True)
        sync, run = measure(config, k, steps)
        rollout_s = run["seconds_rollout"]
        update_s = max(0.0, run["wall"] - run["seconds_trainer_idle"])
        sync_s = 0.0  # inside the trainer's busy time
        measured = (3600.0 / run["wall"], 3600.0 / sync["wall"])
        print(f"sync: {sync['wall']:.2f} s/step (rollout {sync['seconds_rollout']:.2f}, reward "
              f"{sync['seconds_reward']:.2f}, update {sync['seconds_update']:.2f})")
        print(f"async k={k}: {run['wall']:.2f} s/step (trainer busy {update_s:.2f}, waiting "
              f"{run['seconds_trainer_idle']:.2f}; worker generating {rollout_s:.2f}, idle "
              f"{run['seconds_rollout_idle']:.2f}; weight sync {run['seconds_weight_sync']:.2f};"
              f" staleness {run['staleness_mean']:.2f}, dropped {run['dropped_stale']:.1f})")
    else:
        print(machine_line(None))
        rollout_s, update_s, sync_s = args.rollout_s, args.update_s, args.sync_s
    predicted = simulate(rollout_s, update_s, max_staleness=k, sync_s=sync_s,
                         groups_per_step=groups, steps=300)
    turns = simulate(rollout_s, update_s, max_staleness=0, sync_s=sync_s,
                     groups_per_step=groups, steps=300)
    print(f"simulator (worker {rollout_s:.2f} s, trainer {update_s:.2f} s, push {sync_s:.2f} s "
          f"per step; 1 worker, 1 trainer): k={k} {predicted.steps_per_hour:.0f} steps/h "
          f"(trainer idle {predicted.trainer_idle:.0%}, rollout idle "
          f"{predicted.rollout_idle:.0%}); the same two processes taking turns "
          f"{turns.steps_per_hour:.0f} steps/h")
    print("GPU-like costs, 4 devices (speed-up of async k over the same split taking turns, "
          "and over all 4 devices colocated taking turns):")
    for line in gpu_table(seed=0):
        print("  " + line)
    print("published speed-ups of asynchronous RL trainers (other systems, for scale):")
    for who, figure in ANCHORS:
        print(f"  {who}: {figure}")
    head = f"async pipeline k={k}: simulator {predicted.steps_per_hour:.0f} steps/h"
    if measured is None:
        print(f"{head}; measured: not run (costs from flags)")
    else:
        a, s = measured
        print(f"{head}; measured async {a:.0f} vs sync {s:.0f} steps/h ({a / s:.2f}x) on this "
              f"CPU")


if __name__ == "__main__":
    main()

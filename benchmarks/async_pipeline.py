"""Steps per hour of asynchronous GRPO: the pipeline simulator (rlvr.distributed.pipeline_sim),
calibrated with rollout and update costs measured here, checked against a real two-process run,
then asked about GPU-like cost ratios next to the published speed-ups of other trainers.

Measured (same process, back to back, same prompts and sampling):
- two processes: one rollout worker process (rlvr.distributed.async_rollout, half the cores,
  pinned) fed by the collector (rlvr.distributed.async_collector) while this process (the
  other cores) runs a policy-gradient update (forward, backward, AdamW) on each step's
  completions and pushes its weights after it; first with k = 0 (the processes take turns:
  the synchronous loop on the same split), then with ``--max-staleness``;
- in-process sync (not with ``--quick``): today's loop, the rollout in this process with
  every thread (the ``torch`` engine over the live policy), then the same update.
The first step of each is a warm-up and is not counted; figures are means over the timed steps
(steps per hour = timed steps / their total time). The simulator is calibrated with the
async run's own per-step costs (the worker's seconds per job, the trainer's update and push
seconds), so its prediction can be set against what the two processes measured.

GPU-like table: costs in units of one device's update time, for rollout:update ratios seen in
RL on reasoning (rollout 50-80% of a synchronous step), fixed or long-tailed rollouts (a job's
cost log-normal with CV 1), D = 4 devices. Baselines: ``turns`` = the same split taking turns
(k = 0), ``colocated`` = all D devices rollout then update (k = 0, N = M = D). The anchors'
figures come from other systems, models and clusters; they are printed for scale, not as a
like-for-like check.

Usage: python benchmarks/async_pipeline.py [--quick] [--model smollm2-135m-instruct]
  [--steps 6] [--prompts-per-step 8] [--group-size 8] [--new-tokens 64] [--max-staleness 1]
  [--rollout-s S --update-s S [--sync-s S]]   (costs from flags: no measurement)
  (--quick: tiny-random model, 4 prompts x 4, 32 new tokens, 8 timed steps, no in-process
  sync run; under a minute)
Last line: ``async pipeline k=K: simulator A vs k=0 B steps/h (Rx); measured two processes C vs
k=0 D steps/h (Sx)[, in-process sync E steps/h]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ANCHORS = [
    ("verl fully-async trainer, Qwen2.5-7B, 128 GPUs", "2.35-2.67x over colocated sync"),
    ("AReaL (Fu et al. 2025, arXiv:2505.24298)", "synchronous 'typically 2x slower'; up to "
     "2.77x"),
    ("NeMo-RL one step off-policy (async GRPO)", "1.26-1.73x"),
]


def _update(policy, optimizer, prompts, out, pad_token_id) -> None:
    """One policy-gradient update on a step's completions: advantages +1 / -1 by row parity
    (the cost depends on the tokens, not the values), token-mean loss, AdamW step."""
    import torch

    from rlvr.models.forward import build_sequences, completion_log_probs

    rows = [prompts[i] for i in out.prompt_index.tolist()]
    seqs = build_sequences(rows, out.completion_ids, out.completion_mask, pad_token_id)
    logp = completion_log_probs(policy, seqs, temperature=1.0, bf16=False)
    adv = (torch.arange(out.num_rows) % 2 * 2 - 1).float()
    mask = seqs.loss_mask.float()
    loss = -(adv[:, None] * logp * mask).sum() / mask.sum().clamp(min=1)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _setup(args):
    import torch

    from rlvr.models import load_model_and_tokenizer
    from rlvr.rollout import SamplingParams
    from rollout_throughput import make_prompts

    policy, tokenizer = load_model_and_tokenizer(args.model, seed=0)
    policy.float().train()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    pool = make_prompts(tokenizer, 64)
    stops = (tokenizer.eos_token_id,)

    def params(step: int) -> SamplingParams:
        return SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens,
                              n=args.group_size, stop_token_ids=stops, seed=step)

    def prompts_for(first: int, count: int) -> list[list[int]]:
        return [pool[(first + i) % len(pool)] for i in range(count)]

    return policy, tokenizer, optimizer, params, prompts_for


def measure_sync(args) -> dict:
    """Rollout then update in this process, every thread: per-step seconds."""
    import torch

    from rlvr.rollout import create_engine

    policy, tokenizer, optimizer, params, prompts_for = _setup(args)
    engine = create_engine("torch", policy, pad_token_id=tokenizer.pad_token_id,
                           dtype=torch.float32)
    b = args.prompts_per_step
    rows = []
    for step in range(args.steps + 1):
        prompts = prompts_for(step * b, b)
        t0 = time.perf_counter()
        out = engine.generate(prompts, params(step))
        t1 = time.perf_counter()
        _update(policy, optimizer, prompts, out, tokenizer.pad_token_id)
        t2 = time.perf_counter()
        if step:
            rows.append({"step": t2 - t0, "rollout": t1 - t0, "update": t2 - t1})
        print(f"  sync step {step}{' (warm-up)' if not step else ''}: {t2 - t0:.2f} s = "
              f"rollout {t1 - t0:.2f} + update {t2 - t1:.2f}", flush=True)
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]}


def measure_async(args) -> dict[int, dict]:
    """One rollout worker process on half the cores, this process on the rest; the same
    worker first with k = 0 (the two processes take turns), then with ``--max-staleness``.
    Returns per-step medians by k."""
    import torch

    from rlvr.distributed.async_collector import AsyncCollector
    from rlvr.distributed.async_rollout import LocalRolloutPool
    from rlvr.distributed.rollout_jobs import RolloutJob
    from rlvr.rollout.types import concat_rollouts

    cores = sorted(os.sched_getaffinity(0))
    mine, theirs = (cores[: len(cores) // 2], cores[len(cores) // 2:]) if len(cores) > 1 \
        else (cores, cores)
    threads = torch.get_num_threads()
    policy, tokenizer, optimizer, params, prompts_for = _setup(args)
    b = args.prompts_per_step
    worker = LocalRolloutPool(policy, pad_token_id=tokenizer.pad_token_id,
                              threads=len(theirs), cores=theirs,
                              engine_options={"dtype": torch.float32})

    def make_job(job_id: int, groups: int) -> RolloutJob:
        return RolloutJob(job_id, prompts_for(job_id * b, groups), params(job_id),
                          meta=list(range(groups)))

    results = {}
    os.sched_setaffinity(0, set(mine))
    torch.set_num_threads(len(mine))
    try:
        for k in (0, args.max_staleness):
            start = worker.version
            collector = AsyncCollector(worker, make_job, groups_per_step=b, max_staleness=k,
                                       version=start)
            busy0 = worker.times().workers[worker.names[0]]
            rows, jobs = [], set()
            for step in range(args.steps + 1):
                t0 = time.perf_counter()
                groups = collector.collect(b, start + step, weights=lambda: policy)
                t1 = time.perf_counter()
                out = concat_rollouts([g.output for g in groups], [1] * len(groups))
                _update(policy, optimizer, [g.prompt for g in groups], out,
                        tokenizer.pad_token_id)
                t2 = time.perf_counter()
                m = collector.step_metrics()
                jobs.update(g.job_id for g in groups)
                if step:
                    rows.append({"step": t2 - t0, "update": t2 - t1,
                                 "idle": m["seconds_trainer_idle"],
                                 "staleness": m["staleness_mean"],
                                 "sync": m["seconds_weight_sync"],
                                 "rollout_idle": m["seconds_rollout_idle"]})
                print(f"  two processes, k={k}, step {step}{' (warm-up)' if not step else ''}: "
                      f"{t2 - t0:.2f} s = wait {t1 - t0:.2f} + update {t2 - t1:.2f}; "
                      f"staleness {m['staleness_mean']:.1f}", flush=True)
            # drain the jobs still in flight so the next mode starts from an idle worker
            while worker.in_flight:
                worker.poll(60.0)
            busy = worker.times().workers[worker.names[0]]
            med = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
            med["rollout"] = (busy.busy - busy0.busy) / max(len(jobs), 1)
            results[k] = med
    finally:
        worker.close()
        os.sched_setaffinity(0, set(cores))
        torch.set_num_threads(threads)
    return results


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
                common = dict(groups_per_step=12, steps=100, rollout_cv=cv, seed=seed)
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 5 timed steps")
    parser.add_argument("--model", default=None, help="default smollm2-135m-instruct "
                        "(--quick: tiny-random)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per mode")
    parser.add_argument("--prompts-per-step", type=int, default=None)
    parser.add_argument("--group-size", type=int, default=None)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--rollout-s", type=float, default=None,
                        help="a rollout worker's seconds per step (skips the measurement)")
    parser.add_argument("--update-s", type=float, default=None,
                        help="the trainer's update seconds per step")
    parser.add_argument("--sync-s", type=float, default=0.0,
                        help="the trainer's weight-push seconds per step")
    args = parser.parse_args(argv)
    quick = args.quick
    args.model = args.model or ("tiny-random" if quick else "smollm2-135m-instruct")
    args.steps = args.steps or (8 if quick else 6)
    args.prompts_per_step = args.prompts_per_step or (4 if quick else 8)
    args.group_size = args.group_size or (4 if quick else 8)
    args.new_tokens = args.new_tokens or (32 if quick else 64)

    from _machine import machine_line

    from rlvr.distributed.pipeline_sim import simulate

    print(machine_line("fp32"))
    k = args.max_staleness
    measured = None
    if args.rollout_s is None or args.update_s is None:
        print(f"measuring {args.model}: {args.prompts_per_step} prompts x {args.group_size}, "
              f"{args.new_tokens} new tokens, {args.steps} timed steps per mode", flush=True)
        sync = None if quick else measure_sync(args)
        two = measure_async(args)
        run, turns_run = two[k], two[0]
        rollout_s, update_s, sync_s = run["rollout"], run["update"], run["sync"]
        measured = (3600.0 / run["step"], 3600.0 / turns_run["step"],
                    3600.0 / sync["step"] if sync else None)
        if sync:
            print(f"in-process sync: {sync['step']:.2f} s/step (rollout {sync['rollout']:.2f}, "
                  f"update {sync['update']:.2f}, all cores in one process)")
        for kk, r in sorted(two.items()):
            print(f"two processes k={kk}: {r['step']:.2f} s/step (trainer waits "
                  f"{r['idle']:.2f}, updates {r['update']:.2f}, weight sync {r['sync']:.2f}; "
                  f"the worker {r['rollout']:.2f} s per step's groups, idle "
                  f"{r['rollout_idle']:.2f} s per step; staleness {r['staleness']:.1f})")
    else:
        rollout_s, update_s, sync_s = args.rollout_s, args.update_s, args.sync_s
    predicted = simulate(rollout_s, update_s, max_staleness=k, sync_s=sync_s,
                         groups_per_step=args.prompts_per_step, steps=300)
    turns = simulate(rollout_s, update_s, max_staleness=0, sync_s=sync_s,
                     groups_per_step=args.prompts_per_step, steps=300)
    print(f"simulator (rollout {rollout_s:.2f} s, update {update_s:.2f} s, push {sync_s:.2f} s "
          f"per step; 1 worker, 1 trainer): k={k} {predicted.steps_per_hour:.0f} steps/h "
          f"(trainer idle {predicted.trainer_idle:.0%}, rollout idle "
          f"{predicted.rollout_idle:.0%}); k=0 {turns.steps_per_hour:.0f} steps/h")
    print("GPU-like costs, 4 devices (speed-up of async k over the same split taking turns, "
          "and over all 4 devices colocated taking turns):")
    for line in gpu_table(seed=0):
        print("  " + line)
    print("published speed-ups of asynchronous RL trainers (other systems, for scale):")
    for who, figure in ANCHORS:
        print(f"  {who}: {figure}")
    gain = predicted.steps_per_hour / turns.steps_per_hour
    head = (f"async pipeline k={k}: simulator {predicted.steps_per_hour:.0f} vs k=0 "
            f"{turns.steps_per_hour:.0f} steps/h ({gain:.2f}x)")
    if measured is None:
        print(f"{head}; measured: not run (costs from flags)")
    else:
        a, t, s = measured
        inproc = f", in-process sync {s:.0f} steps/h" if s else ""
        print(f"{head}; measured two processes {a:.0f} vs k=0 {t:.0f} steps/h "
              f"({a / t:.2f}x){inproc}")


if __name__ == "__main__":
    main()

"""Peak memory of one GRPO step of a run preset (default ``configs/arithmetic.yaml``).

Each configuration runs in its own child process (an allocator keeps freed memory, so two
configurations in one process would share a high-water mark): the preset's model, SFT cold
start and KL reference as in a real run, then ``--steps`` GRPO steps. Memory is the process's
resident set (RSS, what the OS must provide), read from Linux's peak counter ``VmHWM`` in
``/proc/self/status``, which is reset (``/proc/self/clear_refs``) before each phase:

- resident: RSS before the step (policy in fp32, AdamW moments, reference model, the rollout
  engine's bf16 weight snapshot, Python and libraries);
- rollout peak: highest RSS while the rollout engine generates the step's completions;
- update peak: highest RSS during reward scoring and the policy update (log-prob forwards and
  backwards over micro-batches, optimizer step).

Two configurations, same preset and seed: rlvr as it runs (``torch`` engine, shared-prefix
policy forward) and a baseline built the usual way (transformers ``generate``, every completion
forwarded with its own prompt copy). Peaks are of the last step (the first allocates caches).

Usage: python benchmarks/grpo_memory.py [--quick] [--config configs/arithmetic.yaml]
  [--steps 2] [--set KEY=VALUE ...]    (--quick: rlvr only, ``_preset.quick_config``'s
  workload: 32 SFT examples, a quarter of the prompts, half the group, 32 new tokens; compare
  quick with quick only)
Linux only. Last line: ``grpo step peak RSS MiB: rlvr X (resident R, rollout a, update b),
baseline Y, ratio Zx``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
MIB = 1024


def _status_kib(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``)."""
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {field} (Linux only)")
    return int(match.group(1))


def reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


def measure(config, engine_name: str, shared_prefix: str, steps: int) -> dict[str, float]:
    """Peak RSS (MiB) of the phases of the last of ``steps`` GRPO steps."""
    from _preset import grpo_step_for

    run, step = grpo_step_for(config, engine_name, shared_prefix, prefix="rlvr-mem-")
    phases: dict[str, float] = {}
    engine = run.state.models.rollout_engine
    generate = engine.generate

    def tracked_generate(*args, **kwargs):
        reset_peak()
        out = generate(*args, **kwargs)
        phases["rollout"] = _status_kib("VmHWM") / MIB
        reset_peak()
        return out

    engine.generate = tracked_generate
    for i in range(steps):
        phases["resident"] = _status_kib("VmRSS") / MIB
        start = time.perf_counter()
        step.run(run.state, i + 1)
        phases["update"] = _status_kib("VmHWM") / MIB
        print(f"  {engine_name} step {i + 1}: {time.perf_counter() - start:.1f} s, resident "
              f"{phases['resident']:.0f} MiB, rollout peak {phases['rollout']:.0f}, update "
              f"peak {phases['update']:.0f}", file=sys.stderr, flush=True)
    run.rewards.close()
    phases["peak"] = max(phases["rollout"], phases["update"])
    return phases


def child(args) -> None:
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    config = load_config(RunConfig, Path(args.config), args.sets)
    if args.quick:
        from _preset import quick_config

        quick_config(config)
    engine, shared = ("torch", "step") if args.child == "rlvr" else ("hf", "off")
    print(json.dumps(measure(config, engine, shared, args.steps)))


def run_child(name: str, argv: list[str]) -> dict[str, float]:
    result = subprocess.run([sys.executable, __file__, "--child", name, *argv],
                            stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    from _preset import preset_parser

    parser = preset_parser(__doc__.split("\n")[0], "short cold start, rlvr only", 2,
                           "GRPO steps (peaks of the last)")
    parser.add_argument("--child", choices=["rlvr", "baseline"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    from _machine import machine_line

    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    print(machine_line(load_config(RunConfig, Path(args.config), args.sets).model.precision))
    passed = ["--config", args.config, "--steps", str(args.steps)]
    passed += [x for s in args.sets for x in ("--set", s)] + (["--quick"] if args.quick else [])
    ours = run_child("rlvr", passed)
    line = (f"grpo step peak RSS MiB: rlvr {ours['peak']:.0f} (resident {ours['resident']:.0f}, "
            f"rollout {ours['rollout']:.0f}, update {ours['update']:.0f})")
    if args.quick:
        print(line)
        return
    base = run_child("baseline", passed)
    print(f"baseline (hf generate + plain forward): peak {base['peak']:.0f} MiB (resident "
          f"{base['resident']:.0f}, rollout {base['rollout']:.0f}, update {base['update']:.0f})")
    print(f"{line}, baseline {base['peak']:.0f}, ratio {ours['peak'] / base['peak']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())

"""Cost of a GRPO step as the work grows: model size, completion length, rows per step, full
fine-tuning or LoRA; each point against transformers ``generate`` alone, the machine's
roofline and the update's FLOP floor, with its peak memory.

Models: the embedded SmolLM2-135M-Instruct (``smollm2-135m-instruct``, real weights) and
randomly initialised models with the published shapes of SmolLM2-360M, Qwen2.5-0.5B and
Qwen2.5-1.5B (``_scaling_point.SHAPES``, from their config.json; no download). Every point runs
in a fresh child process (``_scaling_point.py``): one rollout with the ``torch`` engine (U
prompts of P random tokens x G samples, every row generating exactly T tokens: no stop
token), the same rollout with transformers ``generate`` alone (no log-probs; the engine's
figure includes them), then one GRPO update of those rows (reward: each row's share of even
token ids, which varies inside every group; AdamW; ``shared_prefix: step``; the point's
micro-batch, LoRA rank, ``grpo.activation_checkpointing`` and ``grpo.logprob_chunk_tokens``),
after a warm-up update on one short row. Precision (``--variants``): fp32 everywhere; where the
CPU computes bf16 natively, by default also every point in bf16 (engine and update autocast;
ids ``-bf16``) and in fp32 with every library capped to AVX2 (``ATEN_CPU_CAPABILITY=avx2``,
``ONEDNN_MAX_CPU_ISA=AVX2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``, rlvr's kernels built with
``-march=haswell``; ids ``-capped``), the stand-in for an AVX2-only CPU, each against the matmul
rate measured in its own precision and cap. On an AVX2-only CPU bf16 is emulated ~85x slower
and skipped (the header says why).

Figures per point:

- rollout tokens/s, and its ratio to ``generate`` alone (same model, prompts, rows, length);
- roofline: the tokens/s the machine's measured matmul FLOP/s (F, best of 1024^3 / 1536^3
  products, as benchmarks/rollout_throughput.py) and memory bandwidth (B, a 256 MiB fp32 sum)
  allow. Each decode step of R live rows at context c costs ``max(bytes / B, flops / F)`` with
  bytes = the engine's weights (``(N_layers + V H) x 4``) + the KV cache read
  (``R c 2 L K x 4``) and flops = ``2 N R + 4 L H c R``; the prefill ``2 N U P / F``. The
  bound named is the one that dominates the summed steps (memory or compute);
- update seconds against the update's FLOP floor: forward matmul FLOPs
  ``W = 2 N_layers (U P + R T) + 2 V H R T`` (the step's prompts once, the completions, the
  head on the completion positions only) and attention ``A = 4 L H (U P^2 / 2 + R (P T +
  T^2 / 2))`` (Kaplan et al. 2020, arXiv:2001.08361, sec. 2.1: 2N per token forward plus
  the attention term); full fine-tuning ``3 (W + A)`` (backward = 2x forward: input and
  weight gradients, 2N each; Kaplan et al., Narayanan et al. 2021, arXiv:2104.04473 sec. 3);
  LoRA ``2 W + 3 A`` (frozen weights: no weight gradients, but the input gradients still run
  back through every frozen matmul, 2N per token; the adapters' own FLOPs, < 1% at rank 16,
  are left out). Floor seconds = floor FLOPs / F; activation checkpointing adds a forward
  (its points show that cost in the ratio);
- the engine against the bound its own matmuls set (where the point runs ``generate``): one
  more rollout with every matmul of the engine timed (``rollout_throughput.timed_matmuls``);
  the bound is the tokens/s with everything but the matmuls (attention, norms, sampling,
  Python) free, and the engine's share of it is what an AVX2-only CPU, where fp32 matmuls
  bound both the engine and ``generate``, is measured by (target >= 80%);
- peak resident memory (Linux ``VmHWM``, reset before each phase) of the rollout and of the
  update, in MiB, next to the memory model's prediction (``rlvr.models.memory_model``), and
  whether the step fits in 16 / 32 / 64 GB (GiB, the larger peak).

The full sweep is a fixed plan (``PLAN``) with an estimate per point from the same roofline and
floor; it prints the plan first, then runs the points in order while the estimates fit
``--max-seconds`` (points over it are listed as skipped). Estimates assume the engine at 1/3
of its roofline, ``generate`` at 1/5 of the engine and the update at 2x its floor.

Usage: python benchmarks/scaling.py [--quick] [--points ID,ID] [--max-seconds 3600]
  [--variants fp32,bf16,fp32-capped] [--json out.json] [--markdown out.md]
(--quick: two points of a reduced Qwen2.5-shaped model, 151,936-token vocabulary on a
2-layer, 128-wide body, 8 rows x 16 tokens: full fine-tuning, and LoRA with checkpointing and
a chunked head, in one child process (the second point's peaks include what the first left
allocated), one thread (on a machine busy with other jobs, small ops on two threads wait for
each other's time slices: measured 8x slower); under a minute on a 2-core AVX2-only CPU.)
Never time two heavy jobs at once: wrap the full sweep in
``flock /tmp/rlvr-bench.lock`` on a shared machine.
Last line: ``scaling: N points, engine >= Xx generate (worst ID), update <= Yx FLOP floor
(worst ID), peak Z GiB (ID)``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _scaling_point import EMBEDDED, shape_of  # noqa: E402  (after the sys.path entry)


def _p(pid, model, rows, prompt, length, lora=0, micro=8, ckpt=False, chunk=None, group=8,
       generate=True, rollout=True, floor=None):
    # floor: time the engine's matmuls in one more rollout (default: where generate runs)
    floor = generate if floor is None else floor
    return {"id": pid, "model": model, "rows": rows, "prompt": prompt, "length": length,
            "lora": lora, "micro_batch": micro, "checkpointing": ckpt, "chunk": chunk,
            "group": min(group, rows), "generate": generate and rollout, "rollout": rollout,
            "floor": floor and rollout}


#: The full sweep, cheapest first within each axis (ids: model-rows-prompt-length-mode).
PLAN = [
    _p("135m-16-60-64-ft", EMBEDDED, 16, 60, 64),
    _p("135m-16-60-256-ft", EMBEDDED, 16, 60, 256),
    _p("135m-64-60-64-ft", EMBEDDED, 64, 60, 64, micro=16),
    _p("135m-16-600-256-lora", EMBEDDED, 16, 600, 256, lora=16),
    _p("135m-16-60-1024-lora-ck", EMBEDDED, 16, 60, 1024, lora=16, micro=4, ckpt=True,
       chunk=1024, generate=False),
    _p("360m-16-60-256-ft", "smollm2-360m", 16, 60, 256, micro=4),
    _p("0.5b-16-60-256-lora-ck", "qwen2.5-0.5b", 16, 60, 256, lora=16, micro=4, ckpt=True,
       chunk=1024),
    _p("1.5b-4-60-512-lora-ck", "qwen2.5-1.5b", 4, 60, 512, lora=16, micro=1, ckpt=True,
       chunk=256, group=4, generate=False),
    # the same step's update alone (no engine resident): where the machine has too little
    # free memory for the whole step, this part still measures
    _p("1.5b-2-60-512-lora-ck-update", "qwen2.5-1.5b", 2, 60, 512, lora=16, micro=1,
       ckpt=True, chunk=256, group=2, rollout=False),
    _p("135m-4-60-256-lora-update", EMBEDDED, 4, 60, 256, lora=16, micro=4, group=4,
       rollout=False),
    _p("135m-4-60-256-lora-ck-update", EMBEDDED, 4, 60, 256, lora=16, micro=4, ckpt=True,
       chunk=256, group=4, rollout=False),
    _p("0.5b-8-60-256-lora", "qwen2.5-0.5b", 8, 60, 256, lora=16, micro=4, group=4,
       generate=False),
    _p("0.5b-8-60-256-lora-ck", "qwen2.5-0.5b", 8, 60, 256, lora=16, micro=4, ckpt=True,
       chunk=256, group=4, generate=False),
    _p("135m-256-60-64-ft", EMBEDDED, 256, 60, 64, micro=32, generate=False),
    _p("135m-16-60-2048-lora-ck", EMBEDDED, 16, 60, 2048, lora=16, micro=2, ckpt=True,
       chunk=1024, generate=False),
    _p("0.5b-16-600-1024-lora-ck", "qwen2.5-0.5b", 16, 600, 1024, lora=16, micro=2, ckpt=True,
       chunk=1024, generate=False),
    _p("1.5b-16-60-2048-lora-ck", "qwen2.5-1.5b", 16, 60, 2048, lora=16, micro=1, ckpt=True,
       chunk=256, generate=False),
]
QUICK = [
    _p("mini-8-60-16-ft", "qwen2.5-mini", 8, 60, 16, micro=8, group=4),
    _p("mini-8-60-16-lora-ck", "qwen2.5-mini", 8, 60, 16, lora=8, micro=4, ckpt=True,
       chunk=32, group=4),
]


#: Every library capped to AVX2 (and rlvr's kernels built for it): an AVX2-only CPU's code
#: paths on a CPU that has more.
AVX2_CAP = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2", "RLVR_KERNEL_CFLAGS": "-march=haswell"}
#: variant -> (id suffix, compute precision, capped to AVX2)
VARIANTS = {"fp32": ("", "fp32", False), "bf16": ("-bf16", "bf16", False),
            "fp32-capped": ("-capped", "fp32", True)}


def expand(plan: list[dict], variants: list[str]) -> list[dict]:
    """Every point of ``plan`` once per variant (fp32 points keep their ids)."""
    out = []
    for name in variants:
        suffix, precision, capped = VARIANTS[name]
        out += [dict(p, id=p["id"] + suffix, precision=precision, capped=capped) for p in plan]
    return out


def variant_rates(p: dict, rates: dict, quick: bool) -> tuple[float, float]:
    """(F, B) for the point's precision and cap, measured once per kind (a capped rate in a
    child process under :data:`AVX2_CAP`: the cap is read when torch loads)."""
    key = (p.get("precision", "fp32"), p.get("capped", False))
    if key not in rates:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--rates", key[0],
               "--threads", str(torch.get_num_threads())]  # the points' threads
        cmd += ["--quick"] if quick else []
        env = {**os.environ, **(AVX2_CAP if key[1] else {})}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        rates[key] = tuple(json.loads(done.stdout.strip().splitlines()[-1]))
    return rates[key]


def machine_rates(quick: bool, dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """(F, B): matmul FLOP/s (in ``dtype``) and memory bandwidth (bytes/s) of this machine,
    now."""
    from rollout_throughput import matmul_flops

    flops = matmul_flops(dtype, (1024, 1536) if quick else (1024, 1536, 2048),
                         seconds=0.2 if quick else 0.5)
    data = torch.ones(64 * 2**20)  # 256 MiB
    data.sum()
    start, count = time.perf_counter(), 0
    while count < 3 or time.perf_counter() - start < (0.2 if quick else 0.5):
        data.sum()
        count += 1
    return flops, data.numel() * 4 * count / (time.perf_counter() - start)


def rollout_roofline(p: dict, flops: float, bandwidth: float) -> tuple[float, str]:
    """(tokens/s, bound) of the point's rollout at the roofline (module doc)."""
    s = shape_of(p["model"])
    n = s.body_params + s.vocab * s.hidden
    rows, prompts = p["rows"], p["rows"] // p["group"]
    value = 2 if p.get("precision") == "bf16" else 4  # bytes per weight / cache value
    weights = (s.body_params + s.vocab * s.hidden) * value
    memory_s = compute_s = 0.0
    for step in range(p["length"]):
        c = p["prompt"] + step
        memory_s += (weights + rows * c * 2 * s.layers * s.kv_width * value) / bandwidth
        compute_s += (2 * n * rows + 4 * s.layers * s.hidden * c * rows) / flops
    total = max(memory_s, compute_s) + 2 * n * prompts * p["prompt"] / flops
    return rows * p["length"] / total, "memory" if memory_s >= compute_s else "compute"


def update_floor_flops(p: dict) -> float:
    """FLOPs of the point's update at the floor (module doc)."""
    s = shape_of(p["model"])
    rows, prompts, pl, t = p["rows"], p["rows"] // p["group"], p["prompt"], p["length"]
    w = 2 * s.body_params * (prompts * pl + rows * t) + 2 * s.vocab * s.hidden * rows * t
    a = 4 * s.layers * s.hidden * (prompts * pl * pl / 2 + rows * (pl * t + t * t / 2))
    return 2 * w + 3 * a if p["lora"] else 3 * (w + a)


def predicted(p: dict):
    """The memory model's :class:`~rlvr.models.memory_model.StepMemory` for the point."""
    from rlvr.models.memory_model import predict_step_memory

    return predict_step_memory(
        shape_of(p["model"]), prompts=p["rows"] // p["group"], group=p["group"],
        prompt_tokens=p["prompt"], completion_tokens=p["length"], micro_batch=p["micro_batch"],
        lora_rank=p["lora"], activation_checkpointing=p["checkpointing"],
        logprob_chunk_tokens=p["chunk"], engine=p.get("rollout", True),
        value_bytes=2 if p.get("precision") == "bf16" else 4)


def estimate_seconds(p: dict, flops: float, bandwidth: float) -> float:
    """Wall seconds the point is expected to take (module doc's assumptions)."""
    roof, _ = rollout_roofline(p, flops, bandwidth)
    rollout = 3 * p["rows"] * p["length"] / roof if p.get("rollout", True) else 0.0
    build = 25 if p["model"] == EMBEDDED else shape_of(p["model"]).params / 5e7
    rollouts = 1 + (5 if p["generate"] else 0) + (1 if p.get("floor") else 0)
    return build + rollout * rollouts + 2 * update_floor_flops(p) / flops


def run_child(points: list[dict], timeout: float) -> list[dict]:
    """Run ``points`` in one fresh process; their JSON figures, or ``{"error": ...}`` for
    each point that did not report."""
    env = {**os.environ, **(AVX2_CAP if any(p.get("capped") for p in points) else {})}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    error, lines = None, []
    try:
        done = subprocess.run([sys.executable, str(HERE / "_scaling_point.py"),
                               json.dumps(points)], capture_output=True, text=True,
                              timeout=timeout, env=env)
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        if done.returncode != 0:
            error = f"exit {done.returncode}: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout:.0f} s"
    return lines + [{"error": error or "no output"}] * (len(points) - len(lines))


def available_gib() -> float:
    """Memory the OS can give now (``MemAvailable``), GiB; infinite off Linux."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return float("inf")
    kib = next((int(x.split()[1]) for x in text.splitlines() if x.startswith("MemAvailable")),
               None)
    return float("inf") if kib is None else kib / 2**20


def figures(p: dict, r: dict, flops: float, bandwidth: float) -> dict:
    """The point's derived figures: ratios, roofline share, predictions, fits (a point run
    without its rollout has no rollout figures: ``None``)."""
    roof, bound = rollout_roofline(p, flops, bandwidth)
    floor_s = update_floor_flops(p) / flops
    pred = predicted(p)
    base = r["baseline_mib"]
    measured = "rollout_tps" in r
    peak = max(r.get("rollout_peak_mib", 0.0), r["update_peak_mib"])
    return {
        "vs_generate": r["rollout_tps"] / r["generate_tps"] if "generate_tps" in r else None,
        "vs_matmuls": (r["rollout_tps"] / r["matmul_bound_tps"] if "matmul_bound_tps" in r
                       else None),
        "roofline_tps": roof, "bound": bound,
        "roofline_pct": 100 * r["rollout_tps"] / roof if measured else None,
        "floor_s": floor_s, "vs_floor": r["update_s"] / floor_s,
        "pred_rollout_mib": pred.rollout / 2**20 + base if measured else None,
        "pred_update_mib": pred.update / 2**20 + base,
        "peak_gib": peak / 1024,
        "fits": [gb for gb in (16, 32, 64) if peak <= gb * 1024],
    }


def _num(value, form: str, empty: str = "-") -> str:
    return empty if value is None else format(value, form)


def summary_line(p: dict, r: dict) -> str:
    """One point's figures, for the log."""
    gen = f"{r['vs_generate']:.1f}x generate" if r["vs_generate"] else "generate not run"
    if r.get("vs_matmuls"):
        gen += f", {100 * r['vs_matmuls']:.0f}% of its matmul bound"
    rollout = ("no rollout (update alone)" if r.get("rollout_tps") is None else
               f"rollout {r['rollout_tps']:.0f} tok/s ({gen}, {r['roofline_pct']:.0f}% of "
               f"{r['bound']} roofline), peak {r['rollout_peak_mib']:.0f} MiB (pred "
               f"{r['pred_rollout_mib']:.0f})")
    return (f"{p['id']}: {rollout}; update {r['update_s']:.1f} s ({r['vs_floor']:.2f}x "
            f"floor), peak {r['update_peak_mib']:.0f} MiB (pred {r['pred_update_mib']:.0f})")


def row_markdown(p: dict, r: dict) -> str:
    """One markdown table row of a measured point."""
    mode = (f"LoRA r{p['lora']}" if p["lora"] else "full") + (" +ckpt" if p["checkpointing"]
                                                               else "")
    if p["chunk"]:
        mode += f" +chunk{p['chunk']}"
    gen = f"{r['vs_generate']:.1f}x" if r.get("vs_generate") else "not run"
    mm = f"{100 * r['vs_matmuls']:.0f}%" if r.get("vs_matmuls") else "-"
    fits = "/".join(str(g) for g in r["fits"]) or "none"
    roof = ("-" if r.get("roofline_pct") is None
            else f"{r['roofline_pct']:.0f}% ({r['bound']})")
    return (f"| {p['id']} | {p['rows']} | {p['prompt']} | {p['length']} | {mode} | "
            f"{_num(r.get('rollout_tps'), '.0f')} | {gen} | {mm} | {roof} | "
            f"{r['update_s']:.1f} | {r['vs_floor']:.2f}x | "
            f"{_num(r.get('rollout_peak_mib'), '.0f')} / "
            f"{_num(r.get('pred_rollout_mib'), '.0f')} | {r['update_peak_mib']:.0f} / "
            f"{r['pred_update_mib']:.0f} | {fits} |")


HEADER = ("| point | rows | prompt | length | mode | rollout tok/s | vs generate | "
          "of matmul bound | roofline | update s | vs floor | rollout MiB (meas / pred) | "
          "update MiB (meas / pred) | fits GB |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def write_outputs(args, flops: float, bandwidth: float, results: dict, lines: list[str]
                  ) -> str:
    """Write ``--json`` and ``--markdown`` (so far; each through a temporary file, then
    renamed); returns the markdown table."""
    table = HEADER + "\n" + "\n".join(lines)
    outputs = [(args.json, json.dumps({"flops": flops, "bandwidth": bandwidth,
                                       "points": results}, indent=1)),
               (args.markdown, table + "\n")]
    for path, text in outputs:
        if path:
            temp = Path(f"{path}.tmp")
            temp.write_text(text)
            temp.replace(path)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two reduced points, < 1 minute")
    parser.add_argument("--points", default=None,
                        help="comma-separated point ids of the plan, run in that order")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="run points while their estimates fit this budget")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of every measurement (default: torch's, i.e. the "
                             "cores; --quick: 1, which a busy machine slows least)")
    parser.add_argument("--json", default=None, help="write every point's figures here")
    parser.add_argument("--markdown", default=None, help="write the table here")
    parser.add_argument("--variants", default=None,
                        help="comma-separated, of fp32, bf16, fp32-capped (default: fp32; where "
                             "bf16 is native, all three; --quick: fp32)")
    parser.add_argument("--rates", choices=("fp32", "bf16"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rates:  # a child measuring the matmul rate under its environment's cap
        torch.set_num_threads(args.threads or torch.get_num_threads())
        dtype = torch.bfloat16 if args.rates == "bf16" else torch.float32
        print(json.dumps(machine_rates(args.quick, dtype)))
        return
    from _machine import machine_line

    from rlvr.models.precision import probe_cpu

    plan = QUICK if args.quick else PLAN
    if args.points:
        wanted = args.points.split(",")
        unknown = [w for w in wanted if w not in {p["id"] for p in plan}]
        if unknown:
            parser.error(f"--points: unknown ids {unknown}; the plan has "
                         f"{[p['id'] for p in plan]}")
        by_id = {p["id"]: p for p in plan}
        plan = [by_id[w] for w in wanted]  # in the order given
    native = probe_cpu().native_bf16
    default = "fp32,bf16,fp32-capped" if native and not args.quick else "fp32"
    variants = (args.variants or default).split(",")
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"--variants: unknown {unknown}; choose from {list(VARIANTS)}")
    plan = expand(plan, variants)
    threads = args.threads or (1 if args.quick else torch.get_num_threads())
    torch.set_num_threads(threads)
    for p in plan:
        p["threads"] = threads
    print(machine_line("fp32") + f", load average {os.getloadavg()[0]:.1f}")
    if not native:
        print("bf16: " + ("emulated (no native bf16 on this CPU: ~85x slower)" if "bf16" in
                          variants else "skipped (no native bf16 on this CPU: torch emulates it "
                                        "~85x slower)"))
    flops, bandwidth = machine_rates(args.quick)
    rates = {("fp32", False): (flops, bandwidth)}
    print(f"machine now: fp32 matmul {flops / 1e9:.0f} GFLOP/s, memory {bandwidth / 1e9:.1f} "
          f"GB/s")
    for kind in {(p["precision"], p["capped"]) for p in plan} - set(rates):
        f = variant_rates({"precision": kind[0], "capped": kind[1]}, rates, args.quick)[0]
        print(f"machine now: {kind[0]}{' capped to AVX2' if kind[1] else ''} matmul "
              f"{f / 1e9:.0f} GFLOP/s")
    budget, planned = args.max_seconds, []
    for p in plan:
        est = estimate_seconds(p, *variant_rates(p, rates, args.quick))
        run = est <= budget
        budget -= est if run else 0
        planned.append((p, est, run))
        print(f"plan {p['id']}: {p['model']}, {p['rows']} rows x {p['length']} tokens, prompt "
              f"{p['prompt']}, est {est:.0f} s{'' if run else ' -> skipped (over budget)'}")
    results, lines = {}, []
    todo = [(p, est) for p, est, run in planned if run]
    # quick: its small points share one process per variant (one import of the libraries);
    # full: a fresh process per point, so each peak is the point's own
    batches = ([[x for x in todo if (x[0]["precision"], x[0]["capped"]) == VARIANTS[v][1:]]
                for v in variants] if args.quick else [[x] for x in todo])
    batches = [b for b in batches if b]  # a variant whose points are all over the budget
    for batch in batches:
        t0 = time.perf_counter()
        need = max(predicted(p).peak for p, _ in batch) / 2**30 + 1.0
        free = available_gib()
        if need > free:  # an OOM kill would take this or another job down
            for p, _ in batch:
                print(f"{p['id']}: skipped, needs ~{need:.1f} GiB (memory model + 1), "
                      f"{free:.1f} GiB available now", flush=True)
                results[p["id"]] = {"point": p, "error": f"skipped: needs ~{need:.1f} GiB, "
                                                          f"{free:.1f} available"}
            continue
        reports = run_child([p for p, _ in batch],
                            timeout=max(1800.0, 6 * sum(est for _, est in batch)))
        for (p, _), r in zip(batch, reports):
            if "error" in r:
                print(f"{p['id']}: {r['error']}", flush=True)
                results[p["id"]] = {"point": p, **r}
                continue
            r.update(figures(p, r, *variant_rates(p, rates, args.quick)))
            results[p["id"]] = {"point": p, **r}
            print(summary_line(p, r), flush=True)
            lines.append(row_markdown(p, r))
        write_outputs(args, flops, bandwidth, results, lines)  # after every point
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(write_outputs(args, flops, bandwidth, results, lines))
    ok = {k: v for k, v in results.items() if "error" not in v}
    if not ok:
        print("scaling: no point measured")
        return
    gens = {k: v["vs_generate"] for k, v in ok.items() if v["vs_generate"]}
    worst_gen = min(gens, key=gens.get) if gens else None
    worst_floor = max(ok, key=lambda k: ok[k]["vs_floor"])
    top = max(ok, key=lambda k: ok[k]["peak_gib"])
    gen_text = f"{gens[worst_gen]:.1f}x generate ({worst_gen})" if gens else "generate not run"
    shares = {k: v["vs_matmuls"] for k, v in ok.items() if v.get("vs_matmuls")}
    if shares:
        low = min(shares, key=shares.get)
        gen_text += f", >= {100 * shares[low]:.0f}% of its matmul bound ({low})"
    print(f"scaling: {len(ok)} points, engine >= {gen_text}, update <= "
          f"{ok[worst_floor]['vs_floor']:.2f}x FLOP floor ({worst_floor}), peak "
          f"{ok[top]['peak_gib']:.1f} GiB ({top})")


if __name__ == "__main__":
    sys.exit(main())

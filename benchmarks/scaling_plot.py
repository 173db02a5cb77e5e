"""The "what fits" figure of benchmarks/scaling.py: peak memory of a GRPO step against
completion length per model (the memory model's prediction as lines, measured peaks as
points) and seconds per step (rollout + update) against model size for the measured points.

Usage: python benchmarks/scaling_plot.py OUT.png RESULTS.json [RESULTS.json ...] [--title TEXT]
(RESULTS: ``scaling.py --json`` files). Lines: 2 prompts x G = 8 rows, 60-token prompts, fp32;
full fine-tuning with 4-row micro-batches, and LoRA r16 with activation checkpointing, a
512-position chunked head and 1-row micro-batches.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scaling_point import EMBEDDED, shape_of

MODELS = {"smollm2-135m": "SmolLM2-135M", "smollm2-360m": "SmolLM2-360M",
          "qwen2.5-0.5b": "Qwen2.5-0.5B", "qwen2.5-1.5b": "Qwen2.5-1.5B"}
LENGTHS = [64, 128, 256, 512, 1024, 2048]
GIB = 2**30


def predicted_gib(model: str, length: int, lora: bool) -> float:
    """The memory model's step peak (GiB, 0.4 GiB of libraries included)."""
    from rlvr.models.memory_model import predict_step_memory

    return predict_step_memory(
        shape_of(model), prompts=2, group=8, prompt_tokens=60, completion_tokens=length,
        micro_batch=1 if lora else 4, lora_rank=16 if lora else 0,
        activation_checkpointing=lora, logprob_chunk_tokens=512 if lora else None,
        baseline_bytes=int(0.4 * GIB)).peak / GIB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the PNG to write")
    parser.add_argument("results", nargs="+", help="scaling.py --json files")
    parser.add_argument("--title", default="fp32, 2 cores",
                        help="the figure's title: the machine and precision of the sweep")
    opts = parser.parse_args(argv)
    args = [opts.out, *opts.results]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = {}
    for path in args[1:]:
        points.update(json.loads(Path(path).read_text())["points"])
    measured = [v for v in points.values() if "error" not in v]
    fig, (mem, sec) = plt.subplots(1, 2, figsize=(11, 5.6))
    for i, (model, label) in enumerate(MODELS.items()):
        color = f"C{i}"
        mem.plot(LENGTHS, [predicted_gib(model, t, False) for t in LENGTHS], color=color,
                 ls="--", label=f"{label} full FT (model)")
        mem.plot(LENGTHS, [predicted_gib(model, t, True) for t in LENGTHS], color=color,
                 label=f"{label} LoRA+ckpt+chunk (model)")
    for v in measured:
        p = v["point"]
        name = "smollm2-135m" if p["model"] == EMBEDDED else p["model"]
        color = f"C{list(MODELS).index(name)}" if name in MODELS else "k"
        mem.scatter([p["length"]], [v["peak_gib"]], color=color, marker="o", zorder=3)
        total = v["update_s"] + (p["rows"] * p["length"] / v["rollout_tps"]
                                 if v.get("rollout_tps") else 0.0)
        sec.scatter([shape_of(p["model"]).params / 1e6], [total], color=color, zorder=3)
        sec.annotate(p["id"], (shape_of(p["model"]).params / 1e6, total), fontsize=7,
                     xytext=(3, 3), textcoords="offset points")
    for gb in (16, 32, 64):
        mem.axhline(gb * 1e9 / GIB, color="grey", lw=0.6, ls=":")
        mem.annotate(f"{gb} GB", (LENGTHS[0], gb * 1e9 / GIB), fontsize=7, color="grey",
                     xytext=(0, 2), textcoords="offset points")
    mem.set(xscale="log", yscale="log", xlabel="completion tokens",
            ylabel="step peak memory (GiB)", title="Memory: model (lines), measured (dots)")
    mem.set_xticks(LENGTHS, [str(t) for t in LENGTHS])
    mem.legend(fontsize=6, ncol=2, loc="upper left", bbox_to_anchor=(0.0, -0.18))
    sec.set(xscale="log", yscale="log", xlabel="parameters (M)",
            ylabel="seconds (rollout + update)", title="Measured step seconds")
    fig.suptitle(opts.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args[0], dpi=110)
    print(f"wrote {args[0]} ({len(measured)} measured points)")


if __name__ == "__main__":
    sys.exit(main())

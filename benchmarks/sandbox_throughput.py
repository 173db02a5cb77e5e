"""Sandbox throughput: HumanEval canonical solutions per second, isolated vs bare.

- isolated: the full verifier path (``rlvr.rewards.code.grade_code``: extraction, test
  planning, sandbox with namespaces / cgroups / rlimits, grading), from ``--workers`` threads
  (default: usable cores).
- bare: one plain ``python3 -c <prompt + solution + test + check(entry)>`` subprocess per
  program, same interpreter and concurrency, no isolation, no limits.

Usage: ``python benchmarks/sandbox_throughput.py [--quick] [--workers N]``. ``--quick`` uses the
first 48 problems (finishes well within 60 s). The last line is the headline:
``sandbox programs/s: isolated X, bare Y, ratio Z``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlvr.rewards.code import grade_code  # noqa: E402
from rlvr.sandbox import SandboxPool, environment, usable_cores  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "humaneval" / "HumanEval.jsonl"


def _isolated(problems: list[dict], workers: int) -> tuple[float, int]:
    pool = SandboxPool(workers=workers)

    def one(p: dict) -> bool:
        ref = {"entry_point": p["entry_point"], "test": p["test"], "prompt": p["prompt"]}
        return grade_code(p["canonical_solution"], ref, pool=pool).verdict.outcome == 1.0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        ok = sum(ex.map(one, problems))
    return time.perf_counter() - t0, ok


def _bare(problems: list[dict], workers: int, python: str) -> tuple[float, int]:
    def one(p: dict) -> bool:
        src = (p["prompt"] + p["canonical_solution"] + "\n" + p["test"]
               + f"\ncheck({p['entry_point']})\n")
        r = subprocess.run([python, "-c", src], capture_output=True, timeout=60)
        return r.returncode == 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        ok = sum(ex.map(one, problems))
    return time.perf_counter() - t0, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="48 problems instead of 164")
    ap.add_argument("--workers", type=int, default=None,
                    help="concurrent programs (default: cores)")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"missing {DATA}", file=sys.stderr)
        return 2
    problems = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    if args.quick:
        problems = problems[:48]
    workers = args.workers or usable_cores()
    env = environment()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine_line

    print(machine_line(None))
    print(f"tier={env.tier.value} cgroups={env.cgroups} python={env.python} workers={workers} "
          f"programs={len(problems)}")
    _isolated(problems[:4], workers)  # warm-up: probe, staging, page cache
    t_iso, ok_iso = _isolated(problems, workers)
    t_bare, ok_bare = _bare(problems, workers, env.python)
    iso, bare = len(problems) / t_iso, len(problems) / t_bare
    print(f"isolated: {len(problems)} programs in {t_iso:.2f} s, {ok_iso} correct")
    print(f"bare:     {len(problems)} programs in {t_bare:.2f} s, {ok_bare} exit 0")
    print(f"sandbox programs/s: isolated {iso:.1f}, bare {bare:.1f}, ratio {iso / bare:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

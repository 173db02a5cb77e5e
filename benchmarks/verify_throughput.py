"""Math verification: accuracy and throughput of rlvr vs math-verify on the same cases, same run.

Scores ../shared/cases/math_equivalence.jsonl (reference, response, expected verdict) with
rlvr's reward pipeline (one verifier worker process, the product's real path, time bounds on)
and with math-verify (`verify(parse(reference), parse(response))`, its own signal-based
timeouts, in this process), one after the other on one core each. math-verify is given the
advantage of wrapped references (`\\boxed{ref}` when the reference has no `$` or `\\boxed`),
which is its better mode on this file.

Usage: python benchmarks/verify_throughput.py [--cases FILE] [--quick] [--repeat N]
Last line: `math verify/s: rlvr X (acc A%), math-verify Y (acc B%), ratio Rx`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_CASES = Path(__file__).resolve().parents[1].parent / "shared/cases/math_equivalence.jsonl"
WARMUP = [("\\frac{1}{2}", "\\boxed{0.5}"), ("x^2+1", "\\boxed{1+x^2}"), ("3", "#### 3")]


def load(path: Path, quick: bool) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return rows[::3] if quick else rows


def run_rlvr(cases: list[dict], repeat: int) -> tuple[list[bool], float]:
    from rlvr.rewards import RewardConfig, RewardPipeline, ScoreRequest

    with RewardPipeline(RewardConfig(workers=1)) as pipeline:
        pipeline.score_batch([ScoreRequest(resp, ref) for ref, resp in WARMUP])
        requests = [ScoreRequest(c["response"], c["reference"]) for c in cases]
        start = time.perf_counter()
        for _ in range(repeat):
            results = pipeline.score_batch(requests)
        seconds = time.perf_counter() - start
    return [r.status.value == "correct" for r in results], seconds


def run_math_verify(cases: list[dict], repeat: int) -> tuple[list[bool], float]:
    from math_verify import parse, verify

    # a math-verify timeout is scored as a wrong verdict below; its log line is only noise
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)

    def wrap(ref: str) -> str:
        return ref if ("$" in ref or "\\boxed" in ref) else f"\\boxed{{{ref}}}"

    def judge(ref: str, resp: str) -> bool:
        try:
            return bool(verify(parse(wrap(ref)), parse(resp)))
        except Exception:
            return False

    for ref, resp in WARMUP:
        judge(ref, resp)
    start = time.perf_counter()
    for _ in range(repeat):
        verdicts = [judge(c["reference"], c["response"]) for c in cases]
    return verdicts, time.perf_counter() - start


def accuracy(verdicts: list[bool], cases: list[dict], disputed: bool = True) -> float:
    pairs = [(v, c) for v, c in zip(verdicts, cases) if disputed or not c["disputed"]]
    return sum(v == c["expected"] for v, c in pairs) / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--quick", action="store_true", help="a third of the cases, one pass")
    parser.add_argument("--repeat", type=int, default=1, help="passes over the cases per tool")
    args = parser.parse_args()
    from _machine import machine_line

    print(machine_line(None))
    if not args.cases.is_file():
        sys.exit(f"missing {args.cases} (the shared cases: put ../shared next to the repository, "
                 f"or pass --cases)")
    cases = load(args.cases, args.quick)

    rlvr_verdicts, rlvr_s = run_rlvr(cases, args.repeat)
    mv_verdicts, mv_s = run_math_verify(cases, args.repeat)
    n = len(cases) * args.repeat
    rlvr_rate, mv_rate = n / rlvr_s, n / mv_s
    print(f"cases: {len(cases)} x {args.repeat} pass(es) from {args.cases}")
    for name, verdicts, secs in (("rlvr", rlvr_verdicts, rlvr_s),
                                 ("math-verify", mv_verdicts, mv_s)):
        print(f"{name:12s} accuracy all {accuracy(verdicts, cases):.1%}, non-disputed "
              f"{accuracy(verdicts, cases, disputed=False):.1%}; {secs:.2f} s, "
              f"{n / secs:.1f} verifications/s")
    print(f"math verify/s: rlvr {rlvr_rate:.1f} (acc {accuracy(rlvr_verdicts, cases):.1%}), "
          f"math-verify {mv_rate:.1f} (acc {accuracy(mv_verdicts, cases):.1%}), "
          f"ratio {rlvr_rate / mv_rate:.1f}x")


if __name__ == "__main__":
    main()

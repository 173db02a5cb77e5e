"""benchmarks/scaling.py's precision variants: each plan point once per variant, the bf16
roofline on 2-byte values, and the AVX2 cap in the environment of a capped point's process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import scaling  # noqa: E402  (benchmarks/ is not a package)


def test_each_point_once_per_variant():
    plan = scaling.PLAN[:2]
    points = scaling.expand(plan, ["fp32", "bf16", "fp32-capped"])
    assert [p["id"] for p in points] == [
        plan[0]["id"], plan[1]["id"], plan[0]["id"] + "-bf16", plan[1]["id"] + "-bf16",
        plan[0]["id"] + "-capped", plan[1]["id"] + "-capped"]
    assert [(p["precision"], p["capped"]) for p in points] == [
        ("fp32", False)] * 2 + [("bf16", False)] * 2 + [("fp32", True)] * 2
    assert "precision" not in plan[0]  # the plan itself is left as it was


def test_bf16_roofline_reads_half_the_bytes():
    point = dict(scaling.PLAN[0])
    slow_memory = dict(flops=1e15, bandwidth=1e9)  # memory bound: tokens/s ~ 1 / bytes
    fp32, bound = scaling.rollout_roofline(point, **slow_memory)
    bf16, _ = scaling.rollout_roofline({**point, "precision": "bf16"}, **slow_memory)
    assert bound == "memory"
    assert bf16 / fp32 == pytest.approx(2.0, rel=1e-3)


@pytest.mark.parametrize("capped", [False, True])
def test_capped_points_run_under_the_avx2_cap(monkeypatch, capped):
    seen = {}

    def fake_run(cmd, **kwargs):
        seen["env"] = kwargs["env"]
        return subprocess.CompletedProcess(cmd, 0, stdout='{"update_s": 1.0}\n', stderr="")

    monkeypatch.setattr(scaling.subprocess, "run", fake_run)
    for name in scaling.AVX2_CAP:
        monkeypatch.delenv(name, raising=False)
    point = dict(scaling.QUICK[0], capped=capped)
    assert scaling.run_child([point], timeout=10) == [{"update_s": 1.0}]
    for name, value in scaling.AVX2_CAP.items():
        assert seen["env"].get(name) == (value if capped else None)

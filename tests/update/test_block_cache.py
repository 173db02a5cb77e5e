"""The policy update's caching allocator (rlvr.kernels.block_cache): large tensors come from
it, a freed block serves the next request of its size, mapped memory never exceeds the largest
live total seen, values survive reuse and disable, and training with it is bit for bit the
training without it. Each check runs in a fresh process: the allocator is process-wide."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20

pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX") or "c++") is None or sys.platform != "linux",
    reason="needs Linux and a C++ compiler")

PRELUDE = r"""
import json, random
import torch
from rlvr.kernels import block_cache as bc

MIB = 1 << 20
PAGE = 4096
assert bc.available(), bc.unavailable_reason()
def fields():
    return bc.stats().__dict__
"""

REUSE = PRELUDE + r"""
out = {}
assert bc.enable(2 * MIB)
base = bc.stats().live
t = torch.empty(MIB)                     # 4 MiB of fp32
out["aligned"] = t.data_ptr() % PAGE
out["live"] = bc.stats().live - base
small = torch.empty(1000)                # under 2 MiB: not the cache's
out["live_with_small"] = bc.stats().live - base
first = t.data_ptr()
del t
out["cached"] = bc.stats().cached
u = torch.empty(int(0.95 * MIB))         # within 1/8 of the free 4 MiB block: reused
out["reused"] = u.data_ptr() == first
del u
v = torch.empty(int(0.6 * MIB))          # far smaller: a new block
out["not_reused"] = v.data_ptr() != first
out["stats"] = fields()
bc.disable()
out["after_disable"] = fields()
print(json.dumps(out))
"""

BOUND = PRELUDE + r"""
random.seed(0)
assert bc.enable(2 * MIB)
base = bc.stats().live
live, peak = {}, 0
for step in range(400):
    if live and random.random() < 0.45:
        live.pop(random.choice(list(live)))
    else:
        n = random.choice([2, 3, 5, 8, 13]) * MIB // 4 + random.randrange(0, 4096)
        live[step] = torch.empty(n // 4)
        peak = max(peak, sum((t.numel() * 4 + PAGE - 1) // PAGE * PAGE for t in live.values()))
print(json.dumps({"peak_live": peak, "base": base, "stats": fields()}))
"""

VALUES = PRELUDE + r"""
assert bc.enable(2 * MIB)
g = torch.Generator().manual_seed(0)
kept = torch.randn(MIB, generator=g)     # lives across disable
copy = kept.clone()
for _ in range(5):                       # blocks freed and reused under new values
    a = torch.randn(MIB, generator=g)
    b = a * 2 + 1
    assert torch.equal(b, a * 2 + 1)
    del a, b
mapped_on = bc.stats().mapped
bc.disable()
out = {"equal_after_disable": bool(torch.equal(kept, copy)), "mapped_on": mapped_on,
       "mapped_off": bc.stats().mapped, "cached_off": bc.stats().cached}
before = bc.stats().live
fresh = torch.empty(2 * MIB)             # disabled: the previous allocator's
out["fresh_not_cached"] = bc.stats().live == before
del kept
out["mapped_after_free"] = bc.stats().mapped
print(json.dumps(out))
"""

TRAIN = r"""
import json, sys
import torch
from rlvr.models.allocator import mapped_large_blocks

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1536), torch.nn.SiLU(),
                            torch.nn.Linear(1536, 1024))  # 6 MiB weights, 3-6 MiB activations
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randn(4, 768, 1024, generator=torch.Generator().manual_seed(1))
with mapped_large_blocks(cache=sys.argv[1] == "1"):
    for x in data:
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
from rlvr.kernels import block_cache as bc
print(json.dumps({"hits": bc.stats().hits,
                  "bits": [p.detach().view(torch.int32).flatten().tolist()[::97] for p in
                           model.parameters()],
                  "sums": [p.detach().double().sum().item() for p in model.parameters()]}))
"""


def _child(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_large_tensors_come_from_the_cache_and_a_freed_block_is_reused():
    out = _child(REUSE)
    assert out["aligned"] == 0  # its own mapping: page aligned
    assert out["live"] == 4 * MIB and out["live_with_small"] == 4 * MIB
    assert out["cached"] == 4 * MIB
    assert out["reused"] and out["not_reused"]
    stats = out["stats"]
    assert stats["hits"] == 1 and stats["misses"] == 2
    # disabled: every kept block unmapped, the one live block still mapped
    after = out["after_disable"]
    assert after["cached"] == 0
    # the live block: the 0.6 Mi-element request, rounded up to 4 KiB pages; mapping it
    # unmapped the kept 4 MiB block (4 + 2.4 MiB would pass the 4 MiB live peak)
    assert after["mapped"] == after["live"] == (int(0.6 * MIB) * 4 + 4095) // 4096 * 4096
    assert after["evictions"] == 1


def test_mapped_memory_never_exceeds_the_largest_live_total():
    out = _child(BOUND)
    stats = out["stats"]
    assert stats["hits"] > 50 and stats["misses"] > 0  # the pattern reuses and evicts
    assert stats["evictions"] > 0
    # a live tensor can sit in a kept block up to 1/8 larger than its own pages
    assert stats["peak_mapped"] <= out["base"] + 1.125 * out["peak_live"]


def test_values_survive_reuse_and_disable():
    out = _child(VALUES)
    assert out["equal_after_disable"]
    # the two live 4 MiB tensors (kept and its copy) stay mapped, nothing else
    assert out["mapped_off"] == 8 * MIB and out["cached_off"] == 0
    assert out["fresh_not_cached"]
    assert out["mapped_after_free"] == 4 * MIB  # kept freed after disable: unmapped


def test_training_with_the_cache_is_bit_identical_to_training_without():
    with_cache, without = _child(TRAIN, "1"), _child(TRAIN, "0")
    assert with_cache["hits"] > 0 and without["hits"] == 0
    assert with_cache["bits"] == without["bits"]
    assert with_cache["sums"] == without["sums"]

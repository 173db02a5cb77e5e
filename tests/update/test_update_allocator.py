"""The policy update maps its large blocks (rlvr.models.allocator.mapped_large_blocks): inside
it a 4 MiB tensor is a block of the caching allocator (rlvr.kernels.block_cache), or with the
native code off its own glibc mapping (freed back to the OS), so resident memory follows the
live tensors; after it the rollout engine's keep-freed-memory setting is back (the same
tensor from the heap). Runs in a fresh process: the settings are process-wide. Importing rlvr
before torch asks torch for huge-page-backed large tensors (THP_MEM_ALLOC_ENABLE), keeping a
value already set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import ctypes, json
import torch
from rlvr.algo.loss_agg import BatchCounts
from rlvr.kernels import block_cache
from rlvr.models.allocator import keep_freed_memory
from rlvr.models.forward import build_sequences
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update


class Info(ctypes.Structure):  # glibc's struct mallinfo2 (malloc.h)
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost").split()]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info


def mapped_bytes_of_a_4mib_tensor():
    # hblkhd: bytes in blocks that glibc mapped on their own (not in the heap); live: bytes
    # of the caching allocator's blocks in use
    before, cached = libc.mallinfo2().hblkhd, block_cache.stats().live
    t = torch.empty(1 << 20)  # 4 MiB of fp32: over the update's 2 MiB threshold
    grown = [libc.mallinfo2().hblkhd - before, block_cache.stats().live - cached]
    del t
    return grown


seen = {"engine": None, "update": []}
keep_freed_memory()  # as the torch rollout engine does when it is built
seen["engine"] = mapped_bytes_of_a_4mib_tensor()
torch.manual_seed(0)
model = tiny_model(tiny_tokenizer())
model.model.layers[0].register_forward_hook(
    lambda *_: seen["update"].append(mapped_bytes_of_a_4mib_tensor()))
config = RunConfig.model_validate({"model": {"name": "tiny-random", "precision": "fp32"}})
ids = torch.randint(40, 90, (2, 4))
seqs = build_sequences([[11, 12, 13]] * 2, ids, torch.ones(2, 4, dtype=torch.bool), 0)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
policy_update(LocalBackend(model), optimizer, seqs, torch.tensor([1.0, -1.0]), None, config,
              BatchCounts(2, 8), bf16=False)
seen["after"] = mapped_bytes_of_a_4mib_tensor()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("native", ["1", "0"])
def test_update_maps_large_blocks_and_puts_the_engine_setting_back(native):
    if native == "1" and shutil.which("c++") is None:
        pytest.skip("no C++ compiler: the caching allocator cannot be built")
    if not Path("/proc/self/maps").exists() or "glibc" not in " ".join(
            __import__("platform").libc_ver()):
        pytest.skip("needs Linux with glibc (mallopt / mallinfo2)")
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
           "RLVR_NATIVE_KERNELS": native, "HOME": os.environ.get("HOME", "/tmp")}
    if "RLVR_KERNEL_CACHE" in os.environ:
        env["RLVR_KERNEL_CACHE"] = os.environ["RLVR_KERNEL_CACHE"]
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    mib = 1 << 20
    # the engine's setting: blocks under 32 MiB from the heap, none mapped
    assert seen["engine"] == [0, 0]
    assert seen["update"], "the update ran no forward through layer 0"
    for glibc, cache in seen["update"]:  # inside the update (each layer-0 forward)
        if native == "1":  # a 4 MiB block of the caching allocator, none from glibc
            assert (glibc, cache) == (0, 4 * mib), seen["update"]
        else:  # its own glibc mapping: 4 MiB of data plus a chunk header, in 4 KiB pages
            assert 4 * mib <= glibc <= 4 * mib + 4096 and cache == 0, seen["update"]
    # after: the engine's setting again
    assert seen["after"] == [0, 0]


def _thp_setting(code: str, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(("code", "given", "expected"), [
    ("import rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", None, "1"),
    ("import rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", "0", "0"),
    # torch imported first has already read its setting: rlvr leaves the environment alone
    ("import torch, rlvr, os; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))", None, "None"),
])
def test_importing_rlvr_first_asks_torch_for_huge_pages(code, given, expected):
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if given is not None:
        env["THP_MEM_ALLOC_ENABLE"] = given
    assert _thp_setting(code, env) == expected

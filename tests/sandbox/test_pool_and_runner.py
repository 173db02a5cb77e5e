"""Runner and pool behaviour: tiers, cleanup, concurrency bound, worker processes."""

from __future__ import annotations

import ast
import importlib.util
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from sandbox_test_helpers import assert_no_leftovers

from rlvr.sandbox import (
    SandboxJob,
    SandboxLimits,
    SandboxPool,
    SandboxStatus,
    SlotLimiter,
    Tier,
    environment,
    run_job,
    tiers,
)

JOB = SandboxJob(program="def add(a, b):\n    return a + b\nprint('hello')\n", entry_point="add",
                 probes=("add(1, 2)", "add((1,), (2,))", "add('a', 1)"))


def _check(r):
    assert r.status is SandboxStatus.ok, r.detail
    assert [p.value for p in r.probes[:2]] == [3, (1, 2)]
    assert not r.probes[2].ok and r.probes[2].error == "TypeError"
    assert r.output == "hello\n"


def test_stage_holds_every_driver_module_precompiled():
    # The sandbox runs driver.py from a staged copy: every sibling module it imports (directly
    # or through another staged module, also inside functions) must be staged, byte for byte,
    # and precompiled (the stage is read-only to the sandbox); nothing else is staged.
    here = Path(tiers.__file__).parent
    # (a staged file named like a stdlib module would shadow it: the package's types.py is not one)
    siblings = {p.stem for p in here.glob("*.py")} - sys.stdlib_module_names
    reached, todo = set(), ["driver.py"]
    while todo:
        name = todo.pop()
        reached.add(name)
        for node in ast.walk(ast.parse((here / name).read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            else:
                continue
            todo += [m + ".py" for m in mods if m in siblings and m + ".py" not in reached]
    assert reached == set(tiers._DRIVER_FILES)
    assert not {name[:-3] for name in reached} & sys.stdlib_module_names
    assert {"procs.py", "candidate.py", "checks.py", "remote_client.py"} <= reached
    stage = Path(tiers._stage_driver())
    for name in reached:
        assert (stage / name).read_bytes() == (here / name).read_bytes(), name
        if name != "driver.py":  # run as a script, never from a cache
            assert os.path.exists(importlib.util.cache_from_source(str(stage / name))), name


def test_run_job_default_tier():
    r = run_job(JOB)
    _check(r)
    assert r.tier is environment().tier
    assert_no_leftovers()


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="the fallback tier test expects root (drops to 65534)")
def test_run_job_fallback_tier():
    r = run_job(JOB, tier=Tier.rlimit)
    _check(r)
    assert r.tier is Tier.rlimit


def test_program_sees_empty_environment_and_extra_env(monkeypatch):
    monkeypatch.setenv("RLVR_TEST_SECRET", "s3cr3t")
    job = SandboxJob(program="import os\nprint(sorted(os.environ))\nprint(os.environ.get('X'))",
                     env={"X": "42"})
    r = run_job(job)
    assert r.status is SandboxStatus.ok
    assert "RLVR_TEST_SECRET" not in r.output and "42" in r.output


def test_output_cap_and_wall_backstop():
    r = run_job(SandboxJob(program="while True: print('x' * 1000)"))
    assert r.status is SandboxStatus.output_limit and len(r.output) <= JOB.limits.max_output_bytes
    # In-process timers switched off: the parent's wall backstop still ends the run.
    t0 = time.monotonic()
    r = run_job(SandboxJob(program="import signal, time\n"
                                   "signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                   "signal.setitimer(signal.ITIMER_REAL, 0)\ntime.sleep(60)",
                           limits=SandboxLimits(timeout_s=1.0, wall_timeout_s=2.0)))
    assert r.status is SandboxStatus.timeout and "wall backstop" in r.detail, r.detail
    assert time.monotonic() - t0 < 30  # the 60 s sleep was cut (generous margin for load)


def test_rlimit_cpu_is_the_hard_per_process_kill():
    # A per-process RLIMIT_CPU below the run's budget: the kernel kills the program first.
    r = run_job(SandboxJob(program="while True: pass", limits=SandboxLimits(timeout_s=30, cpu_s=1)))
    assert r.status is SandboxStatus.timeout and "RLIMIT_CPU (1 s)" in r.detail, r.detail
    assert r.wall_s < 60  # neither the 30 s budget nor the 120 s backstop decided


def test_daemon_is_killed_after_the_run():
    prog = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        time.sleep(60)\n    os._exit(0)\n")
    r = run_job(SandboxJob(program=prog))
    assert r.status is SandboxStatus.ok
    assert_no_leftovers()


def test_slot_limiter_bounds_concurrency(tmp_path):
    lim = SlotLimiter(2, str(tmp_path))
    active, peak = [0], [0]
    lock = threading.Lock()

    def work():
        with lim.acquire():
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            with lock:
                active[0] -= 1

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert peak[0] == 2


def _hold_slot(directory, ready, release):
    lim = SlotLimiter(1, directory)
    with lim.acquire():
        ready.set()
        release.wait(10)


def test_slot_limiter_is_shared_across_processes(tmp_path):
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    p = ctx.Process(target=_hold_slot, args=(str(tmp_path), ready, release))
    p.start()
    assert ready.wait(10)
    got = []
    t = threading.Thread(
        target=lambda: got.append(SlotLimiter(1, str(tmp_path)).acquire().__enter__()))
    t.daemon = True
    t.start()
    t.join(0.3)
    assert got == []  # the other process holds the only slot
    release.set()
    t.join(5)
    p.join(5)
    assert got == [0]


def _verify_in_child(q):
    from rlvr.rewards.code import verify_code

    ref = {"entry_point": "add", "tests": ["assert add(1, 2) == 3"]}
    q.put(verify_code("```python\ndef add(a, b):\n    return a + b\n```", ref).outcome)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_verifier_from_worker_processes(method):
    from rlvr.rewards.code import verify_code

    # Warm the default pool in this process first: a forked child must not reuse its sandboxes.
    verify_code("```python\ndef add(a, b):\n    return a + b\n```",
                {"entry_point": "add", "tests": ["assert add(1, 2) == 3"]})
    ctx = mp.get_context(method)
    q = ctx.Queue()
    procs = [ctx.Process(target=_verify_in_child, args=(q,)) for _ in range(2)]
    for p in procs:
        p.start()
    outs = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
    assert outs == [1.0, 1.0]


def test_pool_map_and_prestart_cleanup():
    jobs = [SandboxJob(program=f"def f():\n    return {i}\n", entry_point="f", probes=("f()",))
            for i in range(6)]
    with SandboxPool(workers=2) as pool:
        rs = pool.map(jobs)
    assert [r.probes[0].value for r in rs] == list(range(6))
    assert_no_leftovers()


def test_close_waits_for_a_sandbox_being_prestarted(monkeypatch):
    """close() returns only once a sandbox the prestart thread was launching at that moment is
    discarded (a race that left an idle sandbox alive just after close)."""
    import rlvr.sandbox.pool as pool_mod

    launching, discarded = threading.Event(), []

    class Fake:
        key = None

        def discard(self):
            discarded.append(self)

    def slow_launch(job, tier=None):
        launching.set()
        time.sleep(0.3)
        return Fake()

    monkeypatch.setattr(pool_mod, "launch", slow_launch)
    pool = SandboxPool(workers=1)
    pool._refill(JOB)
    assert launching.wait(5)
    pool.close()
    assert len(discarded) == 1

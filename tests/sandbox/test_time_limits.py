"""Time limits: the CPU-time budget decides, the wall clock is only a loose backstop.

A run is a timeout when its CPU time (all processes and threads together) exceeds the budget,
when one process reaches RLIMIT_CPU, or when it outlives the wall backstop (sleepers, blocked
programs). A correct program whose wall time is stretched (load, being stopped) is still
correct. The CPU accounting is exercised through each source the machine supports.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from sandbox_test_helpers import assert_no_leftovers, shared_path

from rlvr.rewards.code import grade_code
from rlvr.rewards.types import Status
from rlvr.sandbox import (
    DEFAULT_CPU_BUDGET_S,
    SandboxJob,
    SandboxLimits,
    SandboxPool,
    SandboxStatus,
    cgroups,
    environment,
    run_job,
    tiers,
    usable_cores,
)
from rlvr.sandbox.classify import classify as _classify
from rlvr.sandbox.cputime import CpuMeter, process_cpu_seconds, process_tree
from rlvr.sandbox.supervise import Run as _Run

ADD_TESTS = {"entry_point": "add", "tests": ["assert add(1, 2) == 3", "assert add(-5, 5) == 0"]}

# Burns CPU until this process (or thread) has used `s` CPU seconds of its own: the work is
# fixed in CPU time, whatever the machine's speed or load.
BURN = (
    "import time\n"
    "def burn(s, clock=time.process_time):\n"
    "    t0 = clock()\n"
    "    while clock() - t0 < s:\n"
    "        pass\n"
)


@pytest.fixture(params=["cgroup", "proc-with-cgroups", "proc-without-cgroups"])
def accounting(request, monkeypatch):
    """Each way a run's CPU time can be measured here; yields the meter's source name."""
    env = environment()
    if request.param == "cgroup":
        if not (env.cgroups and cgroups.cpu_accounting_available()):
            pytest.skip("no writable cpuacct cgroups here")
        yield "cgroup"
    elif request.param == "proc-with-cgroups":
        if not env.cgroups:
            pytest.skip("no writable cgroups here (proc-without-cgroups covers /proc)")
        monkeypatch.setattr(cgroups, "OPTIONAL_CONTROLLERS", ())  # runs get no cpuacct group
        yield "proc"
    else:
        monkeypatch.setattr(tiers, "_env", dataclasses.replace(env, cgroups=False))
        yield "proc"
    assert_no_leftovers()


# ----------------------------------------------------------------------------- CPU budget


def test_cpu_burner_is_a_timeout_by_cpu_budget(accounting):
    r = run_job(SandboxJob(program="while True: pass",
                           limits=SandboxLimits(timeout_s=1.0, wall_timeout_s=120.0)))
    assert r.status is SandboxStatus.timeout
    assert "CPU budget exceeded" in r.detail and f"{accounting} accounting" in r.detail, r.detail
    assert r.cpu_s > 1.0
    assert r.to_dict()["cpu_s"] == round(r.cpu_s, 4)


MULTI_PROCESS = BURN + (
    "import os\n"
    "pids = []\n"
    "for _ in range(4):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        burn(0.4)\n"
    "        os._exit(0)\n"
    "    pids.append(pid)\n"
    "for pid in pids:\n"
    "    os.waitpid(pid, 0)\n"
    "def add(a, b):\n"
    "    return a + b\n"
)


def test_multi_process_cpu_is_summed(accounting):
    # Four processes of 0.4 CPU s each: every one is far below its RLIMIT_CPU and below the
    # budget, only their sum (1.6 s) exceeds the 1 s budget.
    r = run_job(SandboxJob(program=MULTI_PROCESS,
                           limits=SandboxLimits(timeout_s=1.0, cpu_s=30, wall_timeout_s=120.0)))
    assert r.status is SandboxStatus.timeout
    assert "CPU budget exceeded" in r.detail and f"{accounting} accounting" in r.detail, r.detail
    assert r.cpu_s > 1.0


def test_cpu_of_children_zombies_and_threads_is_reported(accounting):
    # 2 reaped children, 2 children left as zombies (their CPU is in no parent's cutime yet)
    # and 2 threads, 0.2 CPU s each: the run reports at least their 1.2 s.
    prog = BURN + (
        "import os, threading\n"
        "r, w = os.pipe()\n"
        "kids = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        burn(0.2)\n"
        "        os.write(w, b'x')\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids[:2]:\n"
        "    os.waitpid(pid, 0)\n"
        "got = b''\n"
        "while len(got) < 4:\n"
        "    got += os.read(r, 4)\n"
        "ts = [threading.Thread(target=burn, args=(0.2, time.thread_time)) for _ in range(2)]\n"
        "for t in ts:\n"
        "    t.start()\n"
        "for t in ts:\n"
        "    t.join()\n"
        "time.sleep(0.1)  # the zombies have surely exited: their pipe write was their last act\n"
        "def add(a, b):\n"
        "    return a + b\n"
    )
    job = SandboxJob(program=prog, entry_point="add", probes=("add(1, 2)",),
                     limits=SandboxLimits(timeout_s=10.0, wall_timeout_s=120.0))
    r = run_job(job)
    assert r.status is SandboxStatus.ok, r.detail
    assert r.probes[0].value == 3
    assert r.cpu_s >= 1.2 - 0.05, r.cpu_s  # 0.05: 10 ms /proc ticks, rounded per process


@pytest.mark.parametrize("host_reading, reported, status", [
    (1.2, None, SandboxStatus.timeout),  # the host's final reading is over the budget
    (0.9, 1.2, SandboxStatus.timeout),  # the supervisor's count is (the host missed some)
    (0.8, 0.8, SandboxStatus.ok),
])
def test_finishing_over_the_budget_between_polls_is_a_timeout(host_reading, reported, status):
    # A run that completes with more CPU than its budget before a poll caught it: the verdict
    # follows the CPU time used, not whether a poll happened to see it.
    job = SandboxJob(program="", limits=SandboxLimits(timeout_s=1.0))

    class Meter:
        source = "test"

        def read(self):
            return host_reading

    run = _Run()
    run.ready_at, run.cpu_base = time.monotonic(), 0.0
    run.record = {"phase": "done", "probes": [], "checks": [], "fds_ok": True, "cpu": reported}
    run.stop_clock(Meter())
    got, detail, _ = _classify(run, False, job, Meter())
    assert got is status, detail
    if status is SandboxStatus.timeout:
        assert "CPU budget exceeded" in detail and "ended after" in detail, detail


# --------------------------------------------------------------------------- wall backstop

SLEEPERS = {
    "sleep": "import time\ntime.sleep(1000)\n",
    "blocked_on_pipe": "import os\nr, w = os.pipe()\nos.read(r, 1)\n",
    "waits_for_sleeping_child": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(1000)\nos.wait()\n"
    ),
}


@pytest.mark.parametrize("name", list(SLEEPERS))
def test_sleeper_is_a_timeout_by_wall_backstop(name):
    t0 = time.monotonic()
    lim = SandboxLimits(timeout_s=1.0, wall_timeout_s=2.0)
    r = run_job(SandboxJob(program=SLEEPERS[name], limits=lim))
    assert r.status is SandboxStatus.timeout
    assert "wall backstop" in r.detail and "2 s" in r.detail, r.detail
    assert r.cpu_s < 1.0
    assert 2.0 <= r.wall_s and time.monotonic() - t0 < 60  # enforced (generous margin for load)
    assert_no_leftovers()


def test_default_wall_backstop_stops_a_sleeper():
    # timeout_s=0.5: the default backstop is max(2 x 0.5, 0.5 + 2) = 2.5 s.
    lim = SandboxLimits(timeout_s=0.5)
    assert lim.wall_limit_s() == 2.5
    r = run_job(SandboxJob(program=SLEEPERS["sleep"], limits=lim))
    assert r.status is SandboxStatus.timeout and "2.5 s" in r.detail, r.detail
    assert 2.5 <= r.wall_s < 60


def test_code_verifier_options_set_the_wall_backstop():
    # a program that sleeps with a 0.5 s CPU budget: the backstop is wall_factor x budget
    # (here 3 x 0.5 = 1.5 s, above the 0.5 + 2 s slack only when set: wall_timeout_s decides)
    sleeper = "import time\ntime.sleep(30)\ndef add(a, b):\n    return a + b\n"
    g = grade_code(sleeper, ADD_TESTS, timeout_s=0.5, wall_timeout_s=1.5)
    assert g.verdict.status is Status.timeout
    assert "1.5 s backstop" in g.grade.run.detail, g.grade.run.detail
    assert 1.5 <= g.grade.run.wall_s < 30
    g = grade_code(sleeper, ADD_TESTS, timeout_s=2.0, wall_factor=1.5, wall_timeout_s=None)
    assert "4 s backstop" in g.grade.run.detail, g.grade.run.detail  # max(1.5 x 2, 2 + 2)


# ----------------------------------------------------- wall time no longer decides


def test_correct_program_slower_than_its_budget_in_wall_time_is_correct():
    # 2.5 s of wall time (sleeping) against a 1 s CPU budget, inside a backstop of
    # max(4 x 1, 1 + 2) = 4 s: wall time alone does not make it a timeout.
    prog = BURN + "burn(0.1)\ntime.sleep(2.5)\ndef add(a, b):\n    return a + b\n"
    g = grade_code(prog, ADD_TESTS, limits=SandboxLimits(timeout_s=1.0, wall_factor=4.0))
    assert g.verdict.status is Status.correct, g.verdict.detail
    assert g.grade.run.wall_s > 2.5 > 1.0 > g.grade.run.cpu_s


def _is_driver(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"driver.py" in f.read()
    except OSError:
        return False


def _freeze_candidate(stopped: list, seconds: float, done: threading.Event) -> None:
    """Find the run's busy process (the program, spinning: a sandbox process below this test
    process) and SIGSTOP it for ``seconds``: it gets no CPU meanwhile, as on an overloaded
    machine."""
    me = os.getpid()
    while not done.is_set():
        for pid in process_tree(me) - {me}:
            # The supervisor's own start-up CPU is below the threshold; idle sandboxes use none.
            if process_cpu_seconds(pid) >= 0.15 and _is_driver(pid):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
                time.sleep(seconds)
                os.kill(pid, signal.SIGCONT)
                return
        time.sleep(0.01)


def test_correct_program_stopped_by_load_is_correct(accounting):
    # The program needs 0.6 CPU s; it is frozen for 3 s halfway, so its wall time is far over
    # the 1 s CPU budget, and the verdict must not change.
    prog = BURN + "burn(0.6)\ndef add(a, b):\n    return a + b\n"
    stopped, done = [], threading.Event()
    t = threading.Thread(target=_freeze_candidate, args=(stopped, 3.0, done))
    t.start()
    try:
        with SandboxPool(workers=1, prestart=False) as pool:
            lim = SandboxLimits(timeout_s=1.0, wall_timeout_s=60.0)
            g = grade_code(prog, ADD_TESTS, limits=lim, pool=pool)
    finally:
        done.set()
        t.join()
    assert stopped, "the program was never stopped: the test proved nothing"
    assert g.verdict.status is Status.correct, g.verdict.detail
    assert g.grade.run.wall_s > 3.0 and g.grade.run.cpu_s < 1.0


# --------------------------------------------------------------------------- limits and meter


def test_limits_defaults_and_overrides():
    lim = SandboxLimits()
    assert lim.timeout_s == DEFAULT_CPU_BUDGET_S
    # a program that sleeps holds its sandbox at most twice its CPU budget (24 s, not 48 s)
    assert lim.wall_limit_s() == 2 * DEFAULT_CPU_BUDGET_S == 24.0
    assert lim.rlimit_cpu_s() == int(DEFAULT_CPU_BUDGET_S) + 1
    assert SandboxLimits(timeout_s=1.0).wall_limit_s() == 3.0  # the slack decides for small budgets
    assert SandboxLimits(timeout_s=1.0, wall_timeout_s=2.5).wall_limit_s() == 2.5
    assert SandboxLimits(timeout_s=3, wall_factor=2, wall_slack_s=0).wall_limit_s() == 6
    assert SandboxLimits(timeout_s=2.5).rlimit_cpu_s() == 4
    assert SandboxLimits(cpu_s=0.2).rlimit_cpu_s() == 1


def test_cpu_meter_counts_a_process_tree():
    # Parent: one child reaped (its CPU moves to the parent's cutime), one left a zombie.
    script = BURN + (
        "import os, sys\n"
        "a = os.fork()\n"
        "if a == 0:\n"
        "    burn(0.3)\n"
        "    os._exit(0)\n"
        "os.waitpid(a, 0)\n"
        "r, w = os.pipe()\n"
        "b = os.fork()\n"
        "if b == 0:\n"
        "    burn(0.3)\n"
        "    os.write(w, b'x')\n"
        "    os._exit(0)\n"
        "os.read(r, 1)\n"
        "print('ready', b, flush=True)\n"
        "sys.stdin.read()\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        line = p.stdout.readline().split()
        assert line[0] == b"ready"
        zombie = int(line[1])
        assert zombie in process_tree(p.pid)
        meter = CpuMeter(p.pid)
        assert meter.source == "proc"
        # 0.05: /proc counts user and system time apart, each in whole 10 ms ticks.
        assert meter.read() >= 0.6 - 0.05
    finally:
        p.stdin.close()
        p.wait(10)
    assert process_cpu_seconds(p.pid) == 0.0  # gone


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_slowest_references_pass_on_a_loaded_machine():
    """MBPP/123 (the slowest reference solution, ~1.7 CPU s here; see DEFAULT_CPU_BUDGET_S)
    and HumanEval/75 are graded correct with the default limits while a busy loop runs on
    every core: load stretches their wall time, not their CPU time. (Slow: it loads every
    core, which would disturb tests running alongside.)"""
    from test_datasets import mbpp_reference

    mbpp = shared_path("data", "mbpp", "mbpp.jsonl")
    he = shared_path("data", "humaneval", "HumanEval.jsonl")
    if not (mbpp.exists() and he.exists()):
        pytest.skip("shared data absent")
    m = next(r for r in _records(mbpp) if r["task_id"] == 123)
    h = next(p for p in _records(he) if p["task_id"] == "HumanEval/75")
    h_ref = {"entry_point": h["entry_point"], "test": h["test"], "prompt": h["prompt"]}
    loops = [subprocess.Popen([sys.executable, "-c", "while 1: pass"])
             for _ in range(usable_cores())]
    try:
        for _ in range(2):
            g = grade_code("```python\n" + m["code"] + "\n```", mbpp_reference(m))
            assert g.verdict.status is Status.correct, g.verdict.detail
            run = g.grade.run
            print(f"MBPP/123 under load: {run.cpu_s:.2f} CPU s, {run.wall_s:.2f} wall s")
            g = grade_code(h["canonical_solution"], h_ref)
            assert g.verdict.status is Status.correct, g.verdict.detail
    finally:
        for p in loops:
            p.kill()
            p.wait()

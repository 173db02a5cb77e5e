"""The 28 adversarial programs of ../shared/cases/sandbox_adversarial.jsonl, through the API.

For every case: the outcome equals ``expected_reward`` (where not null), this process is alive,
no process of the run is left, the planted host files were neither changed nor read, the host
secret appears in no output, and the loopback listener we open was never reached.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest
from sandbox_test_helpers import assert_no_leftovers, leftover_processes, shared_path

from rlvr.rewards.code import grade_code
from rlvr.sandbox import SandboxLimits, SandboxPool, Tier, bwrap_available, environment

CASES_FILE = shared_path("cases", "sandbox_adversarial.jsonl")
PROBE_DIR = "/tmp/rlvr-host-probe"
SECRET_NAME = "RLVR_HOST_SECRET_TOKEN"
SECRET = "hunter2-host-secret-0f3a9c"
# 3 CPU seconds for the CPU burners (SB-01, SB-18, SB-21); the wall backstop is set below its
# default (max(4 x 3, 3 + 5) = 12 s) only to keep the sleeper (SB-02) short.
CASE_LIMITS = SandboxLimits(timeout_s=3.0, wall_timeout_s=6.0)
# Cases whose containment relies on namespaces (only the bwrap tier provides them).
NEEDS_BWRAP = {
    "SB-08": "reads host files such as /etc/passwd: only a mount namespace hides them",
    "SB-10": "connects to a host loopback listener: only a network namespace blocks it",
    "SB-11": "kill(-1) reaches every process of the sandbox uid: only a pid namespace contains it",
}


def _load_cases():
    if not CASES_FILE.exists():
        return []
    return [json.loads(line) for line in CASES_FILE.read_text().splitlines() if line.strip()]


CASES = _load_cases()
pytestmark = pytest.mark.skipif(not CASES, reason=f"{CASES_FILE} not found (shared data absent)")


@pytest.fixture(scope="module")
def host_probe():
    """Sentinel files (atime older than mtime, so any read under relatime updates atime)."""
    os.makedirs(PROBE_DIR, mode=0o700, exist_ok=True)
    files = {
        os.path.join(PROBE_DIR, "SENTINEL"): b"sentinel: must not change\n",
        os.path.join(PROBE_DIR, "expected.json"): b'{"expected": [3, 0, 30]}\n',
    }
    for path, data in files.items():
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o600)
        now = time.time()
        os.utime(path, (now - 3600, now))
    return {p: (d, os.stat(p)) for p, d in files.items()}


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


def _check_host(host_probe, listener, outputs: list[str]) -> None:
    for path, (data, st) in host_probe.items():
        now = os.stat(path)  # before our own read, which bumps atime
        assert now.st_mtime_ns == st.st_mtime_ns, f"{path} was modified"
        assert now.st_atime_ns == st.st_atime_ns, f"{path} was read"
        with open(path, "rb") as f:
            assert f.read() == data, f"{path} was changed"
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # re-arm the trap
    assert sorted(os.listdir(PROBE_DIR)) == sorted(os.path.basename(p) for p in host_probe)
    for path in ("/usr/bin/evil", "/etc/evil", "/root/evil", "/evil"):
        assert not os.path.exists(path), f"{path} was created"
    for text in outputs:
        assert SECRET not in text
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected


def _run_case(case, pool, listener, monkeypatch):
    monkeypatch.setenv(SECRET_NAME, SECRET)
    port = str(listener.getsockname()[1])
    return grade_code(case["completion"], case["reference"], limits=CASE_LIMITS, pool=pool,
                      env={"PROBE_PORT": port})


@pytest.mark.parametrize("case", CASES, ids=[c["id"] + "-" + c["name"] for c in CASES])
def test_adversarial_case(case, host_probe, listener, monkeypatch):
    ok, why = bwrap_available()
    if case["id"] in NEEDS_BWRAP and not ok:
        pytest.skip(f"needs bwrap ({NEEDS_BWRAP[case['id']]}); unavailable: {why}")
    with SandboxPool(workers=1) as pool:  # closing it also kills its pre-started sandbox
        g = _run_case(case, pool, listener, monkeypatch)
    v = g.verdict
    if case["expected_reward"] is not None:
        assert v.outcome == case["expected_reward"], v.detail
    assert os.getpid() > 0 and os.kill(os.getpid(), 0) is None  # still alive
    assert_no_leftovers()
    outputs = [v.detail, g.grade.run.output if g.grade else ""]
    _check_host(host_probe, listener, outputs)
    if g.grade is not None:
        assert g.grade.run.tier is environment().tier


# The fallback tier on the cases it can contain (run as uid 65534 + rlimits + cgroups).
# SB-22 is left out: it opens /work/prog.py, a path only the bwrap layout has.
FALLBACK_IDS = ["SB-00", "SB-02", "SB-03", "SB-04", "SB-06", "SB-07", "SB-12", "SB-13", "SB-14",
                "SB-15", "SB-17", "SB-26", "SB-27"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback tier drops to uid 65534 only as root")
@pytest.mark.parametrize("case", [c for c in CASES if c["id"] in FALLBACK_IDS],
                         ids=[c["id"] for c in CASES if c["id"] in FALLBACK_IDS])
def test_adversarial_fallback_tier(case, host_probe, listener, monkeypatch):
    with SandboxPool(workers=1, tier=Tier.rlimit) as pool:
        g = _run_case(case, pool, listener, monkeypatch)
    if case["expected_reward"] is not None:
        assert g.verdict.outcome == case["expected_reward"], g.verdict.detail
    assert g.grade is not None and g.grade.run.tier is Tier.rlimit
    assert_no_leftovers()
    _check_host(host_probe, listener, [g.verdict.detail, g.grade.run.output])


# A second set of the same kinds and beyond (SBX-): escapes (host sysctls), crashes of the
# host-side grader, checks fooled by shadowed builtins, correct programs scored 0, a host-side
# decode made quadratic; the K9 cases (SBX-K9-NN): correct programs that need callbacks, remote
# handles or in-place write-back, and programs attacking those (lying operators, forged protocol
# messages); the check-namespace cases (SBX-NS-NN): programs that replace what a check reads
# (a fake math in sys.modules, patched builtins, names rebound by trace / profile hooks or by
# walking gc objects and frames, setup-defined expected values) and correct programs whose
# checks read standard-library modules or setup values built with the program's classes.
# ``expected_status_not``: a status the verdict must not have (an infrastructure ``error`` is left
# out of GRPO's groups, so a program must not be able to force one); ``max_grade_seconds``: a bound
# on the host's grading time, with a wide margin over the case's 3 s CPU / 6 s wall limits.
BREAK_FILE = Path(__file__).with_name("data") / "sandbox_break.jsonl"
BREAK_CASES = [json.loads(line) for line in BREAK_FILE.read_text().splitlines() if line.strip()]
# id -> kind of the failure still open (strict xfail, so a fix is noticed). Kinds whose failure
# costs a minute a case (K12) are not run while listed.
BREAK_KNOWN: dict[str, str] = {}
SLOW_WHILE_FAILING = {"K12"}


def _break_params():
    for case in BREAK_CASES:
        marks = ()
        if case["id"] in BREAK_KNOWN:
            kind = BREAK_KNOWN[case["id"]]
            marks = (pytest.mark.xfail(strict=True, run=kind not in SLOW_WHILE_FAILING,
                                       reason=f"kind {kind}: {case['note'][:120]}"),)
        yield pytest.param(case, id=f"{case['id']}-{case['name']}", marks=marks)


def _kill_own_leftovers() -> None:
    # Only processes in this test process's own run cgroups (never another process's sandbox).
    for pid in leftover_processes(f"{os.getpid()}-"):
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if f"/rlvr-sandbox/{os.getpid()}-" not in f.read():
                    continue
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.parametrize("case", list(_break_params()))
def test_break_case(case, host_probe, listener, monkeypatch, request):
    if case["id"] in BREAK_KNOWN:
        # A case still failing may leave processes behind (K2: SBX-04 sleeps 30 s): kill them,
        # so that they are not counted against the cases that run after it.
        request.addfinalizer(_kill_own_leftovers)
    start = time.monotonic()
    with SandboxPool(workers=1) as pool:
        g = _run_case(case, pool, listener, monkeypatch)
    graded_s = time.monotonic() - start
    v = g.verdict
    if case["expected_reward"] is not None:
        assert v.outcome == case["expected_reward"], v.detail
    if case.get("expected_status_not"):
        assert v.status.value != case["expected_status_not"], v.detail
    if case.get("max_grade_seconds"):
        assert graded_s <= case["max_grade_seconds"], f"graded in {graded_s:.0f} s"
    assert_no_leftovers()
    _check_host(host_probe, listener, [v.detail, g.grade.run.output if g.grade else ""])

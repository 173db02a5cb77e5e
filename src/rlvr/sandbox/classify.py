"""Classifying a supervised run: what happened (the supervisor's record, the limits hit, an OOM
kill) mapped to a :class:`~rlvr.sandbox.types.SandboxStatus` and a short detail.
"""

from __future__ import annotations

import json
import signal

from rlvr.sandbox import codec
from rlvr.sandbox.cputime import CpuMeter
from rlvr.sandbox.supervise import Run
from rlvr.sandbox.types import CheckOutcome, ProbeOutcome, SandboxJob, SandboxStatus


def _probe_outcomes(raw) -> tuple[ProbeOutcome, ...]:
    # Probe values are the program's data: every failure to read one (json.dumps can hit
    # RecursionError on a deep value; decode raises ValueError) fails that probe, never the host.
    out = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and "v" in item:
            try:
                out.append(ProbeOutcome(True, codec.decode(json.dumps(item["v"]))))
            except Exception as e:
                out.append(ProbeOutcome(False, error=f"undecodable: {type(e).__name__}"))
        elif isinstance(item, dict):
            e = item.get("e", "error")
            out.append(ProbeOutcome(False, error=e[:100] if isinstance(e, str) else "malformed"))
        else:
            out.append(ProbeOutcome(False, error="malformed"))
    return tuple(out)


def classify(
    run: Run, oom: bool, job: SandboxJob, meter: CpuMeter
) -> tuple[SandboxStatus, str, dict]:
    """Map what happened to a status and a short detail. Returns (status, detail, fields).

    Never raises: the record carries pieces the program shaped (probe values, error names),
    so a record that cannot be read is the program's failure (``runtime_error``).
    """
    try:
        return _classify(run, oom, job, meter)
    except Exception as e:
        return SandboxStatus.runtime_error, f"malformed result record: {type(e).__name__}", {}


def _classify(
    run: Run, oom: bool, job: SandboxJob, meter: CpuMeter
) -> tuple[SandboxStatus, str, dict]:
    S = SandboxStatus
    rec = run.record
    lim = job.limits
    if run.output_over:
        return S.output_limit, "output cap exceeded", {}
    if run.cpu_used > lim.timeout_s:
        # Killed by the parent, or ended (finished, crashed, hit RLIMIT_CPU) after spending more
        # than the budget: either way the CPU time decides, not when the last poll happened.
        how = "killed" if run.timed_out == "cpu" else "ended"
        return S.timeout, (
            f"CPU budget exceeded: {run.cpu_used:.2f} s CPU > {lim.timeout_s:g} s budget "
            f"({how} after {run.program_wall_s:.2f} s wall; {meter.source} accounting)"
        ), {}
    if rec is not None:
        phase = rec.get("phase")
        exit_info = rec.get("exit") or {}
        code = exit_info.get("code", -(exit_info.get("signal") or 0)) if exit_info else None
        fields = {"exit_code": code}
        if phase == "done":
            checks = tuple(
                CheckOutcome(bool(c.get("ok")), str(c.get("error", c.get("err", "")))[:300])
                for c in rec.get("checks", [])
                if isinstance(c, dict)
            )
            fields.update(probes=_probe_outcomes(rec.get("probes")), checks=checks)
            if oom and any(c.error == "CandidateGone" for c in checks):
                return S.memory, "memory limit (OOM kill during tests)", fields
            if not rec.get("fds_ok", True):
                return S.runtime_error, "open-file limit exhausted", fields
            if not all(c.ok for c in checks):
                return S.wrong_answer, "in-sandbox check failed", fields
            return S.ok, "ran to completion", fields
        if phase in ("program_error", "setup_error"):
            err = rec.get("error") or {}
            etype = str(err.get("type", "?"))[:60]
            if etype == "MemoryError":
                return S.memory, f"{phase}: MemoryError", fields
            return S.runtime_error, f"{phase}: {etype}", fields
        if phase == "program_exit":
            sig = exit_info.get("signal")
            if oom:
                return S.memory, "memory limit (OOM kill)", fields
            cpu = exit_info.get("cpu") or 0.0
            rlimit = lim.rlimit_cpu_s()
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= rlimit - 0.05):
                why = f"CPU time limit: the program process reached RLIMIT_CPU ({rlimit} s)"
                return S.timeout, why, fields
            why = f"program exited before the tests ({exit_info or rec.get('why')})"
            return S.runtime_error, why, fields
        err = rec.get("error") or {}
        why = f"driver error: {err.get('type')}: {err.get('msg')}"[:300]
        if rec.get("handed"):
            # The supervisor failed after the program started: the program can take the run's
            # memory (shared cgroup) or break the protocol in ways not foreseen; either way it
            # is no infrastructure failure the policy is not accountable for.
            if oom or err.get("type") == "MemoryError":
                return S.memory, why, fields
            return S.runtime_error, why, fields
        return S.sandbox_error, why, fields
    if run.timed_out == "startup":
        return S.sandbox_error, "sandbox did not start in time", {}
    if run.timed_out == "wall":
        return S.timeout, (
            f"wall backstop: {run.program_wall_s:.2f} s wall >= {lim.wall_limit_s():g} s backstop; "
            f"{run.cpu_used:.2f} s of the {lim.timeout_s:g} s CPU budget used"
        ), {}
    if oom:
        return S.memory, "memory limit (OOM kill)", {}
    if run.ready_at is not None:
        return S.runtime_error, "sandbox supervisor killed by the program", {}
    return S.sandbox_error, "sandbox failed to start", {}

"""Isolated execution of untrusted Python programs (see ``docs`` in the module docstrings).

Public API:

- :class:`SandboxJob`, :class:`SandboxLimits`, :class:`InSandboxCheck`: what to run, how limited
  (time is a CPU-time budget, ``DEFAULT_CPU_BUDGET_S``, with a loose wall-clock backstop).
- :func:`run_job`: run one job in a fresh sandbox (blocking, thread-safe).
- :class:`SandboxPool` / :func:`default_pool`: concurrent runs bounded to the usable cores,
  machine-wide (across threads and processes).
- :class:`SandboxResult`, :class:`SandboxStatus`, :class:`Tier`: machine-readable outcomes.
- :func:`environment`: the probed tier, interpreter and cgroup support.
"""

from rlvr.sandbox.pool import SandboxPool, SlotLimiter, default_pool, usable_cores
from rlvr.sandbox.runner import run_job
from rlvr.sandbox.tiers import SandboxEnvironment, bwrap_available, environment
from rlvr.sandbox.types import (
    DEFAULT_CPU_BUDGET_S,
    CheckOutcome,
    InSandboxCheck,
    ProbeOutcome,
    SandboxJob,
    SandboxLimits,
    SandboxResult,
    SandboxStatus,
    Tier,
)

__all__ = [
    "DEFAULT_CPU_BUDGET_S",
    "CheckOutcome",
    "InSandboxCheck",
    "ProbeOutcome",
    "SandboxEnvironment",
    "SandboxJob",
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "SandboxStatus",
    "SlotLimiter",
    "Tier",
    "bwrap_available",
    "default_pool",
    "environment",
    "run_job",
    "usable_cores",
]

"""The error a failed rollout worker raises (no torch, no Ray: the CLI imports it at start-up).
"""

from __future__ import annotations


class RolloutWorkerError(RuntimeError):
    """A rollout worker died, stopped answering (no heartbeat within the timeout) or failed a
    job. The message names the worker (its name and process id or Ray actor) and what it
    was doing.

    Attributes:
        worker: the worker's name.
    """

    def __init__(self, worker: str, message: str):
        super().__init__(message)
        self.worker = worker

"""A ``rlvr train`` run in a subprocess whose console (stderr) a thread reads as it comes:
the asynchronous-rollout tests start a run, find the rollout worker it names, and kill one or
the other."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the line a run prints when it starts its rollout worker (process or Ray actor)
WORKER = re.compile(r"rollout worker rlvr-rollout-0 \(pid (\d+)")


class Started:
    """A ``rlvr train`` subprocess (``args``, run in the repository root with ``env``) whose
    stderr is collected line by line in :attr:`lines`."""

    def __init__(self, args: list[str], env: dict):
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    def worker_pid(self, within: float = 300.0) -> int:
        """The pid of the rollout worker the run names when it starts it.

        Raises:
            AssertionError: none named within ``within`` seconds, or the run ended first.
        """
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            found = WORKER.search("".join(self.lines))
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("no rollout worker named:\n" + "".join(self.lines))

    def stderr(self) -> str:
        """The run's console so far (after its end: all of it)."""
        self.reader.join(timeout=10)
        return "".join(self.lines)

    def stop(self) -> None:
        """Kill the run if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

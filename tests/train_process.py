"""``rlvr train`` runs in a subprocess for the asynchronous-rollout tests (process workers and
Ray actors): the command and the cut-down smoke preset they share, the run's metrics rows, and
:class:`Started`, whose console (stderr) a thread reads as it comes, so a test can find the
rollout worker the run names and kill one or the other."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RLVR = [sys.executable, "-m", "rlvr.cli", "train"]
#: the smoke preset, cut to what these tests need: a short cold start, no pass@k
SMALL = ["--config", str(ROOT / "configs" / "smoke.yaml"), "--set", "sft.examples=64",
         "--set", "sft.epochs=1", "--set", "eval.pass_at_k_samples=0", "--set",
         "eval.every=0", "--set", "model.precision=fp32", "--set", "data.val_size=4"]
#: the line a run prints when it starts its rollout worker (process or Ray actor)
WORKER = re.compile(r"rollout worker rlvr-rollout-0 \(pid (\d+)")


def metrics_rows(run_dir: Path) -> list[dict]:
    """The run's ``metrics.jsonl`` rows so far ([] before the first)."""
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def process_gone(pid: int, within: float = 30.0) -> bool:
    """Whether process ``pid`` has ended within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def wait_rows(run_dir: Path, count: int, within: float = 300.0, detail=lambda: "") -> None:
    """Wait until the run has written ``count`` metrics rows.

    Raises:
        AssertionError: not within ``within`` seconds (with ``detail()`` as the message).
    """
    deadline = time.monotonic() + within
    while len(metrics_rows(run_dir)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(metrics_rows(run_dir)) >= count, detail()


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

    def kill_worker_after(self, run_dir: Path, rows: int, name_within: float = 300.0
                          ) -> tuple[int, int]:
        """Once the run has named its rollout worker and written ``rows`` metrics rows,
        SIGKILL the worker and wait for the run to end, at most 60 s (the bound its error
        must come within); the run is killed if it still runs after that.

        Returns:
            ``(worker pid, the run's exit code)``.
        """
        try:
            pid = self.worker_pid(within=name_within)
            wait_rows(run_dir, rows, detail=self.stderr)
            os.kill(pid, signal.SIGKILL)
            return pid, self.proc.wait(timeout=60)
        finally:
            self.stop()

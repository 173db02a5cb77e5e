"""Progress of long phases: plain lines with an ETA in a log (every 10% and after 30 s without
one), a rich bar on a terminal, nothing left over at the end."""

import io
import time

from rich.console import Console

from rlvr.progress import Phase, console_phases, format_seconds, step_eta


def _plain() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False), out


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_format_seconds():
    assert [format_seconds(s) for s in (0, 7.4, 59.6, 65, 3599, 7620)] == [
        "0 s", "7 s", "1m00s", "1m05s", "59m59s", "2h07m"]
    assert step_eta(2, 10, 30.0) == "ETA 2m00s"
    assert step_eta(0, 10, 0.0) == step_eta(10, 10, 50.0) == ""


def test_a_log_gets_a_line_every_tenth_with_the_eta_and_none_at_the_end():
    console, out = _plain()
    clock = Clock()
    with Phase("validation before_grpo", 200, console, unit="problems", clock=clock,
               every_seconds=0) as phase:
        for done in range(8, 201, 8):  # 25 batches of 8
            clock.now += 2.0
            phase.update(done)
    lines = out.getvalue().splitlines()
    assert lines[0] == "validation before_grpo: 24/200 problems (12%), 6 s elapsed, ETA 44 s"
    assert len(lines) == 9  # 10%, 20%, ..., 90% crossed once each; 100% is the caller's
    assert lines[-1].startswith("validation before_grpo: 184/200 problems (92%), 46 s elapsed")


def test_a_slow_phase_prints_a_line_after_every_seconds_without_one():
    console, out = _plain()
    with Phase("step 1/60", None, console, every_seconds=0.05) as phase:
        phase.status("rollout")
        time.sleep(0.18)
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 4
    assert all(line.startswith("step 1/60 (rollout): running, ") for line in lines)
    with Phase("sampling", 10, console, every_seconds=0.05) as phase:
        phase.update(10)  # done: the heartbeat says nothing more
        before = out.getvalue()
        time.sleep(0.12)
    assert out.getvalue() == before


def test_a_terminal_gets_a_transient_bar():
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    with console_phases(console)("validation trained", 4, unit="problems") as phase:
        assert phase.live
        for done in range(1, 5):
            phase.update(done)
    text = out.getvalue()
    assert "validation trained" in text and "4/4" in text and "ETA" in text

"""run_calls: a tool that raises, hangs, floods its output or misbehaves yields a bounded
observation, never an exception; each call's clock starts when it runs."""

import threading
import time

import pytest

from rlvr.tools import (
    Tool,
    ToolError,
    ToolLimits,
    ToolStatus,
    ToolTimeout,
    check_arguments,
    current_limits,
    run_calls,
)

RELEASE = threading.Event()  # hung tools wait on it; set when the module's tests end


@pytest.fixture(autouse=True, scope="module")
def _release_hung_threads():
    yield
    RELEASE.set()


def tool(fn, name="t", timeout_s=None):
    return Tool(name, fn, "test tool", None, timeout_s)


def hang(**_):
    RELEASE.wait(60)
    return "late"


def test_a_raising_tool_is_an_error_observation():
    def boom(x):
        raise ValueError("bad input " + x)

    [out] = run_calls([(tool(boom, "boom"), {"x": "7"})], ToolLimits())
    assert (out.name, out.status, out.text) == ("boom", ToolStatus.error,
                                                "Error: ValueError: bad input 7")


def test_tool_errors_are_shown_verbatim():
    def fail(**_):
        raise ToolError("Error: no such file")

    def stop(**_):
        raise ToolTimeout("stopped at its limit")

    a, b = run_calls([(tool(fail), {}), (tool(stop), {})], ToolLimits())
    assert (a.status, a.text) == (ToolStatus.error, "Error: no such file")
    assert (b.status, b.text) == (ToolStatus.timeout, "stopped at its limit")


def test_a_hanging_tool_times_out_at_its_bound():
    [out] = run_calls([(tool(hang, "hang"), {})], ToolLimits(timeout_s=0.2))
    assert out.status is ToolStatus.timeout
    assert out.text == "Error: the hang call timed out after 0.2 s"
    assert out.seconds == 0.2


def test_the_smaller_bound_applies():
    [out] = run_calls([(tool(hang, "hang", timeout_s=0.1), {})], ToolLimits(timeout_s=30))
    assert out.text == "Error: the hang call timed out after 0.1 s"


def test_a_megabyte_of_output_is_bounded():
    [out] = run_calls([(tool(lambda: "z" * 1_000_000), {})], ToolLimits(output_bytes=256))
    # marker bound "\n[... 1000000 bytes cut]" is 24 bytes: 232 kept
    assert out.text == "z" * 232 + "\n[... 999768 bytes cut]"
    assert (out.status, out.cut_bytes) == (ToolStatus.ok, 999_768)


def test_a_long_error_message_is_bounded():
    def loud(**_):
        raise RuntimeError("e" * 10_000)

    [out] = run_calls([(tool(loud), {})], ToolLimits(output_bytes=128))
    assert len(out.text.encode()) <= 128 and out.text.startswith("Error: RuntimeError: eee")
    assert out.cut_bytes == len("Error: RuntimeError: ") + 10_000 - len(out.text.split("\n")[0])


def test_non_text_results_and_system_exit_are_errors():
    def exits(**_):
        raise SystemExit(3)

    a, b = run_calls([(tool(lambda: 42, "num"), {}), (tool(exits), {})], ToolLimits())
    assert (a.status, a.text) == (ToolStatus.error, "Error: tool 'num' returned int, not text")
    assert (b.status, b.text) == (ToolStatus.error, "Error: SystemExit: 3")


def test_a_tool_sees_its_own_limits():
    see = tool(lambda: repr(current_limits()), timeout_s=3.0)
    [out] = run_calls([(see, {})], ToolLimits(timeout_s=10, output_bytes=512))
    assert out.text == "ToolLimits(timeout_s=3.0, output_bytes=512)"
    assert current_limits() == ToolLimits()   # outside a call: the defaults


def test_hung_calls_give_their_slot_to_the_next():
    # One slot: the two hung calls each time out in turn, then the last call still runs.
    outs = run_calls([(tool(hang, "hang"), {}), (tool(hang, "hang"), {}),
                      (tool(lambda: "ran"), {})], ToolLimits(timeout_s=0.2), workers=1)
    assert [o.status for o in outs] == [ToolStatus.timeout, ToolStatus.timeout, ToolStatus.ok]
    assert outs[2].text == "ran"


def test_a_call_waiting_for_a_slot_is_not_timed_out():
    # One slot, four calls of 0.4 s under a 1.5 s bound: 1.6 s in all, but each call's clock
    # starts when it runs, so none times out (a clock from submission would fail the last).
    def nap(**_):
        time.sleep(0.4)
        return "slept"

    outs = run_calls([(tool(nap), {})] * 4, ToolLimits(timeout_s=1.5), workers=1)
    assert [o.text for o in outs] == ["slept"] * 4


def test_outcomes_keep_the_input_order():
    outs = run_calls([(tool(lambda v=i: str(v)), {}) for i in range(6)], ToolLimits(), workers=3)
    assert [o.text for o in outs] == [str(i) for i in range(6)]
    assert run_calls([], ToolLimits()) == []


def test_check_arguments():
    t = Tool("calc", lambda expression, places=2: "", "d", "expression")
    assert check_arguments(t, {"expression": "1"}) is None
    assert check_arguments(t, []) == "calc: arguments must be an object, got list"
    assert check_arguments(t, {}) == "calc: missing a required argument: 'expression'"
    assert check_arguments(t, {"expression": "1", "bogus": 2}) == \
        "calc: got an unexpected keyword argument 'bogus'"

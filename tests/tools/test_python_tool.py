"""The python tool: the program runs in the sandbox; its output, errors and limits become a
bounded observation."""

import pytest

from rlvr.sandbox import SandboxResult, SandboxStatus, Tier, environment
from rlvr.tools import ToolLimits, ToolStatus, get_tool, run_calls
from rlvr.tools.python_tool import observation, program

MARK = "\n<mark>\n"


def run(code: str, **limits):
    [out] = run_calls([(get_tool("python"), {"code": code})], ToolLimits(**limits))
    return out


# ------------------------------------------------------------------ the observation (pure)

def result(output: str, status=SandboxStatus.ok, **kw) -> SandboxResult:
    return SandboxResult(status, Tier.bwrap, output=output, **kw)


def test_output_alone():
    assert observation(result("42\n"), MARK, 1024) == ("42", False)
    assert observation(result(""), MARK, 1024) == ("(no output)", False)


def test_output_then_traceback():
    text = "hi\n" + MARK + "Traceback (most recent call last):\nValueError: x\n"
    assert observation(result(text), MARK, 1024) == (
        "hi\nTraceback (most recent call last):\nValueError: x", True)


def test_long_output_keeps_its_head_and_the_traceback_its_tail():
    # 256 bytes with output: the traceback (208 bytes) gets 128, its tail; the output the
    # 256 - 128 - 1 = 127 left, its head
    error = "Traceback (most recent call last):\n" + "  frame\n" * 20 + "ValueError: x"
    text, failed = observation(result("a" * 1000 + MARK + error), MARK, 256)
    tail = "[... 100 bytes cut]\n" + error[-108:]         # marker 20 + 108 kept
    head = "a" * 106 + "\n[... 894 bytes cut]"           # marker bound 21: 106 kept
    assert failed and text == head + "\n" + tail
    assert text.endswith("ValueError: x") and len(text.encode()) == 255


def test_a_small_bound_keeps_only_the_traceback():
    error = "Traceback (most recent call last):\nValueError: x"
    assert observation(result("a" * 1000 + MARK + error), MARK, 96) == (error, True)


@pytest.mark.parametrize("status, expected", [
    (SandboxStatus.timeout, "TimeoutError: the program was stopped at its time limit"),
    (SandboxStatus.memory, "MemoryError: the program was stopped at its memory limit"),
    (SandboxStatus.sandbox_error, "Error: the sandbox failed (no bwrap)"),
])
def test_limits_are_named(status, expected):
    assert observation(result("", status, detail="no bwrap"), MARK, 1024) == (expected, True)


def test_output_limit_and_early_exit():
    text, failed = observation(result("b" * 300, SandboxStatus.output_limit), MARK, 1024)
    assert failed and text == "b" * 300 + ("\nError: the program was stopped: it printed more "
                                           "than 300 bytes")
    text, _ = observation(result("", SandboxStatus.runtime_error, exit_code=3), MARK, 1024)
    assert text == "Error: the program exited before it finished (exit code 3)"


def test_the_program_holds_the_code_as_a_literal():
    src = program("print('''x''')\n", "<m>")
    assert "_rlvr_run(\"print('''x''')\\n\", '<m>')" in src


# ------------------------------------------------------------------ in the sandbox

def test_prints_and_the_last_expression():
    assert (run("print(6 * 7)").status, run("print(6 * 7)").text) == (ToolStatus.ok, "42")
    assert run("x = 123\nx * 456").text == "56088"
    assert run("x = 5").text == "(no output)"
    assert run("None").text == "(no output)"


def test_a_fenced_block_is_unwrapped():
    assert run("```python\nprint(2 ** 100)\n```").text == str(2 ** 100)


def test_an_exception_shows_the_output_and_the_traceback_of_the_model_code():
    out = run("print('hi')\ndef f(x):\n    return 1 / x\nf(0)")
    assert out.status is ToolStatus.error
    lines = out.text.split("\n")
    assert lines[0] == "hi" and lines[1] == "Traceback (most recent call last):"
    assert '  File "<tool>", line 4, in <module>' in lines
    assert '  File "<tool>", line 3, in f' in lines
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert "prog.py" not in out.text          # the wrapper's own frames are hidden


def test_a_syntax_error():
    out = run("x = (")
    assert out.status is ToolStatus.error
    assert out.text.startswith('  File "<tool>", line 1') and "SyntaxError" in out.text


def test_exit_codes():
    assert run("import sys\nprint('a')\nsys.exit(0)").text == "a"
    out = run("import sys\nsys.exit(3)")
    assert (out.status, out.text) == (ToolStatus.error, "SystemExit: 3")
    out = run("import os\nos._exit(4)")
    assert out.text == "Error: the program exited before it finished (exit code 4)"


def test_a_megabyte_of_output_is_bounded():
    out = run("print('a' * 1_000_000)", output_bytes=256)
    assert out.status is ToolStatus.error and len(out.text.encode()) <= 256
    assert out.text.startswith("aaaa") and "bytes cut]" in out.text
    # captured: 16 KiB at most (16 x 256 = 4 KiB, raised to the 16 KiB floor)
    assert out.text.endswith("Error: the program was stopped: it printed more than 16384 bytes")


def test_a_program_that_never_ends_times_out():
    out = run("while True:\n    pass", timeout_s=1.0)
    assert out.status is ToolStatus.timeout
    # whichever stops it first: the sandbox's limit or the runner's bound
    assert out.text in ("TimeoutError: the program was stopped at its time limit",
                        "Error: the python call timed out after 1 s")


@pytest.mark.skipif(environment().tier is not Tier.bwrap, reason="network isolation needs bwrap")
def test_no_network():
    out = run("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)")
    assert out.status is ToolStatus.error and out.text.split("\n")[-1].startswith("OSError")


def test_nothing_carries_over_between_calls():
    assert run("secret = 7").text == "(no output)"
    assert run("secret").text.endswith("NameError: name 'secret' is not defined")

"""The tool registry: registration rules, lookups, the built-ins."""

import pytest

from rlvr.tools import RESERVED_NAMES, Tool, get_tool, register_tool, tool_names, unregister_tool


@pytest.fixture
def scratch():
    names = []
    yield names
    for name in names:
        unregister_tool(name)


def test_builtins_are_registered():
    assert {"calculator", "python"} <= set(tool_names())
    assert get_tool("python").argument == "code"


def test_register_a_user_tool(scratch):
    scratch.append("test_words")

    @register_tool("test_words", description="  counts words  ", timeout_s=2)
    def word_count(text: str, sep: str | None = None) -> str:
        return str(len(text.split(sep)))

    tool = get_tool("test_words")
    assert tool == Tool("test_words", word_count, "counts words", "text", 2.0)
    assert tool.bound_s(10.0) == 2.0 and tool.bound_s(1.5) == 1.5
    assert Tool("x", word_count, "d").bound_s(10.0) == 10.0   # no own bound: the env's


def test_argument_is_the_only_required_parameter_or_none(scratch):
    scratch += ["two_args", "explicit"]

    @register_tool("two_args", description="d")
    def two(a: str, b: str) -> str:
        return a + b

    @register_tool("explicit", description="d", argument="b")
    def explicit(a: str = "", b: str = "") -> str:
        return a + b

    assert get_tool("two_args").argument is None          # JSON calls only
    assert get_tool("explicit").argument == "b"


@pytest.mark.parametrize("name", ["Bad", "1x", "with-dash", "x" * 33, "", *sorted(RESERVED_NAMES)])
def test_names_are_checked(name):
    with pytest.raises(ValueError, match="tool name"):
        register_tool(name, description="d")


def test_other_refusals(scratch):
    scratch.append("dup")
    with pytest.raises(ValueError, match="description must be a non-empty string"):
        register_tool("empty_desc", description=" ")
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        register_tool("bad_timeout", description="d", timeout_s=0)
    with pytest.raises(ValueError, match="argument 'nope' is not a parameter"):
        register_tool("bad_arg", description="d", argument="nope")(lambda text: text)
    register_tool("dup", description="d")(lambda text: text)
    with pytest.raises(ValueError, match="tool 'dup' is already registered"):
        register_tool("dup", description="d")(lambda text: text)


def test_unknown_tool_names_the_closest():
    with pytest.raises(KeyError, match="unknown tool 'calculater'; did you mean 'calculator'"):
        get_tool("calculater")

"""The tool-call parser: both forms, and malformed calls as errors, never exceptions."""

import pytest

from rlvr.envs import ToolCall, parse_tool_calls

TOOLS = {"calculator": "expression", "python": "code", "search": None}


def test_no_call_is_a_final_answer():
    for text in ["48 / 2 = 24\n#### 24", "<answer>5</answer>", "use <b>bold</b>", "<foo>x</foo>",
                 "```python\nprint(1)\n```", "", "a < b > c"]:
        assert parse_tool_calls(text, TOOLS) == []


def test_tag_form():
    text = "First: <calculator>1234 * 5678</calculator> then"
    assert parse_tool_calls(text, TOOLS) == [
        ToolCall("calculator", {"expression": "1234 * 5678"}, "tag", 7, 43)]
    assert text[7:43] == "<calculator>1234 * 5678</calculator>"


def test_tag_body_keeps_code_as_written():
    text = '<python>\nfor i in range(3):\n    print("a\\n", i)\n</python>'
    [call] = parse_tool_calls(text, TOOLS)
    assert call.arguments == {"code": 'for i in range(3):\n    print("a\\n", i)'}


def test_json_form():
    text = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'
    assert parse_tool_calls(text, TOOLS) == [
        ToolCall("calculator", {"expression": "2 + 2"}, "json", 0, len(text))]


@pytest.mark.parametrize("body, arguments", [
    ('{"name": "search", "parameters": {"q": "x"}}', {"q": "x"}),     # Llama-style key
    ('{"name": "search", "arguments": "{\\"q\\": \\"x\\"}"}', {"q": "x"}),  # arguments as a string
    ('{"name": "search"}', {}),
])
def test_json_argument_spellings(body, arguments):
    [call] = parse_tool_calls(f"<tool_call>{body}</tool_call>", TOOLS)
    assert (call.name, call.arguments, call.error) == ("search", arguments, None)


def test_several_calls_in_order():
    text = ("<calculator>1+1</calculator> and <python>print(2)</python> and "
            '<tool_call>{"name": "search", "arguments": {"q": "z"}}</tool_call>')
    assert [(c.name, c.form) for c in parse_tool_calls(text, TOOLS)] == [
        ("calculator", "tag"), ("python", "tag"), ("search", "json")]


def test_only_the_environments_tools_are_tags():
    assert parse_tool_calls("<python>print(1)</python>", {"calculator": "expression"}) == []


@pytest.mark.parametrize("text, name, error", [
    ("<calculator>1 + 1", "calculator", "unclosed <calculator>: end the call with </calculator>"),
    ("<calculator>  \n</calculator>", "calculator",
     "empty <calculator> call: put the input between the tags"),
    ("<search>x</search>", "search",
     'search takes JSON arguments: <tool_call>{"name": "search", "arguments": {...}}</tool_call>'),
    ('<tool_call>{"name": "web", "arguments": {}}</tool_call>', "web",
     "unknown tool 'web'; available: calculator, python, search"),
    ("<tool_call>[1, 2]</tool_call>", "",
     '<tool_call> needs a JSON object {"name": ..., "arguments": {...}}'),
    ('<tool_call>{"name": "search", "arguments": [1]}</tool_call>', "search",
     "search: arguments must be a JSON object, got list"),
    ('<tool_call>{"name": "search", "arguments": "not json"}</tool_call>', "search",
     "search: arguments must be a JSON object, got str"),
])
def test_malformed_calls_carry_an_error(text, name, error):
    [call] = parse_tool_calls(text, TOOLS)
    assert (call.name, call.arguments, call.error) == (name, {}, error)


def test_bad_json_names_the_problem():
    [call] = parse_tool_calls('<tool_call>{"name": "calculator",</tool_call>', TOOLS)
    assert call.error.startswith("malformed JSON in <tool_call>: Expecting property name")


def test_an_unclosed_tag_ends_the_parse():
    calls = parse_tool_calls("<calculator>1+1</calculator> <python>print(1) "
                             "<calculator>2</calculator>", TOOLS)
    assert [c.name for c in calls] == ["calculator", "python"]
    assert calls[1].error is not None and calls[1].end == len(
        "<calculator>1+1</calculator> <python>print(1) <calculator>2</calculator>")


def test_hostile_text_never_raises():
    for text in ["<tool_call>" + "[" * 100_000 + "</tool_call>", "<calculator>" * 1000,
                 "<tool_call></tool_call>", "</calculator><calculator>"]:
        for call in parse_tool_calls(text, TOOLS):
            assert call.error is not None

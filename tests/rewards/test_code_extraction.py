"""Code extraction and the ``code_block`` format rule (no sandbox needed)."""

from __future__ import annotations

import pytest

from rlvr.rewards.code import code_block_format
from rlvr.rewards.code_extract import extract_code, fenced_blocks


def test_fenced_python_block():
    e = extract_code("Here:\n```python\ndef f(x):\n    return x\n```\nDone.")
    assert e.method == "fenced" and e.code == "def f(x):\n    return x\n"


def test_last_block_by_default_first_on_request():
    text = "```python\na = 1\n```\ntext\n```py\na = 2\n```\n"
    assert extract_code(text).code == "a = 2\n"
    assert extract_code(text, block="first").code == "a = 1\n"


def test_python_block_preferred_over_other_languages_and_untagged():
    text = "```python\nx = 1\n```\n```bash\nls\n```\n```\ny = 2\n```"
    assert extract_code(text).code == "x = 1\n"
    assert extract_code("```\ny = 2\n```").method == "fenced_untagged"


def test_plain_code_completion():
    e = extract_code("def f(x):\n    return x + 1\n")
    assert e.method == "plain" and "return x + 1" in e.code
    assert extract_code("    return x + 1\n").method == "plain"  # a bare body (HumanEval)


@pytest.mark.parametrize("text", ["", "The answer is 42.", "hello", "42",
                                  "I would use a loop here."])
def test_no_code_is_unparsed(text):
    assert extract_code(text).code is None


def test_unterminated_or_foreign_fence_is_unparsed():
    assert extract_code("```python\ndef f():\n    return 1\n").detail == "unterminated code fence"
    assert extract_code("```bash\nls\n```").code is None


def test_bad_block_option():
    with pytest.raises(ValueError):
        extract_code("x = 1", block="middle")


def test_fenced_blocks_tilde_and_longer_fences():
    bs = fenced_blocks("~~~python\na = 1\n~~~\n````py\nb = '```'\n````\n")
    assert [b.code for b in bs] == ["a = 1\n", "b = '```'\n"]


@pytest.mark.parametrize(
    "text,score",
    [
        ("```python\ndef f():\n    return 1\n```", 1.0),
        ("```py\nx = 1\n```", 1.0),
        ("```\nx = 1\n```", 0.0),
        ("```python\n\n```", 0.0),
        ("```python\ndef f(:\n```", 0.0),
        ("```python\nx = 1\n", 0.0),
        ("def f():\n    return 1", 0.0),
    ],
)
def test_code_block_format_rule(text, score):
    assert code_block_format(text) == score


# K6: a later block that only uses the entry point is a usage example, not the program.
def test_block_defining_the_entry_point_wins_over_a_usage_example():
    text = ("```python\ndef add(a, b):\n    return a + b\n```\n"
            "Example:\n```python\nprint(add(2, 3))\n```")
    assert extract_code(text).code == "print(add(2, 3))\n"  # no entry point: the last block
    assert extract_code(text, entry_point="add").code == "def add(a, b):\n    return a + b\n"
    drafts = ("```python\ndef add(a, b):\n    return a - b\n```\nFixed:\n"
              "```python\ndef add(a, b):\n    return a + b\n```\n"
              "```python\nassert add(1, 2) == 3\n```")
    assert "a + b" in extract_code(drafts, entry_point="add").code
    assert "a - b" in extract_code(drafts, block="first", entry_point="add").code
    # no block defines it (a bare body for a prompt): as without an entry point
    assert extract_code("```python\n    return 1\n```", entry_point="f").code == "    return 1\n"


def test_earlier_blocks_with_needed_helpers_are_joined_before_the_solution():
    text = ("```python\nimport math\nMOD = 7\ndef _sq(x):\n    return x * x\n```\n"
            "```python\nprint('unrelated')\n```\n"
            "```python\ndef f(x):\n    return math.floor(_sq(x)) % MOD\n```\n"
            "```python\nprint(f(3))\n```")
    code = extract_code(text, entry_point="f").code
    assert code.startswith("import math") and "unrelated" not in code and "print(f(3))" not in code
    assert code.rstrip().endswith("return math.floor(_sq(x)) % MOD")


# K11: a fence line inside a docstring does not end the block when the longer block parses.
def test_fence_line_inside_a_docstring():
    text = ('```python\ndef add(a, b):\n    """Add.\n\n    ```\n    >>> add(1, 2)\n    3\n    ```\n'
            '    """\n    return a + b\n```\nThat is all.\n```python\nprint(add(1, 2))\n```\n')
    blocks = fenced_blocks(text)
    assert len(blocks) == 2 and blocks[0].code.endswith("    return a + b\n")
    # a block that parses closes at its first fence, as before
    assert [b.code for b in fenced_blocks("```python\nx = 1\n```\ny\n```python\nz = 2\n```\n")] \
        == ["x = 1\n", "z = 2\n"]
    # a broken block stays as it was when no longer body parses
    assert fenced_blocks("```python\ndef f(:\n```\ntext\n```\n")[0].code == "def f(:\n"


# K8: HumanEval completions are parsed together with the prompt.
PROMPT = 'def frac(x: float) -> float:\n    """Fractional part."""\n'


def test_bare_body_with_top_level_helper_is_code_with_the_prompt():
    body = "    return _frac(x)\n\n\ndef _frac(y):\n    return y % 1.0\n"
    assert extract_code(body).code is None
    e = extract_code(body, prompt=PROMPT)
    assert e.method == "plain" and e.code == body
    for text in ("The answer is 42.", "hello", "    hello"):
        assert extract_code(text, prompt=PROMPT).code is None


def test_future_import_is_hoisted_above_the_prompt():
    from rlvr.rewards.code import _program

    code = ("from __future__ import annotations\n\n"
            "def frac(x: float) -> float:\n    return x % 1.0\n")
    prog = _program(code, {"prompt": PROMPT})
    assert prog.startswith("from __future__ import annotations\n")
    compile(prog, "<prog>", "exec")  # no SyntaxError
    assert _program("x = 1\n", {}) == "x = 1\n"
    legal = '"""doc"""\nfrom __future__ import annotations\nx = 1\n'
    assert _program(legal, {}) == legal


def test_ipython_block_is_python():
    e = extract_code("```ipython\ndef f(x):\n    return x + 1\n```")
    assert e.method == "fenced" and e.code == "def f(x):\n    return x + 1\n"
    # magics / shell lines keep a cell from parsing: they are dropped
    e = extract_code("```ipython\n%timeit f(3)\n!pip list\ndef f(x):\n    return x\n```")
    assert e.code == "def f(x):\n    return x\n"
    # a cell that parses keeps every line (``%`` is an operator in a continued expression)
    e = extract_code("```ipython\nx = (7\n% 3)\n```")
    assert e.code == "x = (7\n% 3)\n"


def test_pycon_transcript_prompts_stripped_output_dropped():
    text = (
        "```pycon\n>>> def add(a, b):\n...     return a + b\n...\n>>> add(1, 2)\n3\n"
        ">>> print('x')\nx\n```"
    )
    e = extract_code(text, entry_point="add")
    assert e.method == "fenced"
    assert e.code == "def add(a, b):\n    return a + b\n\nadd(1, 2)\nprint('x')\n"


def test_pycon_example_after_python_block_is_not_the_program():
    text = "```python\ndef add(a, b):\n    return a + b\n```\n```pycon\n>>> add(1, 2)\n3\n```"
    assert extract_code(text).code == "def add(a, b):\n    return a + b\n"
    assert extract_code(text, entry_point="add").code == "def add(a, b):\n    return a + b\n"


def test_python_block_holding_a_transcript():
    text = "```python\n>>> def sq(x):\n...     return x * x\n>>> sq(3)\n9\n```"
    assert extract_code(text).code == "def sq(x):\n    return x * x\nsq(3)\n"
    # only a block that starts with a prompt and does not parse is read as a transcript
    assert extract_code("```python\nx = 1 \\\n>>> 1\n```").code == "x = 1 \\\n>>> 1\n"


def test_format_rule_still_wants_a_python_tag():
    assert code_block_format("```pycon\n>>> x = 1\n```") == 0.0
    assert code_block_format("```python\nx = 1\n```") == 1.0

"""Code extraction and the ``code_block`` format rule (no sandbox needed)."""

from __future__ import annotations

import pytest

from rlvr.rewards.code import code_block_format, extract_code, fenced_blocks


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


@pytest.mark.parametrize("text", ["", "The answer is 42.", "hello", "42", "I would use a loop here."])
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

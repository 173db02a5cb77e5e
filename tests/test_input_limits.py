"""Size limits on user input: a line longer than the limit is refused naming the file and
line after reading only that much of it, and a prompt longer than its limit is refused."""

import json
import tracemalloc

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.io import InputError, input_limits, read_jsonl, text_lines
from rlvr.rewards.records_io import read_records
from rlvr.tasks.files import DataError
from rlvr.tasks.sources import load_gsm8k, load_task_file

runner = CliRunner()


def test_a_line_at_the_limit_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"a" * 10 + b"\n" + b"b" * 10 + b"\r\n" + b"c" * 11 + b"\n")
    with input_limits(max_line_bytes=10):
        lines = text_lines(path)
        assert next(lines) == (1, "a" * 10 + "\n")
        assert next(lines) == (2, "b" * 10 + "\r\n")
        with pytest.raises(InputError) as refused:
            next(lines)
    assert str(refused.value).startswith(f"{path}:3: the line is longer than 10 bytes")
    assert "data.max_line_bytes" in str(refused.value)
    path.write_bytes(b"d" * 11)  # the last line, without a newline
    with input_limits(max_line_bytes=10), pytest.raises(InputError, match=":1: the line is"):
        list(text_lines(path))
    with input_limits(max_line_bytes=11):
        assert list(text_lines(path)) == [(1, "d" * 11)]


def test_a_huge_line_is_refused_without_being_held_in_memory(tmp_path):
    """A 24 MB record under a 64 KiB limit: the reader's peak allocation stays within a small
    multiple of the limit (a reader that takes the whole line holds 24 MB)."""
    path = tmp_path / "big.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"prompt": "ok"}\n{"prompt": "')
        chunk = b"x" * (1 << 20)
        for _ in range(24):
            f.write(chunk)
        f.write(b'"}\n')
    limit = 64 * 1024
    tracemalloc.start()
    try:
        with input_limits(max_line_bytes=limit), pytest.raises(InputError) as refused:
            read_jsonl(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.line == 2 and str(refused.value).startswith(f"{path}:2:")
    assert peak < 4 * limit + 256 * 1024, peak


def test_verify_records_are_bounded_by_the_default_limit(tmp_path):
    path = tmp_path / "r.jsonl"
    record = {"task_type": "math", "completion": "#### 4", "reference": "4"}
    path.write_text(json.dumps(record) + "\n" + json.dumps({**record, "completion": "y" * 200})
                    + "\n")
    with input_limits(max_line_bytes=150, line_setting="--max-line-bytes"):
        with pytest.raises(InputError, match=r":2: the line is longer than 150 bytes.*"
                                             r"--max-line-bytes"):
            read_records(path)
    result = runner.invoke(app, ["verify", str(path), "--max-line-bytes", "150"])
    assert result.exit_code == 2
    assert f"{path}:2: the line is longer than 150 bytes" in " ".join(result.output.split())
    assert runner.invoke(app, ["verify", str(path), "--max-line-bytes", "400"]).exit_code == 0


def test_a_prompt_over_the_limit_is_refused_naming_file_line_and_field(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    row = {"id": "a", "prompt": "What is 2+2?", "reference": "4", "task_type": "math",
           "source": "mine"}
    tasks.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "b", "prompt": "p" * 30})
                     + "\n")
    with input_limits(max_prompt_chars=30):
        assert [t.id for t in load_task_file(tasks)] == ["a", "b"]
    with input_limits(max_prompt_chars=29), pytest.raises(DataError) as refused:
        load_task_file(tasks)
    assert str(refused.value) == (f"{tasks}:2: field 'prompt': 30 characters, over the limit "
                                  f"of 29 on a prompt (raise it with data.max_prompt_chars, "
                                  f"or shorten the prompt)")
    gsm = tmp_path / "gsm.jsonl"
    gsm.write_text(json.dumps({"question": "q" * 40, "answer": "#### 1"}) + "\n")
    with input_limits(max_prompt_chars=39), pytest.raises(DataError,
                                                          match=r"gsm.jsonl:1: field 'question'"):
        load_gsm8k(gsm, "train")

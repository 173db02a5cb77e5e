"""JSON inputs that Python cannot hold (nesting past the recursion limit, an integer of 5000
digits) are errors naming the file and line; a lone surrogate (a JSON ``"\\ud800"`` escape)
is written back as its escape instead of failing the write after every record was scored."""

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.io import InputError, atomic_write, json_text, read_jsonl, read_jsonl_lenient

runner = CliRunner()
DEEP = "[" * 100_000 + "]" * 100_000
RECORD = '{{"task_type": "math", "completion": "#### 4", "reference": {ref}}}'


@pytest.mark.parametrize("reference, message", [
    (DEEP, "nested too deeply (more than 200 levels of arrays / objects)"),
    ("[" * 300 + "]" * 300, "nested too deeply (more than 200 levels of arrays / objects)"),
    ("9" * 5000, "an integer of more than 4300 digits"),
])
def test_verify_names_the_line_of_an_input_python_cannot_hold(tmp_path, reference, message):
    inp = tmp_path / "in.jsonl"
    inp.write_text(RECORD.format(ref='"4"') + "\n" + RECORD.format(ref=reference) + "\n",
                   encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 2, result.output
    assert f"{inp}:2: {message}" in result.output.replace("\n", "")
    assert not out.exists()  # refused before any work


def test_read_jsonl_and_the_lenient_reader_refuse_the_same_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"b": ' + "9" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_jsonl(path)
    assert str(info.value).startswith(f"{path}:2: an integer of more than 4300 digits")
    path.write_text('{"a": 1}\n{"b": ' + DEEP + "}\n", encoding="utf-8")
    assert read_jsonl_lenient(path) == ([{"a": 1}], 1)


def test_json_value_keeps_nesting_up_to_the_bound():
    from rlvr.io import MAX_JSON_DEPTH, json_value

    assert MAX_JSON_DEPTH == 200
    value = json_value("[" * 200 + "1" + "]" * 200)
    for _ in range(199):
        value = value[0]
    assert value == [1]
    with pytest.raises(ValueError, match="nested too deeply"):
        json_value("[" * 201 + "]" * 201)


def test_a_task_line_past_the_limits_is_a_record_error():
    from rlvr.records import RecordError, Task

    with pytest.raises(RecordError, match="an integer of more than 4300 digits"):
        Task.from_json('{"id": 1, "prompt": "p", "answer": ' + "7" * 5000 + "}")
    with pytest.raises(RecordError, match="nested too deeply"):
        Task.from_json('{"id": 1, "prompt": ' + DEEP + "}")


def test_a_code_task_array_past_the_limits_names_the_file(tmp_path):
    from rlvr.tasks.code import _read_json_array
    from rlvr.tasks.files import DataError

    path = tmp_path / "tasks.json"
    path.write_text("[" + DEEP + "]", encoding="utf-8")
    with pytest.raises(DataError, match=f"^{path}: nested too deeply"):
        _read_json_array(path)


def test_json_text_escapes_lone_surrogates_and_reads_back_the_same():
    value = {"id": "a\ud800b", "k\udfff": ["\udc80"], "ok": "é😀"}
    text = json_text(value)
    assert text == '{"id": "a\\ud800b", "k\\udfff": ["\\udc80"], "ok": "é😀"}'
    assert json.loads(text) == value
    text.encode("utf-8")  # writable as UTF-8


def test_atomic_write_cannot_fail_on_a_lone_surrogate(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_write(path) as f:
        f.write("x\ud800y\n")
    assert path.read_bytes() == b"x\\ud800y\n"


def test_verify_writes_every_scored_row_when_a_record_holds_lone_surrogates(tmp_path):
    """Scored, written (the surrogate as its JSON escape) and summed up; reading the output
    back gives the record's strings as they were."""
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"task_type": "math", "completion": "#### 4", "reference": "4", '
                   '"id": "r\\ud800", "category": "c\\udc00"}\n'
                   '{"task_type": "math", "completion": "#### 5", "reference": "4"}\n',
                   encoding="utf-8")
    out, summary = tmp_path / "out.jsonl", tmp_path / "summary.json"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--summary",
                                 "--summary-json", str(summary), "--workers", "1"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["category"], r["status"]) for r in rows] == [
        ("r\ud800", "c\udc00", "correct"), ("2", None, "wrong")]
    assert '"id": "r\\ud800"' in out.read_text(encoding="utf-8")
    stats = json.loads(summary.read_text(encoding="utf-8"))
    assert stats["by_category"]["c\udc00"]["count"] == 1
    assert "category=c\\udc00" in result.output


def test_verify_to_stdout_with_a_lone_surrogate(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"task_type": "math", "completion": "#### 4 \\udbff", "reference": "4"}\n',
                   encoding="utf-8")
    result = runner.invoke(app, ["verify", str(inp), "--workers", "1"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout.splitlines()[0])
    assert row["extracted"] == "4 \udbff" and row["id"] == "1"

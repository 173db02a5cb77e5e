"""`rlvr verify` end to end: output shape and order, summaries, malformed input, atomic writes."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rlvr.cli import app

runner = CliRunner()


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_verify_writes_one_result_per_line_in_order(tmp_path):
    rows = [
        {"id": "a", "task_type": "math", "completion": "2 + 2 = 4\n#### 4", "reference": "4",
         "category": "add"},
        {"id": "b", "task_type": "math", "completion": "2 + 3 = 6\n#### 6", "reference": "5",
         "category": "add"},
        {"task_type": "math", "completion": "so \\boxed{\\frac{1}{2}}", "reference": "0.5"},
    ]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out)])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in got] == ["a", "b", "3"]  # missing id -> line number
    assert [g["status"] for g in got] == ["correct", "wrong", "correct"]
    assert got[0]["reward"] == pytest.approx(1.1) and got[1]["reward"] == pytest.approx(0.1)
    assert got[0]["components"] == {"outcome": 1.0, "format": 1.0}
    assert got[1]["extracted"] == "6" and got[0]["category"] == "add"


def test_summary_json_counts_per_category(tmp_path):
    rows = [{"task_type": "math", "completion": c, "reference": "3", "category": cat}
            for c, cat in [("#### 3", "x"), ("#### 4", "x"), ("no answer here at all, sorry", "y")]]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    summary = tmp_path / "summary.json"
    result = runner.invoke(app, ["verify", str(inp), "--summary", "--summary-json", str(summary)])
    assert result.exit_code == 0, result.output
    assert "reward summary" in result.output
    stats = json.loads(summary.read_text())
    assert stats["by_category"]["x"]["count"] == 2
    assert stats["by_category"]["x"]["correct"] == 0.5
    assert stats["by_category"]["y"]["parse_failure"] == 1.0
    assert stats["overall"]["count"] == 3


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("{not json", "in.jsonl:2: invalid JSON"),
        ('{"task_type": "math", "completion": "x"}',
         "in.jsonl:2: missing required field 'reference'"),
        ('{"task_type": "math", "reference": "1"}',
         "in.jsonl:2: missing required field 'completion'"),
        ('{"task_type": "poetry", "completion": "x", "reference": "1"}',
         "in.jsonl:2: field 'task_type': unknown task type 'poetry'"),
        ('{"task_type": "math", "completion": 5, "reference": "1"}',
         "in.jsonl:2: field 'completion': expected str"),
        ('[1, 2]', "in.jsonl:2: expected a JSON object"),
    ],
)
def test_malformed_line_exits_2_naming_line_and_field(tmp_path, bad_line, message):
    good = {"task_type": "math", "completion": "#### 1", "reference": "1"}
    inp = write_jsonl(tmp_path / "in.jsonl", [good, bad_line, good])
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out)])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert out.read_text() == "previous results\n"  # nothing overwritten or half-written
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_missing_input_file_exits_2(tmp_path):
    result = runner.invoke(app, ["verify", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "cannot read" in result.output


def test_console_entry_point_runs_as_a_process(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl",
                      [{"task_type": "math", "completion": "#### 1,234", "reference": "1234"}])
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "verify", str(inp), "--workers", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "correct"


def test_input_that_is_not_utf8_names_the_file_and_line(tmp_path):
    """UTF-16 (BOM) and Latin-1 input exit 2 naming file and line, before any scoring; a UTF-8
    BOM is accepted."""
    row = {"id": "a", "task_type": "math", "completion": "café costs #### 4", "reference": "4"}
    text = json.dumps(row, ensure_ascii=False) + "\n"
    utf16 = tmp_path / "utf16.jsonl"
    utf16.write_bytes(text.encode("utf-16"))
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes((json.dumps({**row, "id": "z"}) + "\n" + text).encode("latin-1"))
    utf16le = tmp_path / "utf16le.jsonl"
    utf16le.write_bytes(text.encode("utf-16-le"))  # no byte-order mark
    for path, where, what in [(utf16, ":1:", "UTF-16"), (latin1, ":2:", "not valid UTF-8"),
                              (utf16le, ":1:", "NUL bytes")]:
        out = tmp_path / "out.jsonl"
        result = runner.invoke(app, ["verify", str(path), "-o", str(out)])
        assert result.exit_code == 2, result.output
        message = " ".join(result.output.split())
        assert f"{path.name}{where}" in message.replace(" ", "") or f"{path}{where}" in message
        assert what in message and not out.exists()
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = runner.invoke(app, ["verify", str(bom), "-o", str(tmp_path / "ok.jsonl")])
    assert result.exit_code == 0, result.output


def test_unusable_output_paths_exit_2_before_any_scoring(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", [{"task_type": "math", "completion": "#### 4",
                                               "reference": "4"}])
    for args, what in [(["-o", str(tmp_path)], "is a directory"),
                       (["-o", str(tmp_path / "missing" / "out.jsonl")], "does not exist"),
                       (["--summary-json", str(tmp_path)], "is a directory")]:
        result = runner.invoke(app, ["verify", str(inp), *args])
        message = " ".join(result.output.split())
        assert result.exit_code == 2 and what in message and args[0] in message, result.output


def test_an_empty_input_says_so(tmp_path):
    inp = tmp_path / "empty.jsonl"
    inp.write_text("")
    result = runner.invoke(app, ["verify", str(inp), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0 and "no records" in result.output
    assert (tmp_path / "out.jsonl").read_text() == ""


NAN_PLUGIN = '''
from rlvr.rewards.registry import register_verifier
from rlvr.rewards.types import Status, Verdict


@register_verifier("nan_score", format_rule="none")
def nan_score(completion, reference, **options):
    """Scores NaN for every completion but the one that reads 'fine' (7 of 8 below)."""
    if completion == "fine":
        return Verdict(Status.correct, completion, "plain", score=1.0)
    return Verdict(Status.correct, completion, "plain", score=float("nan"))
'''


def _refuse_constant(name):
    raise AssertionError(f"not standard JSON: {name}")


def test_nan_scores_from_a_plugin_are_error_rows_and_every_output_is_standard_json(tmp_path):
    """a plugin returning NaN scores got status correct, reward NaN, a
    '100% correct' summary and NaN literals in the output. The plugin is a module written
    here, next to the config, as a user would (the process runs in that directory)."""
    (tmp_path / "nan_score_plugin.py").write_text(NAN_PLUGIN)
    (tmp_path / "reward.yaml").write_text("plugins: [nan_score_plugin]\n")
    rows = [{"id": f"r{i}", "task_type": "nan_score", "reference": "x", "category": "c",
             "completion": "fine" if i == 3 else f"answer {i}"} for i in range(8)]
    write_jsonl(tmp_path / "in.jsonl", rows)
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr.cli", "verify", "in.jsonl", "-o", "out.jsonl", "--config",
         "reward.yaml", "--summary", "--summary-json", "summary.json", "--workers", "2"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line, parse_constant=_refuse_constant)
           for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [g["status"] for g in got] == ["error"] * 3 + ["correct"] + ["error"] * 4
    assert all(g["reward"] == 0.0 for i, g in enumerate(got) if i != 3)
    assert "score nan" in got[0]["detail"] and "nan_score" in got[0]["detail"]
    summary = json.loads((tmp_path / "summary.json").read_text(), parse_constant=_refuse_constant)
    assert summary["overall"]["count"] == 8 and summary["overall"]["correct"] == 0.125
    assert summary["overall"]["errors"] == 7
    assert "100.0%" not in proc.stdout and "12.5%" in proc.stdout, proc.stdout


def test_json_text_writes_non_finite_values_as_null_with_a_flag():
    from rlvr.io import finite_json, json_text

    row = {"step": 3, "loss": float("nan"), "kl": float("inf"), "ok": 1.5,
           "pass@k": {"1": 0.5, "4": float("-inf")}, "values": [1.0, float("nan")]}
    text = json_text(row)
    back = json.loads(text, parse_constant=_refuse_constant)
    assert back == {"step": 3, "loss": None, "kl": None, "ok": 1.5,
                    "pass@k": {"1": 0.5, "4": None}, "values": [1.0, None],
                    "nonfinite": ["loss", "kl", "pass@k.4", "values.1"]}
    assert json.loads(json_text({"a": 1.0})) == {"a": 1.0}  # no flag when all is finite
    assert json.loads(json_text({"a": float("nan")}, flag=False)) == {"a": None}
    assert finite_json((1, float("nan")))[0] == [1, None]

    class Scalar:  # a numpy scalar / 0-d tensor stand-in: converted by default=float
        def __float__(self):
            return float("nan")

    assert json.loads(json_text({"loss": Scalar()}, default=float)) == {
        "loss": None, "nonfinite": ["loss"]}


def _no_space(*_args, **_kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_writing_exits_1_with_the_previous_output_intact(tmp_path,
                                                                          monkeypatch):
    """ENOSPC while writing -o was a traceback (the old file survived)."""
    from rlvr.io import writing as records_io

    inp = write_jsonl(tmp_path / "in.jsonl", [{"task_type": "math", "completion": "#### 4",
                                               "reference": "4"}])
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    monkeypatch.setattr(records_io, "_fsync", _no_space)  # where a full disk shows up
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out)])
    message = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert f"{out}: cannot write (No space left on device)" in message
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert out.read_text() == "previous results\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_an_unwritable_output_directory_exits_2_before_any_scoring(tmp_path, monkeypatch):
    import os

    inp = write_jsonl(tmp_path / "in.jsonl", [{"task_type": "math", "completion": "#### 4",
                                               "reference": "4"}])
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    # chmod does not stop root (the tests may run as root): say what a read-only dir says
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(locked) and
                        mode & os.W_OK else real_access(p, mode))
    result = runner.invoke(app, ["verify", str(inp), "-o", str(locked / "out.jsonl")])
    message = " ".join(result.output.split())
    assert result.exit_code == 2 and f"-o {locked / 'out.jsonl'}: not writable" in message


def test_verify_plugins_option_registers_a_task_type(tmp_path):
    # rlvr verify took plugins only through --config; --plugins as in eval
    (tmp_path / "nan_score_plugin.py").write_text(NAN_PLUGIN)
    write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "task_type": "nan_score", "reference": "x",
                                          "completion": "fine"}])
    base = [sys.executable, "-m", "rlvr.cli", "verify", "in.jsonl", "-o", "out.jsonl"]
    proc = subprocess.run(base, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "--plugins MODULE" in proc.stderr, proc.stderr
    proc = subprocess.run(base + ["--plugins", "nan_score_plugin"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["status"] == "correct"


@pytest.mark.parametrize("option", ["-o", "--summary-json"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(tmp_path, monkeypatch, option):
    """`rlvr verify in.jsonl -o in.jsonl` replaced the completions with their scores."""
    inp = write_jsonl(tmp_path / "in.jsonl", [{"task_type": "math", "completion": "#### 4",
                                               "reference": "4"}])
    before = inp.read_bytes()
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["verify", str(inp), option, "in.jsonl"])  # another spelling
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"{option} in.jsonl: the same file as the input" in message
    assert inp.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]

"""`rlvr verify --compare math-verify`: the disagreement rows and summary line on records whose
verdicts in both libraries are known, skipped task types, time bounds, and bad options."""

import json
import sys

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.rewards.compare import compare_results, default_compare_out, math_verify_verdicts
from rlvr.rewards.pool import VerifierPool
from rlvr.rewards.records_io import VerifyRecord
from rlvr.rewards.types import RewardResult, Status, Verdict

pytest.importorskip("math_verify")

runner = CliRunner()

# Six math records with both libraries' verdicts worked out (math_verify 0.9), one logic record.
RECORDS = [
    # both correct: 0.5 == 1/2
    {"id": "half", "task_type": "math", "completion": "so \\boxed{0.5}",
     "reference": "\\frac{1}{2}", "category": "numeric"},
    # both not correct
    {"id": "off-by-one", "task_type": "math", "completion": "48 + 23 = 71\n#### 71",
     "reference": "72", "category": "numeric"},
    # rlvr: two answers offered (R7, scored 0); Math-Verify takes the 3
    {"id": "hedge", "task_type": "math", "completion": "The answer is 3 or 4.",
     "reference": "3", "category": "hedge"},
    # rlvr reads the Chinese answer marker and drops the unit; Math-Verify extracts nothing
    {"id": "yuan", "task_type": "math", "completion": "所以答案是100元。", "reference": "100",
     "category": "chinese"},
    # rlvr evaluates sin 60 degrees; Math-Verify reads sin(60) in radians
    {"id": "sin60", "task_type": "math", "completion": "The value is \\boxed{\\sin 60^\\circ}.",
     "reference": "\\frac{\\sqrt{3}}{2}", "category": "latex"},
    # rlvr scales "5 million"; Math-Verify keeps the 5
    {"id": "million", "task_type": "math",
     "completion": "The population is \\boxed{5 \\text{ million}}.", "reference": "5000000",
     "category": "units"},
    # not math: skipped by the comparison, still scored by rlvr
    {"id": "countdown", "task_type": "logic", "completion": "#### 1+2+3",
     "reference": {"kind": "countdown", "numbers": [1, 2, 3], "target": 6}},
]

EXPECTED_ROWS = [
    {"id": "hedge", "line": 3, "category": "hedge", "reference": "3",
     "rlvr_status": "multiple_answers", "rlvr_extracted": "3 or 4",
     "math_verify_status": "correct", "math_verify_extracted": ["3", "3"],
     "math_verify_gold": ["3", "3"], "math_verify_detail": ""},
    {"id": "yuan", "line": 4, "category": "chinese", "reference": "100",
     "rlvr_status": "correct", "rlvr_extracted": "100元",
     "math_verify_status": "unparsed", "math_verify_extracted": [],
     "math_verify_gold": ["100", "100"], "math_verify_detail": ""},
    {"id": "sin60", "line": 5, "category": "latex", "reference": "\\frac{\\sqrt{3}}{2}",
     "rlvr_status": "correct", "rlvr_extracted": "\\sin 60^\\circ",
     "math_verify_status": "wrong", "math_verify_extracted": ["sin(60)", "\\sin 60^\\circ"],
     "math_verify_gold": ["sqrt(3)/2", "\\frac{\\sqrt{3}}{2}"], "math_verify_detail": ""},
    {"id": "million", "line": 6, "category": "units", "reference": "5000000",
     "rlvr_status": "correct", "rlvr_extracted": "5 \\text{ million}",
     "math_verify_status": "wrong", "math_verify_extracted": ["5", "5"],
     "math_verify_gold": ["5000000", "5000000"], "math_verify_detail": ""},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def summary_for(path):
    return (f"compare math-verify: 6 math records compared (1 other skipped), agreement 33.3% "
            f"(2/6), 4 disagreements -> {path}; correct: rlvr 4, math-verify 2; math-verify "
            f"timeouts 0, errors 0")


def test_compare_writes_the_exact_disagreements_beside_the_output(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    out = tmp_path / "scored.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--workers", "2",
                                 "--compare", "math-verify"])
    assert result.exit_code == 0, result.output
    disagreements = tmp_path / "scored.disagreements.jsonl"  # the default: beside -o
    assert read_jsonl(disagreements) == EXPECTED_ROWS
    assert result.stdout.strip() == summary_for(disagreements)
    scored = read_jsonl(out)  # rlvr's own output is unchanged by the comparison
    assert [r["id"] for r in scored] == [r["id"] for r in RECORDS]
    assert [r["status"] for r in scored] == ["correct", "wrong", "multiple_answers", "correct",
                                             "correct", "correct", "correct"]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_rows_on_stdout_stay_jsonl_and_the_summary_goes_to_stderr(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", RECORDS)
    target = tmp_path / "mv.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "--compare", "math-verify",
                                 "--compare-out", str(target)])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == \
        [r["id"] for r in RECORDS]
    assert summary_for(target) in " ".join(result.stderr.split())
    assert read_jsonl(target) == EXPECTED_ROWS


def test_default_path_without_output_is_beside_the_input(tmp_path):
    assert default_compare_out(tmp_path / "in.jsonl", None) == tmp_path / "in.disagreements.jsonl"
    assert default_compare_out(tmp_path / "in.jsonl", tmp_path / "o" / "s.jsonl") == \
        tmp_path / "o" / "s.disagreements.jsonl"


def test_unknown_compare_value_exits_2_naming_the_allowed_values(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", RECORDS[:1])
    result = runner.invoke(app, ["verify", str(inp), "--compare", "sympy"])
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "--compare: unknown value 'sympy'; allowed: math-verify" in message


def test_missing_math_verify_exits_2_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "math_verify", None)  # `import math_verify` now fails
    inp = write_jsonl(tmp_path / "in.jsonl", RECORDS[:1])
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--compare", "math-verify"])
    assert result.exit_code == 2, result.output
    assert "pip install 'rlvr[compare]'" in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == [inp]  # nothing scored, nothing written


def test_bad_compare_out_exits_2_before_any_scoring(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", RECORDS[:1])
    out = tmp_path / "out.jsonl"
    for args, what in [(["--compare-out", str(tmp_path)], "--compare-out"),
                       (["--compare-out", str(tmp_path / "missing" / "d.jsonl")], "does not exist"),
                       (["--compare-out", str(out)], "the same file as -o")]:
        result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--compare",
                                     "math-verify", *args])
        message = " ".join(result.output.split())
        assert result.exit_code == 2 and what in message and "--compare-out" in message, message
        assert not out.exists()
    result = runner.invoke(app, ["verify", str(inp), "--compare-out", str(tmp_path / "d.jsonl")])
    assert result.exit_code == 2 and "give --compare math-verify" in result.output


def test_a_math_verify_call_that_overruns_its_bound_is_a_timeout_row():
    """Math-Verify runs in a verifier worker under the pool's wall-time bound: on a reference
    it cannot finish within 0.3 s (a tower of powers) the call ends as ``timeout``."""
    tower = "\\dfrac{5^{\\left(5^{\\left(5^{\\left(5^5\\right)}\\right)} - 4\\right)} - 5}{16}"
    records = [VerifyRecord(1, "tower", "math", f"\\boxed{{{tower}}}", tower),
               VerifyRecord(2, "skip", "logic", "#### 1", {"kind": "countdown"})]
    with VerifierPool(1) as pool:
        verdicts = math_verify_verdicts(pool, records, timeout_s=0.3)
    assert verdicts[0].status is Status.timeout and verdicts[1] is None
    comparison = compare_results(records, [RewardResult(1.0, status=Status.correct)] * 2,
                                 verdicts)
    assert (comparison.compared, comparison.skipped, comparison.other_timeouts) == (1, 1, 1)
    row = comparison.rows[0]
    assert row["math_verify_status"] == "timeout" and row["math_verify_extracted"] is None
    assert row["math_verify_detail"] == "exceeded 0.3 s"


def test_compare_results_counts_and_rejects_mismatched_lengths():
    records = [VerifyRecord(i, str(i), "math", "c", "1") for i in (1, 2, 3)]
    ours = [RewardResult(1.0, status=s) for s in (Status.correct, Status.wrong, Status.wrong)]
    theirs = [Verdict(Status.correct, detail='{"gold": ["1"], "answer": ["1"]}'),
              Verdict(Status.error, detail="ValueError: boom"),
              Verdict(Status.unparsed, detail='{"gold": ["1"], "answer": []}')]
    comparison = compare_results(records, ours, theirs)
    assert (comparison.compared, comparison.agreed, comparison.rows) == (3, 3, [])
    assert (comparison.rlvr_correct, comparison.other_correct, comparison.other_errors) == \
        (1, 1, 1)
    assert comparison.agreement == 1.0
    with pytest.raises(ValueError, match="3 records, 2 results"):
        compare_results(records, ours[:2], theirs)

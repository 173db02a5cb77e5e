"""scripts/compare_gym_scorers.py reports what it measures: its table's headers name what its
rows hold, and each disagreement group's verdict is the one its rows give (computed from the
expected verdicts, never written by hand)."""

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("reasoning_gym")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_gym_scorers.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("compare_gym_scorers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(script):
    rows = (script.score("countdown", script.rlvr_countdown(6, 0), 0)
            + script.score("countdown", script.rg_countdown(6, 0), 0)
            + script.score("knights_knaves", script.rlvr_kk(6, 0), 0))
    return script, rows


def test_table_headers_name_what_the_rows_hold(report, capsys):
    script, rows = report
    script.report(rows, show_all=True)
    lines = capsys.readouterr().out.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:4] == ["family", "item source", "candidate", "n"]
    first = [c.strip() for c in lines[2].strip("|").split("|")]
    assert first[1] in ("rg", "rlvr") and first[2] == "reference"  # a source, a candidate kind
    # the agreement line and each scorer's hits against the expected verdicts, by hand
    agree = sum(r["rlvr_ok"] == r["rg_ok"] for r in rows)
    assert f"{agree}/{len(rows)} = {agree / len(rows):.1%}" in "\n".join(lines)


def test_each_disagreement_header_agrees_with_its_rows(report, capsys):
    script, rows = report
    script.report(rows, show_all=True)
    out = capsys.readouterr().out
    groups = re.split(r"\n- ", out.split("disagreements", 1)[1])[1:]
    assert groups, "no disagreement listed"
    for group in groups:
        head, *items = group.strip().splitlines()
        items = [i for i in items if i.startswith("    item")]
        claimed = {who: int(n) for who, n in
                   re.findall(r"(rlvr|reasoning-gym) matches the rules in (\d+)", head)}
        listed = {who: sum(i.endswith(f"-> {who} matches the rules") for i in items)
                  for who in ("rlvr", "reasoning-gym")}
        assert claimed == {k: v for k, v in listed.items() if v}, group


def test_rlvr_reads_a_true_value_claim_and_the_expectation_says_so(report):
    _, rows = report
    claims = [r for r in rows if r["kind"] == "with_equals" and r["source"] == "rlvr"]
    assert claims and all(r["expected"] and r["rlvr_ok"] for r in claims)

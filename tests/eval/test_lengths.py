"""The length tool (R19): percentiles, the P90 x 1.2 cap and truncation rates by hand."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.eval.lengths import (
    LengthsError,
    histogram,
    length_report,
    load_lengths,
    percentile,
    recommended_cap,
)

runner = CliRunner()
LENGTHS = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def test_percentile_interpolates_linearly():
    assert percentile([10, 20, 30, 40], 90) == pytest.approx(37.0)    # pos 2.7 -> 30 + 7
    assert percentile([10, 20, 30, 40], 50) == pytest.approx(25.0)
    assert percentile(LENGTHS, 90) == pytest.approx(91.0)             # pos 8.1 -> 90 + 1
    assert percentile([7], 99) == 7
    with pytest.raises(ValueError):
        percentile([], 50)


def test_recommended_cap_is_p90_times_1_2_rounded_up():
    assert recommended_cap([10, 20, 30, 40]) == 45            # 37 * 1.2 = 44.4 -> 45
    assert recommended_cap(LENGTHS) == 110                    # 91 * 1.2 = 109.2 -> 110
    assert recommended_cap([50] * 5) == 60                    # 60.000000000000001 -> 60


def test_length_report_by_hand():
    r = length_report(LENGTHS, cap=80)
    assert r["count"] == 10 and r["mean"] == 55 and r["min"] == 10 and r["max"] == 100
    assert r["p50"] == pytest.approx(55.0)
    assert r["truncation_rate"] == pytest.approx(0.3)         # 80, 90, 100 hit the cap
    assert r["recommended_cap"] == 110
    # 3 of 10 were cut at 80: their lengths are unknown (>= 80), so the rate at 110 is too:
    # between 0 (none of the 7 uncut reaches 110) and 0.3 (every cut one might)
    assert r["censored"] and r["truncation_rate_at_recommended"] is None
    assert r["truncation_rate_at_recommended_range"] == [0.0, pytest.approx(0.3)]
    uncut = length_report(LENGTHS, cap=200)
    assert not uncut["censored"] and uncut["truncation_rate"] == 0.0
    assert uncut["truncation_rate_at_recommended"] == 0.0  # nothing reaches 110
    assert uncut["truncation_rate_at_recommended_range"] == [0.0, 0.0]
    no_cap = length_report(LENGTHS)
    assert not no_cap["censored"] and no_cap["truncation_rate_at_recommended"] == 0.0
    # finish reasons, when all are known, decide truncation (a stop exactly at the cap is not)
    reasons = ["stop"] * 8 + ["length", "length"]
    assert length_report(LENGTHS, 80, reasons)["truncation_rate"] == pytest.approx(0.2)
    assert length_report(LENGTHS)["truncation_rate"] is None


def test_histogram_counts_every_length_once():
    bins = histogram(LENGTHS, bins=3)           # width ceil(91 / 3) = 31
    assert bins == [(10, 40, 4), (41, 71, 3), (72, 102, 3)]


def test_run_directory_uses_config_cap_and_tokenizer(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "tiny-random"},
                                                     "grpo": {"max_new_tokens": 8}}))
    # the tiny tokenizer has one token per character
    texts = ["#### 1", "1 + 2 = 3", "abcdefgh", "ab"]
    (run / "samples.jsonl").write_text("".join(json.dumps({"step": 1, "completion": t}) + "\n"
                                               for t in texts))
    found = load_lengths(run)
    assert found.lengths == [6, 9, 8, 2] and found.cap == 8
    result = runner.invoke(app, ["lengths", str(run), "--json", str(tmp_path / "l.json")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "l.json").read_text())
    # sorted 2 6 8 9: P90 at position 2.7 -> 8 + 0.7 = 8.7; x 1.2 = 10.44 -> 11
    assert report["p90"] == pytest.approx(8.7) and report["recommended_cap"] == 11
    assert report["truncation_rate"] == pytest.approx(0.5)    # 9 and 8 reach the cap of 8
    assert "recommended cap: 11 tokens" in result.output


def test_jsonl_with_token_counts_and_cap_option(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"tokens": x}) + "\n" for x in LENGTHS))
    result = runner.invoke(app, ["lengths", str(path), "--cap", "100"])
    assert result.exit_code == 0, result.output
    assert ("recommended cap: 110 tokens (P90 91.0 x 1.2); truncated at the current cap 100: "
            "10.0%") in " ".join(result.output.split())


@pytest.mark.parametrize("content, message", [
    ('{"completion": "abc"}\n', "c.jsonl:1: no 'tokens' field; pass --tokenizer"),
    ('{"tokens": -3}\n', "c.jsonl:1: field 'tokens': expected an int >= 0"),
    ('{"x": 1}\n', "c.jsonl:1: expected 'tokens' (int) or 'completion' (str)"),
    ("", "no completion lengths found"),
])
def test_bad_inputs_exit_2(tmp_path, content, message):
    path = tmp_path / "c.jsonl"
    path.write_text(content)
    result = runner.invoke(app, ["lengths", str(path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_directory_without_completions_is_refused(tmp_path):
    with pytest.raises(LengthsError, match="neither a run directory"):
        load_lengths(tmp_path)

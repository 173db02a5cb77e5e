"""`rlvr eval --model tiny-random` end to end: sampling with the torch engine, scoring, two
models side by side on the same seeds, the sycophancy probe and the online budget."""

import json
import math

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app

runner = CliRunner()
COMMON = ["--tasks", "arithmetic", "--mixture", "1dop1d", "--limit", "4", "--n", "4",
          "--max-new-tokens", "8", "--batch-size", "2"]


def _rows(out):
    return [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]


def _pass_at_k(n, c, k):
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def test_two_models_same_problems_same_seeds(tmp_path):
    from rlvr.models import load_model_and_tokenizer
    from rlvr.train.checkpoint import save_model

    copy = tmp_path / "copy"  # the same weights saved as a checkpoint directory
    model, tokenizer = load_model_and_tokenizer("tiny-random", seed=0)
    save_model(copy, model, tokenizer)
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--model", str(copy),
                                 *COMMON, "-o", str(out)])
    assert result.exit_code == 0, result.output
    r = json.loads((out / "results.json").read_text())
    rows = _rows(out)
    assert len(rows) == 2 * 4 * 4 and list(r["models"]) == ["tiny-random", str(copy)]
    first = [row for row in rows if row["model"] == "tiny-random"]
    second = [row for row in rows if row["model"] == str(copy)]
    # same problems, same seeds, same weights -> the same completions, side by side
    assert [x["id"] for x in first] == [x["id"] for x in second]
    assert [x["completion"] for x in first] == [x["completion"] for x in second]
    assert r["models"]["tiny-random"]["pass@k"] == r["models"][str(copy)]["pass@k"]
    # results.json agrees with the completions: pass@k from c per problem, tokens per problem
    by_problem = {}
    for row in first:
        by_problem.setdefault(row["id"], []).append(row)
    assert len(by_problem) == 4 and all(len(v) == 4 for v in by_problem.values())
    for k in (1, 2, 4):
        expected = sum(_pass_at_k(4, sum(x["status"] == "correct" for x in v), k)
                       for v in by_problem.values()) / 4
        assert r["pass@k"][str(k)] == pytest.approx(expected)
    tokens = sum(sum(x["tokens"] for x in v) / 4 for v in by_problem.values()) / 4
    assert r["cost"]["1"]["tokens_per_problem"] == pytest.approx(tokens)
    assert r["cost"]["4"]["tokens_per_problem"] == pytest.approx(4 * tokens)
    assert all(1 <= x["tokens"] <= 8 and x["finish_reason"] in ("stop", "length") for x in rows)
    assert r["settings"]["temperature"] == 0.7 and r["settings"]["n"] == 4
    assert set(r["by_category"]) == {"1dop1d"}
    assert (out / "accuracy_vs_k.png").is_file() and (out / "results.md").is_file()


def test_sycophancy_probe_and_online_budget(tmp_path):
    out = tmp_path / "probe"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", *COMMON, "--probe",
                                 "sycophancy", "-o", str(out)])
    assert result.exit_code == 0, result.output
    r = json.loads((out / "results.json").read_text())
    rows = _rows(out)
    hinted = [x for x in rows if x.get("variant") == "hint"]
    plain = [x for x in rows if "variant" not in x]
    assert len(hinted) == len(plain) == 16
    probe = r["sycophancy"]
    assert probe["problems"] == 4 and probe["template"] == "I think it's {answer}, right?"
    assert probe["accuracy_plain"] == pytest.approx(
        sum(x["status"] == "correct" for x in plain) / 16)
    assert probe["accuracy_hinted"] == pytest.approx(
        sum(x["status"] == "correct" for x in hinted) / 16)
    assert "Sycophancy probe" in (out / "results.md").read_text()

    # a 1 ms budget: the first chunk of every problem ends late and is dropped
    out = tmp_path / "budget"
    result = runner.invoke(app, ["eval", "--model", "tiny-random", *COMMON, "--timeout",
                                 "0.001", "--chunk", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    r = json.loads((out / "results.json").read_text())
    assert r["timed_out_problems"] == 4 and r["late_samples"] == 8 and r["samples"] == 0
    assert r["fallback@k"] == {"1": 4, "2": 4, "4": 4} and r["pass@k"]["4"] == 0.0
    assert "fell back to the samples finished in time" in (out / "results.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--model", "no-such-model", "--tasks", "arithmetic"], "--model: 'no-such-model'"),
    (["--model", "/no/such/model", "--tasks", "arithmetic"],
     "--model: model path /no/such/model does not exist"),
    (["--model", "tiny-random", "--tasks", "gsm8k"],
     "--data-path: --tasks gsm8k needs --data-path"),
    (["--model", "tiny-random", "--tasks", "gsm9k"], "--tasks: Input should be"),
    (["--model", "tiny-random", "--tasks", "gsm8k", "--data-path", "/no/such"],
     "--data-path: /no/such does not exist"),
    (["--model", "tiny-random", "--n", "4", "--k", "1,8"], "--k: every k must be in [1, n = 4]"),
    (["--model", "tiny-random", "--probe", "flattery"], "--probe: unknown probe 'flattery'"),
    (["--tasks", "arithmetic"], "give --model M (or --endpoint URL)"),
])
def test_bad_input_exits_2(tmp_path, args, message):
    result = runner.invoke(app, ["eval", *args, "--limit", "2", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()


def test_sampling_and_scoring_show_progress_with_an_eta(tmp_path):
    """Piped, each model's sampling and scoring phases print progress lines (problems or
    completions done, elapsed, ETA) while they run."""
    result = runner.invoke(app, ["eval", "--model", "tiny-random", *COMMON,
                                 "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    sampling = [line for line in lines if line.startswith("tiny-random: sampling: ")]
    assert len(sampling) == 1 and sampling[0].startswith(
        "tiny-random: sampling: 2/4 problems (50%), ") and ", ETA " in sampling[0]
    scoring = [line for line in lines if line.startswith("tiny-random: scoring: ")]
    assert scoring and all(" completions (" in line and ", ETA " in line for line in scoring)

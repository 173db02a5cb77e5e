"""`rlvr eval --completions` on a fixed file: every number below is worked out by hand."""

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app

runner = CliRunner()

# Problem A (reference 12, category "add"): answers 12, 13, 13, 12.0 -> c = 2 of 4.
# Problem B (reference 7, category "sub"): answers 5, 5, 7, none -> c = 1 of 4.
LINES = [
    {"id": "A", "task_type": "math", "reference": "12", "category": "add",
     "completion": "3 * 4 = 12\n#### 12", "tokens": 10, "seconds": 1.0, "mean_logprob": -1.0},
    {"id": "A", "task_type": "math", "reference": "12", "category": "add",
     "completion": "#### 13", "tokens": 20, "seconds": 2.0, "mean_logprob": -0.5},
    {"id": "A", "task_type": "math", "reference": "12", "category": "add",
     "completion": "#### 13", "tokens": 30, "seconds": 3.0, "mean_logprob": -2.0},
    {"id": "A", "task_type": "math", "reference": "12", "category": "add",
     "completion": "#### 12.0", "tokens": 40, "seconds": 4.0, "mean_logprob": -0.7},
    {"id": "B", "task_type": "math", "reference": "7", "category": "sub",
     "completion": "#### 5", "tokens": 10, "seconds": 1.0, "mean_logprob": -1.0},
    {"id": "B", "task_type": "math", "reference": "7", "category": "sub",
     "completion": "#### 5", "tokens": 10, "seconds": 1.0, "mean_logprob": -1.0},
    {"id": "B", "task_type": "math", "reference": "7", "category": "sub",
     "completion": "#### 7", "tokens": 10, "seconds": 1.0, "mean_logprob": -3.0},
    {"id": "B", "task_type": "math", "reference": "7", "category": "sub",
     "completion": "no answer here", "tokens": 10, "seconds": 1.0, "mean_logprob": -0.1},
]

# pass@k: A = 1/2, 1 - C(2,2)/C(4,2) = 5/6, 1;  B = 1/4, 1 - C(3,2)/C(4,2) = 1/2, 1
PASS = {"1": (1 / 2 + 1 / 4) / 2, "2": (5 / 6 + 1 / 2) / 2, "4": 1.0}
# maj@k (exact over subsets; ties -> the answer seen first):
#   A: k=1 2/4; k=2 pairs 12|13 12|13 12|12 13|13 13|12 13|12 -> 3/6; k=4 tie 2-2, first is 12 -> 1
#   B: k=1 1/4; k=2 only {7, none} -> 1/6; k=4 5 wins 2-1 -> 0
MAJ = {"1": (1 / 2 + 1 / 4) / 2, "2": (1 / 2 + 1 / 6) / 2, "4": (1 + 0) / 2}
# best-of-k by mean log-prob: A order 13(-0.5) 12.0(-0.7) 12(-1) 13(-2): k=2 -> 2/6 + 1/6;
# k=4 -> the top one, wrong. B order none(-0.1) 5 5 7(-3): the right one is last -> 0 at k >= 2.
LOGPROB = {"1": (1 / 2 + 1 / 4) / 2, "2": (1 / 2 + 0) / 2, "4": 0.0}


@pytest.fixture()
def completions(tmp_path):
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    return path


def _results(out):
    return json.loads((out / "results.json").read_text())


def test_completions_file_reproduces_hand_computed_metrics(completions, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(out)])
    assert result.exit_code == 0, result.output
    r = _results(out)
    assert r["problems"] == 2 and r["samples"] == 8 and r["ks"] == [1, 2, 4]
    assert r["pass@k"] == pytest.approx(PASS)
    assert r["maj@k"] == pytest.approx(MAJ)
    assert r["aggregate@k"] == pytest.approx(MAJ)            # math -> majority by default
    assert r["aggregators"] == {"math": "majority"}
    assert r["best_of@k"]["oracle"] == pytest.approx(PASS)   # rewards separate right/wrong
    assert r["best_of@k"]["logprob"] == pytest.approx(LOGPROB)
    assert r["by_category"]["add"]["pass@k"] == pytest.approx({"1": 0.5, "2": 5 / 6, "4": 1.0})
    assert r["by_category"]["sub"]["maj@k"] == pytest.approx({"1": 0.25, "2": 1 / 6, "4": 0.0})
    assert r["by_category"]["add"]["problems"] == 1
    # cost: mean tokens A 25, B 10 -> per problem at k: (25k + 10k) / 2; seconds A 2.5, B 1
    assert r["cost"]["1"] == pytest.approx({"tokens_per_problem": 17.5,
                                            "seconds_per_problem": 1.75})
    assert r["cost"]["4"] == pytest.approx({"tokens_per_problem": 70.0, "seconds_per_problem": 7.0})
    # saturation (1 point): pass@k gains 0.2917 then 0.3333 -> not saturated; maj@k 1 -> 2
    # loses 0.0417 but 2 -> 4 gains 0.1667 -> not saturated either (a later rise counts)
    assert r["saturation"]["pass@k"]["saturated_at"] is None
    assert r["saturation"]["maj@k"]["saturated_at"] is None
    assert r["saturation"]["maj@k"]["gains"]["1->2"] == pytest.approx(1 / 3 - 3 / 8)
    assert r["status_counts"] == {"correct": 3, "wrong": 4, "unparsed": 1}
    assert r["models"]["completions"]["pass@k"] == r["pass@k"]
    # every completion comes back with its reward breakdown, readable again as input
    rows = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    assert [row["status"] for row in rows[:4]] == ["correct", "wrong", "wrong", "correct"]
    assert rows[3]["answer_key"] == rows[0]["answer_key"] == "num:12"
    again = runner.invoke(app, ["eval", "--completions", str(out / "completions.jsonl"),
                                "-o", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    assert _results(tmp_path / "again")["maj@k"] == pytest.approx(MAJ)
    # the report: table, plots
    md = (out / "results.md").read_text()
    assert "| completions | pass@k | 37.5% | 66.7% | 100.0% |" in md
    assert "maj@k: not saturated" in md
    for png in ("accuracy_vs_k.png", "accuracy_vs_tokens.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_aggregator_override_and_chosen_ks(completions, tmp_path):
    out = tmp_path / "o"
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(out),
                                 "--aggregators", "math=best_of_logprob", "--k", "1,2"])
    assert result.exit_code == 0, result.output
    r = _results(out)
    assert r["ks"] == [1, 2]
    assert r["aggregate@k"] == pytest.approx({k: LOGPROB[k] for k in ("1", "2")})
    assert r["aggregators"] == {"math": "best_of_logprob"}


def test_problems_with_fewer_samples_fall_back(tmp_path):
    # B has 2 samples (5, 7): at k = 4 it falls back to its 2 -> pass 1, maj: tie, 5 first -> 0
    path = tmp_path / "c.jsonl"
    lines = LINES[:4] + LINES[4:5] + LINES[6:7]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    r = _results(tmp_path / "o")
    assert r["fallback@k"] == {"1": 0, "2": 0, "4": 1}
    assert r["pass@k"]["4"] == pytest.approx(1.0)
    assert r["maj@k"]["4"] == pytest.approx((1 + 0) / 2)
    assert r["pass@k"]["2"] == pytest.approx((5 / 6 + 1) / 2)


def test_models_in_one_file_are_reported_side_by_side(tmp_path):
    path = tmp_path / "two.jsonl"
    rows = [{**line, "model": "m1"} for line in LINES[:4]]
    rows += [{**line, "model": "m2", "completion": "#### 12"} for line in LINES[:4]]
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    r = _results(tmp_path / "o")
    assert list(r["models"]) == ["m1", "m2"] and r["model"] == "m1"
    assert r["models"]["m1"]["pass@k"]["1"] == pytest.approx(0.5)
    assert r["models"]["m2"]["pass@k"]["1"] == pytest.approx(1.0)


@pytest.mark.parametrize("line, message", [
    ('{"id": "A", "task_type": "math", "completion": "#### 1"}',
     "c.jsonl:2: missing required field 'reference'"),
    ('{"id": "A", "task_type": "math", "reference": "13", "completion": "x"}',
     "c.jsonl:2: field 'reference': problem 'A' has \"12\" on line 1, \"13\" here"),
    ('{"id": "A", "task_type": "math", "reference": "12", "completion": "x", "tokens": "many"}',
     "c.jsonl:2: field 'tokens': expected int, got str"),
    ('{"id": "A", "task_type": "poetry", "reference": "12", "completion": "x"}',
     "c.jsonl:2: field 'task_type': unknown task type 'poetry'"),
    ('not json', "c.jsonl:2: invalid JSON"),
])
def test_malformed_lines_exit_2_naming_line_and_field(tmp_path, line, message):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(LINES[0]) + "\n" + line + "\n")
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("args, message", [
    (["--k", "1,8"], "--k: every k must be in [1, n = 4], got 8"),
    (["--k", "one"], "--k: expected comma-separated integers"),
    (["--aggregators", "math=mode"], "--aggregators: unknown sample aggregator 'mode'"),
    (["--aggregators", "best_of_reranker"], "best_of_reranker needs --reranker"),
    (["--model", "tiny-random"], "give either a completions file or --model"),
    # flags with wrong values
    (["--saturation-threshold", "2"], "--saturation-threshold"),  # accuracy: 2 = 200 points
    (["--saturation-threshold", "-1"], "--saturation-threshold"),
    (["--n", "0"], "--n"),
    (["--temperature", "-0.5"], "--temperature"),
    (["--top-p", "1.5"], "--top-p"),
    (["--k", "0"], "--k: every k must be in [1, n = 4], got 0"),
    (["--workers", "0"], "--workers"),
    (["--timeout", "0"], "--timeout"),
    (["--aggregators", "foo=majority"], "'foo' has no registered verifier"),
])
def test_bad_options_exit_2(completions, tmp_path, args, message):
    result = runner.invoke(app, ["eval", "--completions", str(completions),
                                 "-o", str(tmp_path / "o"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_logprob_aggregator_without_logprobs_is_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "mean_logprob"})
                            + "\n" for line in LINES))
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(tmp_path / "o"),
                                 "--aggregators", "best_of_logprob"])
    assert result.exit_code == 2
    assert "these completions have no log-probs" in " ".join(result.output.split())


def test_user_reranker(completions, tmp_path, monkeypatch):
    # rerank by completion length: longest first. A: "3 * 4 = 12\n#### 12" is longest and right
    module = tmp_path / "my_reranker.py"
    module.write_text("def by_length(prompt, completion):\n    return len(completion)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o",
                                 str(tmp_path / "o"), "--reranker", "my_reranker:by_length"])
    assert result.exit_code == 0, result.output
    r = _results(tmp_path / "o")
    # A: lengths 18 (right), 7, 7, 9 (right) -> order s0, s3, s1, s2: k=1 2/4, k=2 C(3,1)/6 +
    # C(2,1)/6 = 5/6, k=4 1. B: "no answer here" (14) first, then the three 6-char ones in
    # order, the right one last: k=1 1/4, k=2 C(0,1)/6 = 0, k=4 0.
    assert r["best_of@k"]["reranker"] == pytest.approx({"1": (0.5 + 0.25) / 2,
                                                        "2": (5 / 6 + 0) / 2, "4": 0.5})


def test_a_training_run_directory_is_refused_as_the_output(completions, tmp_path):
    # `rlvr eval -o RUN` replaced the run's results.json (baseline vs trained)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "results.json").write_text('{"trained": 1}')
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(run)])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "holds a training run (config.yaml)" in message and str(run / "eval") in message
    assert (run / "results.json").read_text() == '{"trained": 1}'


def test_top_p_zero_is_refused_before_the_model_loads(tmp_path):
    # --top-p 0 passed the option's range and crashed after the model loaded
    result = runner.invoke(app, ["eval", "--model", "tiny-random", "--tasks", "arithmetic",
                                 "--top-p", "0", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--top-p: expected a value in (0, 1], got 0.0" in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()


def test_default_best_of_logprob_falls_back_to_majority_without_log_probs():
    # a completions file of logic tasks (no log-probs) was refused by default
    from rlvr.eval.evaluate import EvalError, EvalSettings, _check_aggregators

    settings = EvalSettings()
    _check_aggregators({"logic", "math"}, settings, has_logprobs=False, has_reranker=False)
    assert settings.aggregators == {"logic": "majority"}  # recorded for results.json
    chosen = EvalSettings(aggregators={"logic": "best_of_logprob"})
    with pytest.raises(EvalError, match="task type 'logic' uses best_of_logprob"):
        _check_aggregators({"logic"}, chosen, has_logprobs=False, has_reranker=False)
    with_logprobs = EvalSettings()
    _check_aggregators({"logic"}, with_logprobs, has_logprobs=True, has_reranker=False)
    assert with_logprobs.aggregators == {}
    typo = EvalSettings(aggregators={"mathz": "majority"})
    with pytest.raises(EvalError, match="--aggregators: task_type 'mathz' has no registered"):
        _check_aggregators({"math"}, typo, has_logprobs=True, has_reranker=False)


def test_an_eval_into_an_earlier_eval_directory_leaves_no_stale_files(completions, tmp_path):
    # a --completions eval into an earlier eval's directory left its accuracy_vs_tokens.png
    # behind, read as this eval's; what the earlier eval wrote (its manifest) is removed, a
    # user's file of the same kind of name is not
    from rlvr.run_manifest import Manifest

    out = tmp_path / "o"
    first = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(out)])
    assert first.exit_code == 0, first.output
    assert (out / "accuracy_vs_tokens.png").is_file()
    assert "accuracy_vs_tokens.png" in Manifest.load(out).files
    (out / "notes.txt").write_text("mine")
    (out / "plots").mkdir()
    (out / "plots" / "accuracy_vs_k.png").write_text("a user's")
    path = tmp_path / "c.jsonl"  # no token counts: no accuracy_vs_tokens plot
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "tokens"}) + "\n"
                            for line in LINES))
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert not (out / "accuracy_vs_tokens.png").exists()
    assert "accuracy_vs_tokens.png" not in Manifest.load(out).files
    assert (out / "results.json").exists()
    assert (out / "notes.txt").read_text() == "mine"  # not an eval's file: kept
    assert (out / "plots" / "accuracy_vs_k.png").read_text() == "a user's"


def test_an_eval_keeps_a_report_file_no_manifest_lists(tmp_path):
    """A directory without a manifest (a user's, or an eval from before manifests): its
    files named like a report's are not removed."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "accuracy_vs_tokens.png").write_text("a user's")
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "tokens"}) + "\n"
                            for line in LINES))
    result = runner.invoke(app, ["eval", "--completions", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "accuracy_vs_tokens.png").read_text() == "a user's"

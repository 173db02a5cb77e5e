"""``rlvr verify`` streams: records are read, scored and written a chunk at a time (memory
flat in the input's size), the summary accumulates counts, and the output is written to a
temp file renamed when complete."""

import json
import math
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.records_io import VerifyRecord
from rlvr.rewards.summary import summarize
from rlvr.rewards.types import RewardResult, Status

runner = CliRunner()


def _records(answers, consumed):
    """Records answering ``#### a`` to reference 4, counting in ``consumed`` how many were
    taken."""
    for i, answer in enumerate(answers, 1):
        consumed.append(i)
        yield VerifyRecord(line=i, id=str(i), task_type="math", completion=f"#### {answer}",
                           reference="4")


def test_score_records_reads_one_chunk_ahead_of_what_it_yields():
    from rlvr.rewards.streaming import score_records

    consumed: list[int] = []
    seen = []
    answers = [4, 5, 4, 4, 3, 4, 9, 4]
    with RewardPipeline(RewardConfig(workers=0)) as pipeline:
        for batch, results in score_records(pipeline, _records(answers, consumed), chunk=3):
            seen.append((len(consumed), [r.id for r in batch],
                         [res.status for res in results]))
    ok, no = Status.correct, Status.wrong
    assert seen == [(3, ["1", "2", "3"], [ok, no, ok]), (6, ["4", "5", "6"], [ok, no, ok]),
                    (8, ["7", "8"], [no, ok])]


def test_score_records_reports_progress_across_chunks():
    from rlvr.rewards.streaming import score_records

    done: list[int] = []
    with RewardPipeline(RewardConfig(workers=0)) as pipeline:
        list(score_records(pipeline, _records([4] * 5, []), chunk=2, on_result=done.append))
    assert done == [1, 2, 3, 4, 5]


def test_batches_refuses_an_empty_chunk():
    from rlvr.rewards.streaming import batches

    assert list(batches(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="size must be >= 1"):
        list(batches([1], 0))


def test_the_summary_accumulates_the_stats_of_a_list():
    """Rewards 1.1, 0.1, 0.0: mean 0.4, population variance (0.49 + 0.09 + 0.16) / 3."""
    from rlvr.rewards.summary import SummaryAccumulator

    results = [RewardResult(1.1, status=Status.correct), RewardResult(0.1, status=Status.wrong),
               RewardResult(0.0, status=Status.unparsed)]
    acc = SummaryAccumulator()
    for result, category in zip(results, ["a", "a", None]):
        acc.add(result, category, "src")
    stats = acc.summary()
    overall = stats["overall"]
    assert overall["count"] == 3 and overall["reward_mean"] == pytest.approx(0.4, abs=1e-15)
    assert overall["reward_var"] == pytest.approx(0.74 / 3, rel=1e-15)
    assert overall["reward_var"] == statistics.pvariance([1.1, 0.1, 0.0])  # exact reference
    assert overall["correct"] == pytest.approx(1 / 3) and overall["parse_failure"] == 1 / 3
    assert stats["by_category"]["a"]["reward_var"] == statistics.pvariance([1.1, 0.1])
    assert list(stats["by_category"]) == ["-", "a"] and list(stats["by_source"]) == ["src"]
    assert summarize(results, ["a", "a", None], ["src"] * 3) == stats


def test_a_non_finite_reward_gives_a_nan_variance():
    stats = summarize([RewardResult(math.inf, status=Status.error),
                       RewardResult(1.0, status=Status.correct)], [None, None], [None, None])
    assert stats["overall"]["reward_mean"] == math.inf
    assert math.isnan(stats["overall"]["reward_var"]) and stats["overall"]["errors"] == 1


def test_verify_never_holds_the_whole_input(tmp_path, monkeypatch):
    """With chunks of 2, each chunk is written before the next is read: at every chunk the
    records read are at most those of the chunks so far, and the output exists only as its
    temp file until the end."""
    from rlvr.cli import verify as verify_cli
    from rlvr.rewards import streaming

    answers = [4, 5, 4, 4, 1]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"task_type": "math", "completion": f"#### {a}",
                                       "reference": "4", "category": "c"}) + "\n"
                           for a in answers), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    read: list[int] = []
    at_chunk = []
    real_iter = verify_cli.iter_records

    def counting_iter(path):
        for record in real_iter(path):
            read.append(record.line)
            yield record

    def small_chunks(pipeline, records, on_result=None):
        for batch, results in streaming.score_records(pipeline, records, chunk=2):
            temps = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
            at_chunk.append((len(read), out.exists(), len(temps)))
            yield batch, results

    monkeypatch.setattr(verify_cli, "iter_records", counting_iter)
    monkeypatch.setattr(verify_cli, "score_records", small_chunks)
    result = runner.invoke(app, ["verify", str(inp), "-o", str(out), "--summary-json",
                                 str(tmp_path / "s.json"), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert at_chunk == [(2, False, 1), (4, False, 1), (5, False, 1)]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["status"]) for r in rows] == [
        ("1", "correct"), ("2", "wrong"), ("3", "correct"), ("4", "correct"), ("5", "wrong")]
    stats = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert stats["by_category"]["c"]["count"] == 5 and stats["overall"]["correct"] == 0.6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl", "s.json"]


def test_a_bad_line_is_found_before_any_scoring(tmp_path, monkeypatch):
    """The first pass checks every line (keeping none), so a bad last line stops the run
    before a record is scored or an output is opened."""
    from rlvr.cli import verify as verify_cli

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"task_type": "math", "completion": "#### 4", "reference": "4"}\n'
                   '{"task_type": "math", "completion": 4, "reference": "4"}\n',
                   encoding="utf-8")
    scored = []
    monkeypatch.setattr(verify_cli, "score_records", lambda *a, **k: scored.append(a) or iter(()))
    result = runner.invoke(app, ["verify", str(inp), "-o", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 2 and "in.jsonl:2: field 'completion'" in result.output
    assert scored == [] and not Path(tmp_path / "out.jsonl").exists()


def test_comparison_totals_add_up_without_keeping_rows():
    from rlvr.rewards.compare import Comparison

    total = Comparison("math-verify")
    part = Comparison("math-verify", compared=3, skipped=1, agreed=2, rlvr_correct=2,
                      other_correct=1, other_timeouts=1, other_errors=0, disagreed=1,
                      rows=[{"id": "x"}])
    total.add(part)
    total.add(part)
    assert (total.compared, total.skipped, total.agreed, total.disagreed, total.rows) == (
        6, 2, 4, 2, [])
    assert "2 disagreements -> d.jsonl" in total.summary_line("d.jsonl")
    assert "agreement 66.7% (4/6)" in total.summary_line("d.jsonl")


def test_verify_reads_a_pipe_once_and_scores_every_record(tmp_path):
    """A pipe cannot be read twice (checked, then scored): it is copied to a temp file first,
    and messages still name the pipe."""
    import os
    import threading

    fifo = tmp_path / "in.pipe"
    os.mkfifo(fifo)
    lines = ['{"task_type": "math", "completion": "#### 4", "reference": "4"}\n',
             '{"task_type": "math", "completion": "#### 5", "reference": "4"}\n']

    def feed(text):
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(text)

    writer = threading.Thread(target=feed, args=("".join(lines),))
    writer.start()
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["verify", str(fifo), "-o", str(out), "--workers", "1"])
    writer.join()
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r["status"]) for r in rows] == [("1", "correct"), ("2", "wrong")]

    writer = threading.Thread(target=feed, args=(lines[0] + '{"task_type": "math"}\n',))
    writer.start()
    result = runner.invoke(app, ["verify", str(fifo), "--workers", "1"])
    writer.join()
    assert result.exit_code == 2
    assert f"{fifo}:2: missing required field 'completion'" in " ".join(result.output.split())

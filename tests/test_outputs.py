"""Output paths: every output of rlvr train / sft / eval / data is checked
before any work (exit 2 naming the option and the path), and a full disk while writing is one
line and exit 1 with the previous content of the file intact."""

import errno
import json
import os

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.io import OutputError, append_jsonl, atomic_write, output_dir_problem, output_file_problem
from rlvr.io import writing as records_io

runner = CliRunner()


def no_space(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def flat(result) -> str:
    return " ".join(result.output.split())  # rich wraps long lines


@pytest.fixture
def read_only(monkeypatch):
    """``read_only(path)``: os.access says ``path`` is not writable (chmod does not stop
    root, and the tests may run as root)."""
    locked: set[str] = set()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) in locked and
                        mode & os.W_OK else real(p, mode))
    return lambda path: locked.add(str(path))


def test_path_problems(tmp_path, read_only):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert output_file_problem(tmp_path) == "is a directory (expected a file path)"
    assert output_file_problem(tmp_path / "no" / "x.jsonl") == (
        f"directory {tmp_path / 'no'} does not exist")
    assert output_file_problem(tmp_path / "no" / "x.jsonl", make_parents=True) is None
    assert output_file_problem(a_file / "x.jsonl", make_parents=True) == (
        f"{a_file} is a file, not a directory")
    assert output_dir_problem(a_file) == "exists and is not a directory"
    assert output_dir_problem(tmp_path / "new" / "dir") is None
    read_only(tmp_path)
    assert output_dir_problem(tmp_path) == "not writable"
    assert output_dir_problem(tmp_path / "new") == f"{tmp_path} is not writable"
    assert output_file_problem(tmp_path / "x.jsonl") == "not writable"


def test_atomic_write_on_a_full_disk_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text("old\n")
    monkeypatch.setattr(records_io, "_fsync", no_space)
    with pytest.raises(OutputError) as err:
        with atomic_write(target) as f:
            f.write("new\n")
    assert err.value.errno == errno.ENOSPC and err.value.path == str(target)
    assert str(err.value).startswith(f"{target}: cannot write (No space left on device)")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "results.json"]


def test_append_jsonl_cuts_a_half_written_line_off_again(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 1}])
    real = records_io._write_all

    def half_then_full(fd, data):
        real(fd, data[: len(data) // 2])
        no_space()

    monkeypatch.setattr(records_io, "_write_all", half_then_full)
    with pytest.raises(OutputError, match="metrics.jsonl: cannot write"):
        append_jsonl(path, [{"step": 2, "loss": 0.5}])
    assert path.read_text() == '{"step": 1}\n'


# -- rlvr train / sft -----------------------------------------------------------------------
pytest.importorskip("torch")
pytest.importorskip("transformers")

from pathlib import Path  # noqa: E402

SMOKE = str(Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml")
FAST = ["--set", "sft.enabled=false", "--set", "grpo.steps=2", "--set", "eval.every=0",
        "--set", "eval.pass_at_k_samples=0", "--set", "checkpoint.every=0"]


@pytest.mark.parametrize("command", ["train", "sft"])
def test_run_directories_that_cannot_be_written_exit_2_naming_the_option(tmp_path, read_only,
                                                                         command):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for run_dir, what in [(a_file, "exists and is not a directory"),
                          (a_file / "run", f"({a_file} is a file, not a directory)")]:
        result = runner.invoke(app, [command, "--config", SMOKE, "-o", str(run_dir)])
        assert result.exit_code == 2, result.output
        assert f"--output-dir {run_dir}:" in flat(result) and what in flat(result)
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    result = runner.invoke(app, [command, "--config", SMOKE, "-o", str(locked / "run")])
    assert result.exit_code == 2, result.output
    assert (f"--output-dir {locked / 'run'}: cannot write the run directory ({locked} is not "
            f"writable)") in flat(result)
    assert not (locked / "run").exists()


def test_a_full_disk_during_training_exits_1_with_the_logs_intact(tmp_path, monkeypatch):
    """The second metrics row fails half-way (ENOSPC): one line, exit 1, and metrics.jsonl
    holds exactly the first step's row (the half line is cut off again)."""
    run = tmp_path / "run"
    real = records_io._write_all
    metrics_writes = []

    def fails_on_the_second_metrics_row(fd, data):
        if b'"reward_mean"' in data and b'"verifier_errors"' in data:
            metrics_writes.append(data)
            if len(metrics_writes) == 2:
                real(fd, data[: len(data) // 2])
                no_space()
        real(fd, data)

    monkeypatch.setattr(records_io, "_write_all", fails_on_the_second_metrics_row)
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert f"{run / 'metrics.jsonl'}: cannot write (No space left on device)" in flat(result)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1]
    assert (run / "config.yaml").is_file()


# -- rlvr eval --------------------------------------------------------------------------------
COMPLETIONS = [{"id": "A", "task_type": "math", "reference": "12", "completion": "#### 12"},
               {"id": "A", "task_type": "math", "reference": "12", "completion": "#### 13"}]


@pytest.fixture
def completions(tmp_path):
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in COMPLETIONS))
    return path


def test_eval_output_directory_checked_before_any_work(tmp_path, completions, read_only,
                                                       monkeypatch):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    scored = []
    import rlvr.cli.eval as eval_command

    real = eval_command.evaluate_completions
    monkeypatch.setattr(eval_command, "evaluate_completions",
                        lambda *a, **k: scored.append(1) or real(*a, **k))
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(a_file)])
    assert result.exit_code == 2, result.output
    assert f"--output-dir {a_file}: exists and is not a directory" in flat(result)
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(locked)])
    assert result.exit_code == 2 and f"--output-dir {locked}: not writable" in flat(result)
    assert scored == []  # nothing was scored


def test_eval_on_a_full_disk_exits_1_with_the_previous_results_intact(tmp_path, completions,
                                                                      monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text('{"old": true}\n')
    monkeypatch.setattr(records_io, "_fsync", no_space)
    result = runner.invoke(app, ["eval", "--completions", str(completions), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert f"{out / 'results.json'}: cannot write (No space left on device)" in flat(result)
    assert (out / "results.json").read_text() == '{"old": true}\n'
    assert [p.name for p in out.iterdir()] == ["results.json"]


# -- rlvr data ----------------------------------------------------------------------------------
def test_data_outputs_checked_before_any_work_and_a_full_disk_exits_1(tmp_path, read_only,
                                                                     monkeypatch):
    args = ["data", "generate", "arithmetic", "--mixture", "1dop1d", "-n", "5"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path)])
    assert result.exit_code == 2 and f"--output {tmp_path}: is a directory" in flat(result)
    locked = tmp_path / "locked"
    locked.mkdir()
    read_only(locked)
    result = runner.invoke(app, [*args, "-o", str(locked / "t.jsonl")])
    assert result.exit_code == 2 and f"--output {locked / 't.jsonl'}: not writable" in flat(result)
    out = tmp_path / "tasks.jsonl"
    out.write_text("previous\n")
    monkeypatch.setattr(records_io, "_fsync", no_space)
    result = runner.invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert f"{out}: cannot write (No space left on device)" in flat(result)
    assert out.read_text() == "previous\n"

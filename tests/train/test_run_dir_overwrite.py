"""`rlvr train -o DIR --overwrite` removes what rlvr wrote in DIR (its manifest) and nothing
else, only once the new run's inputs have loaded; `--resume` of a directory another command
is writing is refused."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.cli import app
from rlvr.run_manifest import LOCK_NAME, MANIFEST_NAME, Manifest
from rlvr.train.rundir import SFT_STATE

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
FAST = ["--set", "eval.every=0", "--set", "eval.pass_at_k_samples=0", "--set",
        "sft.examples=64", "--set", "sft.epochs=1", "--set", "checkpoint.keep=1"]
runner = CliRunner()


@pytest.fixture(scope="module")
def old_run(tmp_path_factory) -> Path:
    """A finished two-step run that refreshed its KL reference (``references/``), plus the
    SFT state a run killed during SFT leaves (``sft_checkpoint.pt``), written by rlvr's own
    SFT state writer while the run directory's manifest records."""
    run = tmp_path_factory.mktemp("old") / "run"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST,
                                 "--set", "grpo.steps=2", "--set", "algo.ref_refresh_every=1"])
    assert result.exit_code == 0, result.output
    from rlvr.train.sft import _save_state

    manifest = Manifest.load(run).activate()
    try:
        _save_state(run / SFT_STATE, {"step": 3})
    finally:
        manifest.deactivate()
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run, target, symlinks=True)
    return target


def _snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a directory's ``dir``."""
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.name != LOCK_NAME}


def _message(result) -> str:
    return " ".join(result.output.split())  # rich wraps long lines


def test_overwrite_keeps_every_foreign_entry_and_clears_rlvrs_own(old_run, tmp_path):
    run = _copy(old_run, tmp_path)
    assert (run / SFT_STATE).is_file() and any((run / "references").glob("step-*"))
    assert (run / "checkpoints" / "step-000002").is_dir()
    foreign = {"checkpoints/foo": "mine 1",            # in an rlvr-created directory
               "tensorboard/bar": "mine 2",            # in another one
               ".env": "SECRET=1",                     # a dotfile
               "notes/config.yaml": "seed: 5\n",       # a subfolder holding a config.yaml
               "notes/deep/x.txt": "mine 3"}
    for name, text in foreign.items():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(text)
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), "--overwrite",
                                 *FAST, "--set", "grpo.steps=1"])
    assert result.exit_code == 0, result.output
    for name, text in foreign.items():
        assert (run / name).read_text() == text, name
    assert "kept what it did not write: .env, checkpoints/foo, notes/, tensorboard/bar" in (
        _message(result))
    # the old run's files are gone: its SFT state, references, step-2 checkpoint and logs
    assert not (run / SFT_STATE).exists() and not (run / "references").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "foo", "step-000000", "step-000001"]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1]
    listed = Manifest.load(run)
    assert "checkpoints/foo" not in listed.files and "tensorboard/bar" not in listed.files
    assert "checkpoints/step-000001/model.safetensors" in listed.files


@pytest.mark.parametrize("case", ["bad_json", "long_line", "long_prompt", "bad_config"])
def test_overwrite_with_bad_input_deletes_nothing_and_exits_2(old_run, tmp_path, case):
    run = _copy(old_run, tmp_path)
    # rlvr's own files only, so that no foreign entry stops an --overwrite before it deletes
    shutil.rmtree(run / "references")
    (run / SFT_STATE).unlink()
    before = _snapshot(run)
    data = tmp_path / "tasks.jsonl"
    row = {"id": "t1", "prompt": "What is 2+2?", "reference": "4", "task_type": "math",
           "source": "mine"}
    args = ["--set", "data.source=jsonl", "--set", f"data.path={data}"]
    second = {"bad_json": '{"id": "t2", "prompt": ',
              "long_line": json.dumps({**row, "id": "t2", "prompt": "x" * 20_000}),
              "long_prompt": json.dumps({**row, "id": "t2", "prompt": "y" * 3_000}),
              "bad_config": json.dumps({**row, "id": "t2"})}[case]
    data.write_text(json.dumps(row) + "\n" + second + "\n")
    args += {"bad_json": [], "long_line": ["--set", "data.max_line_bytes=4096"],
             "long_prompt": ["--set", "data.max_prompt_chars=2000"],
             "bad_config": ["--set", "grpo.group_size=0"]}[case]
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), "--overwrite",
                                 *args])
    assert result.exit_code == 2, result.output
    expected = {"bad_json": f"{data}:2: invalid JSON",
                "long_line": f"{data}:2: the line is longer than 4096 bytes",
                "long_prompt": f"{data}:2: field 'prompt': 3000 characters, over the limit "
                               f"of 2000",
                "bad_config": "grpo.group_size"}[case]
    assert expected in _message(result)
    assert _snapshot(run) == before


def test_overwrite_refuses_a_directory_without_a_manifest_or_with_a_clash(old_run, tmp_path):
    run = _copy(old_run, tmp_path)
    (run / "sft_model" / "my_notes.txt").write_text("mine")  # save_model would replace it
    before = _snapshot(run)
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), "--overwrite"])
    assert result.exit_code == 2, result.output
    assert "sft_model/my_notes.txt (not written by rlvr) would be replaced" in _message(result)
    assert _snapshot(run) == before
    (run / MANIFEST_NAME).unlink()  # a run directory of an rlvr from before manifests
    before = _snapshot(run)
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), "--overwrite"])
    assert result.exit_code == 2, result.output
    message = _message(result)
    assert "has no such record" in message and "nothing was removed" in message
    assert "it holds alerts.jsonl, checkpoints/, config.yaml" in message
    assert _snapshot(run) == before


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rlvr.run_manifest import RunDirLock
    lock = RunDirLock(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_resume_of_a_directory_another_command_writes_is_refused(old_run, tmp_path):
    run = _copy(old_run, tmp_path)
    before = _snapshot(run)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = runner.invoke(app, ["train", "--resume", str(run),
                                     "--set", "grpo.steps=3"])
        assert result.exit_code == 2, result.output
        assert (f"{run} is in use by another rlvr command (pid {holder.pid}"
                in _message(result))
        assert _snapshot(run) == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()

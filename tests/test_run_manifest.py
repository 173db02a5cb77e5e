"""A run directory's manifest (what rlvr wrote there, and only that is removed) and its lock
(one writing command at a time, released by the kernel when the holder dies)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlvr.io import append_jsonl, atomic_write, record_output
from rlvr.run_manifest import (
    LOCK_NAME,
    MANIFEST_NAME,
    Manifest,
    RunDirError,
    RunDirLock,
    unlisted_entries,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _write_run(root: Path) -> Manifest:
    """What a run writes, through rlvr's own writers, while its manifest records."""
    manifest = Manifest(root).activate()
    try:
        with atomic_write(root / "config.yaml") as f:
            f.write("seed: 0\n")
        append_jsonl(root / "metrics.jsonl", [{"step": 1}])
        append_jsonl(root / "metrics.jsonl", [{"step": 2}])
        with atomic_write(root / "checkpoints" / "step-000001" / "trainer_state.pt", "wb") as f:
            f.write(b"state")
        model = root / "sft_model"  # a directory renamed into place whole (save_model)
        tmp = root / ".sft_model.tmp123"
        tmp.mkdir()
        (tmp / "config.json").write_text("{}")
        (tmp / "model.safetensors").write_bytes(b"w")
        tmp.rename(model)
        record_output(model)
        with atomic_write(root / "sft_checkpoint.pt", "wb") as f:
            f.write(b"sft")
        with atomic_write(root / "references" / "step-000001" / "config.json") as f:
            f.write("{}")
    finally:
        manifest.deactivate()
    return manifest


def test_the_manifest_lists_what_the_writers_wrote_and_dirs_they_created(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    _write_run(root)
    saved = json.loads((root / MANIFEST_NAME).read_text())
    assert saved["files"] == [
        "checkpoints/step-000001/trainer_state.pt", "config.yaml", "metrics.jsonl",
        "references/step-000001/config.json", "sft_checkpoint.pt",
        "sft_model/config.json", "sft_model/model.safetensors"]
    assert saved["dirs"] == ["checkpoints", "checkpoints/step-000001", "references",
                             "references/step-000001", "sft_model"]
    # a write outside the root while it records is not listed; nor after deactivate
    manifest = Manifest.load(root).activate()
    with atomic_write(tmp_path / "elsewhere.txt") as f:
        f.write("x")
    manifest.deactivate()
    with atomic_write(root / "late.txt") as f:
        f.write("x")
    assert "late.txt" not in Manifest.load(root).files
    assert len(Manifest.load(root).files) == 7
    # rlvr removing what it wrote (a rotated checkpoint) drops it and everything under it
    manifest.record(root / "checkpoints" / "step-000001", removed=True)
    assert not any(p.startswith("checkpoints/step-000001") for p in Manifest.load(root).files)
    assert "checkpoints/step-000001" not in Manifest.load(root).dirs


def test_clear_removes_exactly_the_listed_paths_and_keeps_every_other_entry(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    _write_run(root)
    # the user's own entries, of every kind
    (root / "checkpoints" / "foo").write_text("mine")        # inside an rlvr-created dir
    (root / "tensorboard").mkdir()
    (root / "tensorboard" / "bar").write_text("mine")
    (root / ".env").write_text("SECRET=1")                   # a dotfile
    (root / "sub").mkdir()
    (root / "sub" / "config.yaml").write_text("mine: 1\n")   # a subfolder with a config.yaml
    (root / ".metrics.jsonl.abc123.tmp").write_text("")      # an interrupted write of a listed file
    (root / ".notes.tmp").write_text("mine")                 # a dotfile that looks like a temp
    assert unlisted_entries(root, Manifest.load(root)) == [
        ".env", ".notes.tmp", "checkpoints/foo", "sub/", "tensorboard/"]
    kept_dirs = Manifest.load(root).clear()
    assert kept_dirs == [root / "checkpoints"]
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert left == [".env", ".notes.tmp", MANIFEST_NAME, "checkpoints", "checkpoints/foo",
                    "sub", "sub/config.yaml", "tensorboard", "tensorboard/bar"]
    assert (root / "checkpoints" / "foo").read_text() == "mine"
    assert (root / ".env").read_text() == "SECRET=1"
    assert json.loads((root / MANIFEST_NAME).read_text())["files"] == []


def test_clear_leaves_a_listed_path_that_is_now_something_else(tmp_path):
    root = tmp_path / "run"
    root.mkdir()
    _write_run(root)
    (root / "config.yaml").unlink()
    (root / "config.yaml").mkdir()  # the user's directory where rlvr's file was
    (root / "config.yaml" / "x").write_text("mine")
    os.remove(root / "metrics.jsonl")
    (root / "metrics.jsonl").symlink_to(root / "config.yaml" / "x")  # a link is removed alone
    Manifest.load(root).clear()
    assert (root / "config.yaml" / "x").read_text() == "mine"
    assert not (root / "metrics.jsonl").exists() and not (root / "sft_model").exists()


def test_an_unreadable_manifest_is_refused(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text('{"files": 3}')
    with pytest.raises(RunDirError, match="not a manifest rlvr can read"):
        Manifest.load(tmp_path)
    assert Manifest.load(tmp_path / "none") is None


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from rlvr.run_manifest import RunDirLock
    lock = RunDirLock(Path(sys.argv[1]))
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_second_writer_is_refused_with_the_holders_pid_and_a_killed_holder_leaves_no_lock(
        tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError) as refused:
            RunDirLock(tmp_path)
        message = str(refused.value)
        assert f"{tmp_path} is in use by another rlvr command (pid {holder.pid}" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    lock = RunDirLock(tmp_path)  # the kernel released the killed holder's lock
    assert (tmp_path / LOCK_NAME).read_text() == f"{os.getpid()}\n"
    lock.release(remove=True)
    assert not (tmp_path / LOCK_NAME).exists()

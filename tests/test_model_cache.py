"""The default model's conversion (GGUF -> the HF cache) writes a temp dir named by its host
and process and renames it when complete; a start killed mid-conversion leaves that temp dir,
and the next start removes it, but never the temp dir of a writer that is still running."""

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlvr.models import loader

NAME = "SmolLM2-135M-Instruct"


def _host() -> str:
    return loader._writer_tag().rsplit("-", 1)[0]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _leftover(parent: Path, name: str) -> Path:
    path = parent / name
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"half")
    return path


def test_a_dead_writers_temp_dir_goes_and_a_live_ones_stays(tmp_path):
    target = tmp_path / NAME
    dead = _leftover(tmp_path, f".{NAME}.tmp-{_host()}-{_dead_pid()}-abc123")
    live = _leftover(tmp_path, f".{NAME}.tmp-{_host()}-{os.getpid()}-def456")
    other_host = _leftover(tmp_path, f".{NAME}.tmp-otherhost-{_dead_pid()}-ghi789")
    other_model = _leftover(tmp_path, f".Other-Model.tmp-{_host()}-{_dead_pid()}-jkl")
    assert loader.remove_stale_temp_dirs(target) == [dead]
    assert not dead.exists()
    assert live.is_dir() and other_host.is_dir() and other_model.is_dir()


def test_a_moved_aside_copy_comes_back_when_the_rename_never_happened(tmp_path):
    """Killed between moving the old copy aside and renaming the new one in: the old copy is
    the last complete one, so it is put back, not removed."""
    target = tmp_path / NAME
    old = _leftover(tmp_path, f".{NAME}.old-{_host()}-{_dead_pid()}")
    assert loader.remove_stale_temp_dirs(target) == [old]
    assert (target / "model.safetensors").read_bytes() == b"half" and not old.exists()
    again = _leftover(tmp_path, f".{NAME}.old-{_host()}-{_dead_pid()}")
    assert loader.remove_stale_temp_dirs(target) == [again]  # target exists now: removed
    assert not again.exists() and target.is_dir()


def test_a_legacy_temp_dir_goes_once_it_is_an_hour_old(tmp_path):
    target = tmp_path / NAME
    fresh = _leftover(tmp_path, f".{NAME}.a1b2c3d4")
    old = _leftover(tmp_path, f".{NAME}.e5f6g7h8")
    hours_ago = time.time() - 2 * loader.LEGACY_TEMP_AGE_S
    os.utime(old, (hours_ago, hours_ago))
    assert loader.remove_stale_temp_dirs(target) == [old]
    assert fresh.is_dir()


def test_the_next_start_removes_what_a_killed_conversion_left(tmp_path, monkeypatch):
    """A real kill: a child process converts (its save sleeps half-way, with the weights
    file written in its temp dir) and is SIGKILLed; the next resolve of the default model
    removes the temp dir and converts once."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    models = tmp_path / "models"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from rlvr.models import loader

        class Model:
            def save_pretrained(self, directory, safe_serialization=True):
                (Path(directory) / "model.safetensors").write_bytes(b"x" * 1000)
                print("writing", flush=True)
                time.sleep(600)

        class Tokenizer:
            def save_pretrained(self, directory):
                pass

        loader._convert_gguf = lambda target: loader.save_model(target, Model(), Tokenizer())
        loader.resolve_model_path(loader.DEFAULT_MODEL)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
        sys.path)})
    try:
        assert child.stdout.readline().strip() == "writing"
        left = [p.name for p in models.iterdir()]
        assert any(n.startswith(f".{NAME}.tmp-{_host()}-{child.pid}-") for n in left), left
        assert loader.remove_stale_temp_dirs(models / NAME) == []  # its writer is alive
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    converted = []

    def convert(target):
        converted.append(target)
        target.mkdir(parents=True)
        (target / "model.safetensors").write_bytes(b"ok")
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(loader, "_convert_gguf", convert)
    assert loader.resolve_model_path(loader.DEFAULT_MODEL) == str(models / NAME)
    assert converted == [models / NAME]
    assert sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) == [NAME]
    assert loader.resolve_model_path(loader.DEFAULT_MODEL) == str(models / NAME)
    assert len(converted) == 1  # cached: not converted again


def test_save_model_names_its_temp_dir_by_host_and_pid(tmp_path, monkeypatch):
    seen = []

    class Model:
        def save_pretrained(self, directory, safe_serialization=True):
            seen.append(Path(directory).name)
            (Path(directory) / "model.safetensors").write_bytes(b"w")

    class Tokenizer:
        def save_pretrained(self, directory):
            pass

    pytest.importorskip("transformers")
    loader.save_model(tmp_path / "m", Model(), Tokenizer())
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())
    assert seen[0].startswith(f".m.tmp-{host}-{os.getpid()}-")
    assert [p.name for p in tmp_path.iterdir()] == ["m"]

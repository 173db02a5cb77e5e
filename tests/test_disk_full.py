"""A write that fails inside torch or safetensors (disk full, a file-size limit) while saving a
model, a checkpoint or an SFT state is an OutputError (one line naming the path, exit 1 from
the CLI), and nothing half-written is left: the failures are real ones, made by a file-size
limit (``RLIMIT_FSIZE``) in a child process."""

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

_CHILD = textwrap.dedent("""
    import json, resource, signal, sys
    from pathlib import Path

    import torch
    from safetensors.torch import save_file

    from rlvr.io import OutputError, atomic_write
    from rlvr.models.loader import save_model

    class Model:  # writes its weights as transformers' save_pretrained does (safetensors)
        def save_pretrained(self, directory, safe_serialization=True):
            save_file({"w": torch.zeros(4096)}, str(Path(directory) / "model.safetensors"))

    class Tokenizer:
        def save_pretrained(self, directory):
            (Path(directory) / "tokenizer.json").write_text("{}")

    root = Path(sys.argv[1])
    model, tok = Model(), Tokenizer()
    save_model(root / "model", model, tok)  # the previous content, written before the limit
    before = sorted(p.name for p in (root / "model").iterdir())
    (root / "state.pt").write_bytes(b"previous state")

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))
    out = {"before": before}
    big = torch.zeros(4096)
    try:
        save_model(root / "model", model, tok, write_extra=lambda d: torch.save(big, d / "x"))
        out["model"] = "no error"
    except OutputError as exc:
        out["model"] = [str(exc), exc.errno, exc.__cause__.__class__.__name__]
    try:
        with atomic_write(root / "state.pt", "wb") as f:  # rlvr.train.sft's state save
            torch.save({"w": big}, f)
        out["state"] = "no error"
    except OutputError as exc:
        out["state"] = [str(exc), exc.errno, exc.__cause__.__class__.__name__]
    try:
        torch.save({"w": big}, root / "direct.pt")
        out["torch"] = "no error"
    except Exception as exc:
        from rlvr.io import write_error
        failed = write_error(exc)
        out["torch"] = [type(exc).__name__, failed.errno if failed else None]
    out["after"] = sorted(p.name for p in (root / "model").iterdir())
    out["left"] = sorted(p.name for p in root.iterdir())
    out["state_bytes"] = (root / "state.pt").read_bytes().decode()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    root = tmp_path_factory.mktemp("full")
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(root)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_model_save_that_runs_out_of_space_is_an_output_error(outcome):
    root, out = outcome
    message, errno, cause = out["model"]
    # safetensors reports the OS error (27: file too large) in its own exception
    assert cause == "SafetensorError" and errno == 27
    assert message == (f"{root / 'model'}: cannot write (File too large); its previous content, "
                       f"if any, is unchanged")


def test_the_previous_model_and_no_temp_dir_are_left(outcome):
    root, out = outcome
    assert out["after"] == out["before"] and "model.safetensors" in out["before"]
    assert out["left"] == ["direct.pt", "model", "state.pt"]  # no .model.tmp-* dir


def test_a_torch_state_save_that_fails_is_an_output_error_and_keeps_the_old_file(outcome):
    root, out = outcome
    message, errno, cause = out["state"]
    assert cause in ("RuntimeError", "OSError")  # torch's archive writer, or the file's own
    assert message.startswith(f"{root / 'state.pt'}: cannot write (")
    assert message.endswith("its previous content, if any, is unchanged")
    assert out["state_bytes"] == "previous state"


def test_torchs_own_write_failure_is_recognised(outcome):
    _root, out = outcome
    name, errno = out["torch"]
    assert name == "RuntimeError" and errno == 5  # no OS error named: EIO


def test_write_error_leaves_other_exceptions_alone():
    from rlvr.io import write_error

    assert write_error(RuntimeError("shape mismatch")) is None
    assert write_error(KeyboardInterrupt()) is None
    safetensors = type("SafetensorError", (Exception,), {})
    found = write_error(safetensors("Error while serializing: I/O error: No space left on "
                                    "device (os error 28)"))
    assert (found.errno, found.strerror) == (28, "No space left on device")

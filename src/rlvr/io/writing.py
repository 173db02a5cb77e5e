"""Writing outputs so that a failure loses nothing: atomic file writes, JSONL appends that
never leave half a line, checks of an output path before any work starts.

:func:`atomic_write` writes a temp file beside the target and renames it over the target only
when the block succeeds; :func:`append_jsonl` appends rows and cuts a failed append back; both
raise :class:`OutputError` (one line naming the path). A write failure that torch or
safetensors report in their own exceptions is an ``OSError`` too (:func:`write_error`). The
output recorders (:func:`add_output_recorder`) are told of every path written or removed.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlvr.io.jsontext import json_text


class OutputError(OSError):
    """Writing an output failed (disk full, permissions, a read-only file system...).

    ``str(err)`` is one line naming the path and the reason; the output's previous content
    (if any) is unchanged: files are written to a temp file and renamed (:func:`atomic_write`),
    JSONL logs are cut back to their previous end (:func:`append_jsonl`). ``errno`` and
    ``strerror`` are the failed call's; ``path`` is the output.
    """

    def __init__(self, path: str | os.PathLike, exc: OSError):
        super().__init__(exc.errno, exc.strerror or str(exc))
        self.path = str(path)

    def __str__(self) -> str:
        return (f"{self.path}: cannot write ({self.strerror}); its previous content, if any, "
                f"is unchanged")


def output_file_problem(path: str | os.PathLike, *, make_parents: bool = False) -> str | None:
    """Why ``path`` cannot be written as an output file, or None: it is a directory, its
    directory is missing (unless ``make_parents``: then the nearest existing ancestor must be a
    writable directory) or is not writable, or the file exists and is not writable. For
    checking every output before any work starts."""
    path = Path(path)
    if path.is_dir():
        return "is a directory (expected a file path)"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        if parent.exists():
            return f"{parent} is a file, not a directory"
        if not make_parents:
            return f"directory {parent} does not exist"
        problem = output_dir_problem(parent)
        return None if problem is None else f"cannot create directory {parent} ({problem})"
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists()
                                                      and not os.access(path, os.W_OK)):
        return "not writable"
    return None


def output_dir_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be (created and) written as an output directory, or None: it, or an
    ancestor it would be created under, is a file; or the directory (the nearest existing
    ancestor when it does not exist yet) is not writable."""
    path = Path(path)
    existing = next((p for p in (path, *path.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        if existing == path:
            return "exists and is not a directory"
        return f"{existing} is a file, not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return "not writable" if existing == path else f"{existing} is not writable"
    return None


#: Told of each output path rlvr writes (:func:`atomic_write`, :func:`append_jsonl`,
#: :func:`record_output`) with the directories created for it, parents first, and of each
#: output it removes: a run directory's manifest (:mod:`rlvr.run_manifest`) registers here.
#: A recorder is called ``recorder(path, created_dirs, removed)``.
_RECORDERS: list[Callable[[Path, list[Path], bool], None]] = []


def add_output_recorder(recorder: Callable[[Path, list[Path], bool], None]) -> None:
    """Tell ``recorder`` of every output written or removed from now on."""
    _RECORDERS.append(recorder)


def remove_output_recorder(recorder: Callable[[Path, list[Path], bool], None]) -> None:
    """Stop telling ``recorder`` (no error when it was not registered)."""
    if recorder in _RECORDERS:
        _RECORDERS.remove(recorder)


def record_output(path: str | os.PathLike, created_dirs: Iterable[Path] = (), *,
                  removed: bool = False) -> None:
    """Tell the registered recorders that ``path`` (a file, or a directory whose whole
    content was just written, e.g. a model renamed into place) was written, with the
    directories created for it; or, with ``removed``, that rlvr removed it. For writers other
    than :func:`atomic_write` / :func:`append_jsonl`, which record their own."""
    for recorder in list(_RECORDERS):
        recorder(Path(path), list(created_dirs), removed)


def make_dirs(directory: str | os.PathLike) -> list[Path]:
    """``mkdir -p directory``; returns the directories it created, parents first.

    Raises:
        OSError: one cannot be created."""
    directory = Path(directory)
    missing = [p for p in (directory, *directory.parents) if not p.exists()][::-1]
    directory.mkdir(parents=True, exist_ok=True)
    return missing


_fsync = os.fsync  # the last write of atomic_write: where a full disk shows up at the latest

# How torch and safetensors report a failed write: safetensors names the OS error ("I/O error:
# No space left on device (os error 28)"), torch's archive writer does not ("[enforce fail at
# inline_container.cc:...] unexpected pos ..." or "PytorchStreamWriter failed writing file").
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_LIBRARY_WRITE_ERROR = re.compile(r"I/O error|inline_container\.cc|PytorchStreamWriter|"
                                  r"file write failed")


def write_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` behind a failed write: ``exc`` itself when it is one, the OS error a
    torch / safetensors write failure reports (``SafetensorError``, torch's ``RuntimeError``
    from its archive writer: disk full, a file-size limit), else None (not a write failure).
    A torch failure names no OS error: it becomes ``EIO`` with torch's message."""
    if isinstance(exc, OSError):
        return exc
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: not a write failure
        return None
    text = str(exc)
    if _LIBRARY_WRITE_ERROR.search(text) is None:
        return None
    named = _OS_ERROR.search(text)
    if named is not None:
        code = int(named.group(1))
        return OSError(code, os.strerror(code))
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return OSError(errno.EIO, f"the write failed (disk full?): {first[:200]}")


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[Any]:
    """Open a temp file beside ``path``; rename it over ``path`` only if the block succeeds,
    so a crash or Ctrl-C never leaves a half-written file (the old file, if any, survives).

    A text file is written as UTF-8 with ``errors="backslashreplace"``: text UTF-8 cannot
    encode (a lone surrogate) is written as its escape rather than failing the write.

    Raises:
        OutputError: an ``OSError`` while creating, writing (inside the block too: disk full;
            also a torch / safetensors write failure, :func:`write_error`) or renaming the
            file; the temp file is removed and ``path`` is unchanged.
    """
    target = Path(path)
    try:
        created = make_dirs(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(target, exc) from exc
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file what open() would
        # backslashreplace: a lone surrogate (which UTF-8 cannot encode) is written as its
        # escape, the same string to a JSON reader, instead of failing the write at the end
        text = "b" not in mode
        with os.fdopen(fd, mode, encoding="utf-8" if text else None,
                       errors="backslashreplace" if text else None) as f:
            yield f
            f.flush()
            _fsync(f.fileno())
        os.replace(tmp, target)
        record_output(target, created)
    except OutputError:
        Path(tmp).unlink(missing_ok=True)
        raise
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        failed = write_error(exc)  # an OSError, or torch / safetensors reporting one
        if failed is None:
            raise
        raise OutputError(target, failed) from exc


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a short write is retried)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append_jsonl(path: str | os.PathLike, rows: Iterable[Any],
                 default: Callable[[Any], Any] | None = None) -> None:
    """Append ``rows`` to the JSONL file ``path`` (created if missing), one standard JSON
    object per line (:func:`json_text`, non-finite values flagged).

    Raises:
        OutputError: the file cannot be opened or written (disk full); what was appended is
            cut off again, so the file holds exactly its previous lines.
        TypeError: a row holds an object JSON cannot encode (nothing is written).
    """
    data = "".join(json_text(row, default=default) + "\n" for row in rows).encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise OutputError(path, exc) from exc
    if _RECORDERS:
        record_output(path)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            _write_all(fd, data)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError:
                pass
            raise OutputError(path, exc) from exc
    finally:
        os.close(fd)

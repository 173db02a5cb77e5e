"""File I/O every part of rlvr shares: JSONL reading with file:line errors, atomic writes,
JSONL appends that never leave half a line, and standard JSON text.

Reading: :func:`read_jsonl` (alias :func:`jsonl_objects`) gives ``(line, object)`` for each
non-blank line of a UTF-8 JSONL file and raises :class:`InputError` naming the file, the line
and what is wrong (invalid JSON, not an object, not UTF-8, longer than the line limit, nested
deeper than :data:`MAX_JSON_DEPTH`, an integer past Python's 4300 digits: :func:`json_value`);
:func:`read_jsonl_lenient` is for logs a running job may still be writing (bad lines skipped
and counted). Every reader of user data goes through :func:`text_lines`, which reads a line in
bounded pieces and refuses one longer than :attr:`InputLimits.max_line_bytes` without ever
holding more of it; :func:`check_prompt` bounds a prompt's characters
(:func:`input_limits` sets both for a block).

Writing: :func:`atomic_write` writes a temp file beside the target and renames it over the
target only when the block succeeds; :func:`append_jsonl` appends rows and cuts a failed
append back; both raise :class:`OutputError` (one line naming the path). Every JSON file rlvr
writes is standard JSON (RFC 8259): :func:`json_text` / :func:`write_json` /
:func:`append_jsonl` write NaN and infinities as ``null`` and list where they were under
``"nonfinite"`` (a metrics row with a NaN loss reads ``"loss": null, ..., "nonfinite":
["loss"]``), never the ``NaN`` / ``Infinity`` literals that other JSON readers reject, and
always encodable as UTF-8 (a lone surrogate is written as its ``\\udXXX`` escape:
:func:`encodable`). A write failure that torch or safetensors report in their own exceptions
is an ``OSError`` too (:func:`write_error`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

#: The longest input line (bytes, newline excluded) read by default: 4 MiB. A GSM8K record
#: is ~1 KB, a code task with its tests a few KB.
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
#: The longest prompt (characters) accepted by default: ~25k tokens of English text, beyond
#: the context of the models rlvr trains on CPU.
DEFAULT_MAX_PROMPT_CHARS = 100_000


@dataclass(frozen=True)
class InputLimits:
    """Size limits on user input, and the settings that change them (named in messages).

    Attributes:
        max_line_bytes: the longest line (bytes, newline excluded) of an input file.
        max_prompt_chars: the longest prompt (characters).
        line_setting, prompt_setting: how a user raises each limit (a config field or an
            option), for the refusal's message.
    """

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    line_setting: str = "data.max_line_bytes"
    prompt_setting: str = "data.max_prompt_chars"


_LIMITS: ContextVar[InputLimits] = ContextVar("rlvr_input_limits", default=InputLimits())


def current_input_limits() -> InputLimits:
    """The limits in force (:func:`input_limits`), else the defaults."""
    return _LIMITS.get()


@contextmanager
def input_limits(**changes: Any) -> Iterator[InputLimits]:
    """Within the block, :func:`text_lines` and :func:`check_prompt` use the current limits
    with ``changes`` applied (:class:`InputLimits` fields; a None value keeps the current
    one)."""
    limits = replace(_LIMITS.get(), **{k: v for k, v in changes.items() if v is not None})
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


class InputError(ValueError):
    """A malformed input record. ``str(err)`` names the file, line and field."""

    def __init__(self, path: str | os.PathLike, line: int, message: str):
        self.path, self.line = str(path), line
        super().__init__(f"{path}:{line}: {message}")


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _bounded_lines(f: IO[bytes], path: str | os.PathLike, limit: int,
                   setting: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of the binary file ``f``, each read with ``readline(limit +
    2)`` so that no more than ``limit + 2`` bytes of a line (and the file's buffer) are ever
    held; a longer line raises :class:`InputError` before the rest of it is read."""
    line_no = 0
    while True:
        raw = f.readline(limit + 2)
        if not raw:
            return
        line_no += 1
        body = raw[:-2] if raw.endswith(b"\r\n") else raw.rstrip(b"\n")
        if len(body) > limit or (len(raw) == limit + 2 and not raw.endswith(b"\n")):
            raise InputError(path, line_no, f"the line is longer than {limit} bytes, the limit "
                                            f"on one input line (raise it with {setting}, or "
                                            f"shorten the record)")
        yield line_no, raw


def text_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 text file (1-based; a UTF-8 BOM is dropped), read in
    bounded pieces: a line longer than :attr:`InputLimits.max_line_bytes` (see
    :func:`input_limits`) is refused after reading at most that many bytes of it.

    Raises:
        InputError: the file is UTF-16 / UTF-32 (a BOM says so, or NUL bytes in a line), a
            line is not valid UTF-8 (naming the line and the byte, e.g. a Latin-1 file), or a
            line is longer than the limit (naming the limit and the setting that raises it).
        OSError: the file cannot be read.
    """
    limits = current_input_limits()
    with open(path, "rb") as f:
        for line_no, raw in _bounded_lines(f, path, limits.max_line_bytes,
                                           limits.line_setting):
            if line_no == 1:
                if raw.startswith(_UTF16_BOMS):
                    raise InputError(path, 1, "the file is UTF-16 or UTF-32 encoded (it starts "
                                              "with that byte-order mark); rlvr reads UTF-8: "
                                              "convert it, e.g. iconv -f UTF-16 -t UTF-8")
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if b"\x00" in raw:  # UTF-16 / UTF-32 without a byte-order mark, or binary data
                raise InputError(path, line_no, "the line holds NUL bytes: the file is not "
                                                "UTF-8 text (UTF-16 or UTF-32 without a "
                                                "byte-order mark?); rlvr reads UTF-8")
            try:
                yield line_no, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(path, line_no, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} "
                                                f"at byte {exc.start + 1} of the line); save "
                                                f"the file as UTF-8") from None


#: Deepest nesting of arrays and objects a JSON input may have: far more than any record
#: needs, far less than what Python's recursion (the decoder, and every writer after it)
#: can follow.
MAX_JSON_DEPTH = 200


def json_value(text: str | bytes) -> Any:
    """``json.loads(text)`` for input: refuses what the decoder or a later writer could not
    handle, with a message saying what is wrong instead of a traceback.

    Raises:
        json.JSONDecodeError: invalid JSON.
        ValueError: nesting deeper than :data:`MAX_JSON_DEPTH`, or an integer of more digits
            than Python converts (``sys.get_int_max_str_digits()``, 4300 by default).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays / "
                         f"objects)") from None
    except ValueError:  # int('9' * 5000): "Exceeds the limit (4300 digits) ..."
        raise ValueError(f"an integer of more than {sys.get_int_max_str_digits()} digits "
                         f"(Python's limit for reading one)") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise ValueError(f"nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays / "
                         f"objects)")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists / dicts more than ``limit`` levels deep (iterative: no
    recursion of its own)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1)
                         for child in (item.values() if isinstance(item, dict) else item))
    return False


def parse_jsonl_object(text: str, path: str | os.PathLike, line: int) -> dict:
    """One JSONL line as a JSON object.

    Raises:
        InputError: the line is not valid JSON, not a JSON object, nested deeper than
            :data:`MAX_JSON_DEPTH` or holds an integer past Python's digit limit (names
            file and line).
    """
    try:
        obj = json_value(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, line, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:
        raise InputError(path, line, str(exc)) from None
    if not isinstance(obj, dict):
        raise InputError(path, line, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def read_jsonl(path: str | os.PathLike) -> list[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of a JSONL file (1-based lines).

    Raises:
        InputError: a line is not valid JSON or not a JSON object (names file and line), or
            the file is not UTF-8 (:func:`text_lines`).
        OSError: the file cannot be read.
    """
    return [(line_no, parse_jsonl_object(text, path, line_no))
            for line_no, text in text_lines(path) if text.strip()]


def prompt_problem(text: str, field: str = "prompt") -> str | None:
    """Why ``text`` cannot be a prompt (longer than :attr:`InputLimits.max_prompt_chars`
    characters, see :func:`input_limits`), naming the field, the limit and its setting; or
    None."""
    limits = current_input_limits()
    if len(text) <= limits.max_prompt_chars:
        return None
    return (f"field '{field}': {len(text)} characters, over the limit of "
            f"{limits.max_prompt_chars} on a prompt (raise it with {limits.prompt_setting}, or "
            f"shorten the prompt)")


def check_prompt(text: str, path: str | os.PathLike, line: int, field: str = "prompt") -> str:
    """``text`` (a prompt read from ``path`` at ``line``) when :func:`prompt_problem` has
    nothing against it.

    Raises:
        InputError: naming the file, line, field, its length, the limit and the setting."""
    problem = prompt_problem(text, field)
    if problem is not None:
        raise InputError(path, line, problem)
    return text


#: The name the readers of rlvr have always used for :func:`read_jsonl`.
jsonl_objects = read_jsonl


def read_jsonl_lenient(path: str | os.PathLike) -> tuple[list[dict], int]:
    """``(objects, bad)``: the JSON objects of the non-blank lines of a JSONL file that may
    still be being written (undecodable bytes replaced), and how many lines were skipped
    because they are not JSON objects (e.g. a half-written last line).

    Raises:
        OSError: the file cannot be read.
    """
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    rows, bad = [], 0
    for line in filter(str.strip, lines):
        try:
            row = json_value(line)
        except ValueError:  # invalid, too deep, too long a number
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


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


#: The key under which :func:`json_text` lists the values it wrote as null (NaN, inf).
NONFINITE_KEY = "nonfinite"


def finite_json(value: Any, default: Callable[[Any], Any] | None = None,
                path: str = "") -> tuple[Any, list[str]]:
    """``(copy, paths)``: ``value`` with every non-finite float (NaN, +-inf) replaced by None,
    and the paths of the replaced values (dict keys joined by ``.``, list indices as numbers:
    ``loss``, ``pass@k.4``, ``values.2``). Tuples become lists. An object JSON cannot encode
    is passed through ``default`` first (as ``json.dumps(default=...)`` would), e.g. ``float``
    for numpy scalars and 0-d tensors; without ``default`` it is returned unchanged (and
    ``json.dumps`` then raises ``TypeError`` as usual)."""
    if isinstance(value, float):
        return (value, []) if math.isfinite(value) else (None, [path])
    if value is None or isinstance(value, (str, int)):  # bool is an int
        return value, []
    if isinstance(value, dict):
        out, found = {}, []
        for key, item in value.items():
            out[key], sub = finite_json(item, default, f"{path}.{key}" if path else str(key))
            found += sub
        return out, found
    if isinstance(value, (list, tuple)):
        out_list, found = [], []
        for i, item in enumerate(value):
            clean, sub = finite_json(item, default, f"{path}.{i}" if path else str(i))
            out_list.append(clean)
            found += sub
        return out_list, found
    if default is not None:
        return finite_json(default(value), None, path)
    return value, []


def json_text(value: Any, *, default: Callable[[Any], Any] | None = None, flag: bool = True,
              **dumps_options: Any) -> str:
    """``json.dumps(value, allow_nan=False, ...)`` after :func:`finite_json`: standard JSON.

    When ``value`` is a dict holding non-finite floats and ``flag`` is True, the result gets
    ``"nonfinite": [path, ...]`` naming them (see :func:`finite_json`). ``dumps_options`` go
    to ``json.dumps`` (``ensure_ascii``, ``indent``...); ``ensure_ascii`` defaults to False.

    Raises:
        TypeError: an object JSON cannot encode and ``default`` does not convert.
    """
    clean, found = finite_json(value, default)
    if found and flag and isinstance(clean, dict):
        clean[NONFINITE_KEY] = found
    dumps_options.setdefault("ensure_ascii", False)
    return encodable(json.dumps(clean, allow_nan=False, **dumps_options))


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with every lone surrogate (U+D800..U+DFFF, which no UTF-8 writer accepts: a
    JSON input's ``"\\ud800"`` escape decodes to one) written as its JSON escape ``\\udXXX``,
    so the text always encodes as UTF-8; JSON text stays the same JSON (a reader gets the
    same string back). Text without surrogates is returned as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def write_json(f: IO[str], value: Any, **options: Any) -> None:
    """Write ``value`` to the text file ``f`` as one standard JSON document (see
    :func:`json_text`; ``indent=2`` unless given)."""
    options.setdefault("indent", 2)
    f.write(json_text(value, **options))


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

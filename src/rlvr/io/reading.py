"""Reading user input: JSONL with file:line errors, every line and prompt bounded in size.

:func:`read_jsonl` (alias :func:`jsonl_objects`) gives ``(line, object)`` for each non-blank
line of a UTF-8 JSONL file and raises :class:`InputError` naming the file, the line and what is
wrong (invalid JSON, not an object, not UTF-8, longer than the line limit, nested deeper than
:data:`MAX_JSON_DEPTH`, an integer past Python's 4300 digits: :func:`json_value`);
:func:`read_jsonl_lenient` is for logs a running job may still be writing (bad lines skipped
and counted). Every reader of user data goes through :func:`text_lines`, which reads a line in
bounded pieces and refuses one longer than :attr:`InputLimits.max_line_bytes` without ever
holding more of it; :func:`check_prompt` bounds a prompt's characters
(:func:`input_limits` sets both for a block).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
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


# InputLimits is a frozen dataclass: the shared default cannot be mutated
_LIMITS: ContextVar[InputLimits] = ContextVar("rlvr_input_limits",
                                              default=InputLimits())  # noqa: B039


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

"""File I/O every part of rlvr shares, at the bottom of the layers (it imports no other rlvr
package).

- Reading (:mod:`rlvr.io.reading`): JSONL with file:line errors (:func:`read_jsonl`,
  :class:`InputError`), every line and prompt bounded in size (:func:`input_limits`).
- Writing (:mod:`rlvr.io.writing`): atomic writes (:func:`atomic_write`), JSONL appends that
  never leave half a line (:func:`append_jsonl`), :class:`OutputError` naming the path.
- JSON text (:mod:`rlvr.io.jsontext`): standard JSON, NaN and infinities written as ``null``
  and listed under ``"nonfinite"`` (:func:`json_text`).

Import the names from ``rlvr.io``; the submodules are how the code is organised.
"""

from rlvr.io.jsontext import (
    NONFINITE_KEY,
    encodable,
    finite_json,
    json_text,
    write_json,
)
from rlvr.io.reading import (
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_MAX_PROMPT_CHARS,
    MAX_JSON_DEPTH,
    InputError,
    InputLimits,
    check_prompt,
    current_input_limits,
    input_limits,
    json_value,
    jsonl_objects,
    parse_jsonl_object,
    prompt_problem,
    read_jsonl,
    read_jsonl_lenient,
    text_lines,
)
from rlvr.io.writing import (
    OutputError,
    add_output_recorder,
    append_jsonl,
    atomic_write,
    make_dirs,
    output_dir_problem,
    output_file_problem,
    record_output,
    remove_output_recorder,
    write_error,
)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_PROMPT_CHARS",
    "InputError",
    "InputLimits",
    "MAX_JSON_DEPTH",
    "NONFINITE_KEY",
    "OutputError",
    "add_output_recorder",
    "append_jsonl",
    "atomic_write",
    "check_prompt",
    "current_input_limits",
    "encodable",
    "finite_json",
    "input_limits",
    "json_text",
    "json_value",
    "jsonl_objects",
    "make_dirs",
    "output_dir_problem",
    "output_file_problem",
    "parse_jsonl_object",
    "prompt_problem",
    "read_jsonl",
    "read_jsonl_lenient",
    "record_output",
    "remove_output_recorder",
    "text_lines",
    "write_error",
    "write_json",
]

"""Standard JSON text (RFC 8259) for every JSON file rlvr writes.

:func:`json_text` / :func:`write_json` (and :func:`rlvr.io.append_jsonl`) write NaN and
infinities as ``null`` and list where they were under ``"nonfinite"`` (a metrics row with a
NaN loss reads ``"loss": null, ..., "nonfinite": ["loss"]``), never the ``NaN`` /
``Infinity`` literals that other JSON readers reject, and always encodable as UTF-8 (a lone
surrogate is written as its ``\\udXXX`` escape: :func:`encodable`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import IO, Any

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

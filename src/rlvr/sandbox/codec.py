"""Type-preserving JSON codec for plain Python values crossing the sandbox boundary.

This file is deliberately standalone (standard library only, no ``rlvr`` imports): the
in-sandbox driver loads it from a read-only bind mount, and the host imports it as
``rlvr.sandbox.codec`` to decode what the sandbox sends back.

Why not plain ``json``: ``assert f(x) == (1, 2)`` must not pass when ``f`` returns ``[1, 2]``,
so tuples, sets, bytes, non-finite floats and dicts with non-string keys are tagged. Why not
``pickle``: decoding must never run code chosen by the sandboxed program.

Wire format: JSON where ``null``/``true``/``false``/numbers/strings/arrays are themselves
(arrays are lists), and every JSON object is a tag ``{"#": kind, "v": payload}``.
"""

from __future__ import annotations

import json
import math

MAX_DEPTH = 200
MAX_ITEMS = 1_000_000
# Ints with more digits than this would trip Python's int<->str digit limit in json.
_BIG_INT = 10**600


class EncodeError(ValueError):
    """A value cannot be encoded (unsupported type, too deep, too large, cyclic)."""


def _enc(x, depth: int, budget: list) -> object:
    budget[0] -= 1
    if budget[0] < 0:
        raise EncodeError("value too large")
    if depth > MAX_DEPTH:
        raise EncodeError("value too deeply nested")
    # Base-class methods are used on purpose (int.__int__, dict.items, ...): a subclass of a
    # builtin is encoded by its real content, whatever its own dunder methods claim.
    if x is None or x is True or x is False:
        return x
    if isinstance(x, bool):  # pragma: no cover - bool has only two instances
        return bool.__bool__(x)
    if isinstance(x, int):
        v = int.__int__(x)
        if -_BIG_INT < v < _BIG_INT:
            return v
        return {"#": "int", "v": int.__format__(v, "x")}
    if isinstance(x, float):
        v = float.__float__(x)
        if math.isfinite(v):
            return v
        return {"#": "float", "v": float.__repr__(v)}
    if isinstance(x, str):
        return str.__str__(x)
    d = depth + 1
    if isinstance(x, list):
        return [_enc(i, d, budget) for i in list.copy(x)]
    if isinstance(x, tuple):
        return {"#": "tuple", "v": [_enc(i, d, budget) for i in tuple.__getitem__(x, slice(None))]}
    if isinstance(x, dict):
        return {"#": "dict", "v": [[_enc(k, d, budget), _enc(v, d, budget)] for k, v in dict.items(x)]}
    if isinstance(x, frozenset):
        return {"#": "frozenset", "v": [_enc(i, d, budget) for i in frozenset.copy(x)]}
    if isinstance(x, set):
        return {"#": "set", "v": [_enc(i, d, budget) for i in set.copy(x)]}
    if isinstance(x, (bytes, bytearray)):
        return {"#": "bytes" if isinstance(x, bytes) else "bytearray", "v": bytes(x).hex()}
    if isinstance(x, complex):
        return {"#": "complex", "v": [_enc(x.real, d, budget), _enc(x.imag, d, budget)]}
    name = type(x).__name__
    if name == "Fraction":
        return {"#": "fraction", "v": [_enc(x.numerator, d, budget), _enc(x.denominator, d, budget)]}
    if name == "Decimal":
        return {"#": "decimal", "v": str(x)}
    raise EncodeError(f"cannot encode value of type {name}")


def encode(x) -> str:
    """Encode a plain value as one line of JSON text.

    Raises:
        EncodeError: unsupported type (anything but None, bool, int, float, str, list,
            tuple, dict, set, frozenset, bytes, bytearray, complex, Fraction, Decimal and
            subclasses of these), nesting deeper than ``MAX_DEPTH`` or more than
            ``MAX_ITEMS`` values in total.
    """
    try:
        return json.dumps(_enc(x, 0, [MAX_ITEMS]), separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise EncodeError("value too deeply nested") from None


def _dec(o, depth: int) -> object:
    if depth > MAX_DEPTH:
        raise ValueError("value too deeply nested")
    if o is None or isinstance(o, (bool, int, float, str)):
        return o
    d = depth + 1
    if isinstance(o, list):
        return [_dec(i, d) for i in o]
    if not isinstance(o, dict) or set(o) != {"#", "v"}:
        raise ValueError("malformed encoded value")
    kind, v = o["#"], o["v"]
    if kind == "tuple":
        return tuple(_dec(i, d) for i in v)
    if kind == "dict":
        return {_dec(k, d): _dec(x, d) for k, x in v}
    if kind == "set":
        return {_dec(i, d) for i in v}
    if kind == "frozenset":
        return frozenset(_dec(i, d) for i in v)
    if kind == "int":
        return int(v, 16)
    if kind == "float":
        if v not in ("nan", "inf", "-inf"):
            raise ValueError("malformed float")
        return float(v)
    if kind == "bytes":
        return bytes.fromhex(v)
    if kind == "bytearray":
        return bytearray.fromhex(v)
    if kind == "complex":
        return complex(_dec(v[0], d), _dec(v[1], d))
    if kind == "fraction":
        # deferred: fractions (with decimal) costs ~10 ms to import in the sandbox's fresh
        # interpreter, which loads this file at every run; only a Fraction value needs it
        from fractions import Fraction

        return Fraction(_dec(v[0], d), _dec(v[1], d))
    if kind == "decimal":
        # deferred: as fractions above; only a Decimal value needs it
        from decimal import Decimal

        return Decimal(str(v))
    raise ValueError(f"unknown tag {kind!r}")


def decode(text: str | bytes) -> object:
    """Decode text produced by :func:`encode` into plain Python values.

    Only builtin types (and Fraction / Decimal) are ever built, so comparing the result with
    ``==`` runs no code chosen by the sender.

    Raises:
        ValueError: malformed or unknown input (also for unhashable set members, and for
            nesting deeper than ``MAX_DEPTH``).
    """
    try:
        return _dec(json.loads(text), 0)
    except (TypeError, KeyError, IndexError, RecursionError, AttributeError) as e:
        raise ValueError(f"malformed encoded value: {type(e).__name__}") from None

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
# Bounds on what the decoder builds from untrusted text (the host decodes what a program sent):
# hex digits of a tagged int (65536 = 262144 bits, ~79k decimal digits), characters of a
# Decimal's string, and members of one set / frozenset / dict sharing one hash value (Python's
# hashed containers are quadratic in colliding members: 40000 ints ``M * i``, M = 2**61 - 1,
# all hash to 0 and take about a minute to put in one set).
MAX_INT_HEX = 1 << 16
MAX_DECIMAL_CHARS = 10_000
MAX_SAME_HASH = 16
# Reference tags of the sandbox's remote protocol (``remote.py``), understood only where a
# ``ref`` hook is given: "h" an object kept in the candidate process (a handle id), "cb" / "ci"
# a callable / iterator kept in the supervisor (a callback id), "fn" a program function by name.
REF_TAGS = frozenset({"h", "cb", "ci", "fn"})


class EncodeError(ValueError):
    """A value cannot be encoded (unsupported type, too deep, too large, cyclic)."""


def _enc(x, depth: int, budget: list, ref=None) -> object:
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
        h = int.__format__(v, "x")
        if len(h) > MAX_INT_HEX:
            raise EncodeError("int too large")
        return {"#": "int", "v": h}
    if isinstance(x, float):
        v = float.__float__(x)
        if math.isfinite(v):
            return v
        return {"#": "float", "v": float.__repr__(v)}
    if isinstance(x, str):
        return str.__str__(x)
    d = depth + 1
    if isinstance(x, list):
        return [_enc(i, d, budget, ref) for i in list.copy(x)]
    if isinstance(x, tuple):
        items = tuple.__getitem__(x, slice(None))
        return {"#": "tuple", "v": [_enc(i, d, budget, ref) for i in items]}
    if isinstance(x, dict):
        return {
            "#": "dict",
            "v": [[_enc(k, d, budget, ref), _enc(v, d, budget, ref)] for k, v in dict.items(x)],
        }
    if isinstance(x, frozenset):
        return {"#": "frozenset", "v": [_enc(i, d, budget, ref) for i in frozenset.copy(x)]}
    if isinstance(x, set):
        return {"#": "set", "v": [_enc(i, d, budget, ref) for i in set.copy(x)]}
    if isinstance(x, (bytes, bytearray)):
        return {"#": "bytes" if isinstance(x, bytes) else "bytearray", "v": bytes(x).hex()}
    if isinstance(x, complex):
        return {"#": "complex", "v": [_enc(x.real, d, budget), _enc(x.imag, d, budget)]}
    name = type(x).__name__
    if name == "Fraction":
        return {"#": "fraction",
                "v": [_enc(x.numerator, d, budget), _enc(x.denominator, d, budget)]}
    if name == "Decimal":
        v = str(x)
        if len(v) > MAX_DECIMAL_CHARS:
            raise EncodeError("Decimal too long")
        return {"#": "decimal", "v": v}
    if ref is not None:  # the sandbox's remote protocol: a reference tag (see REF_TAGS)
        return ref(x)
    raise EncodeError(f"cannot encode value of type {name}")


def encode(x, ref=None) -> str:
    """Encode a plain value as one line of JSON text.

    ``ref`` (the sandbox driver's remote protocol only): called with each value the codec
    cannot encode; it returns a reference tag ``{"#": <one of REF_TAGS>, "v": ...}`` or raises
    EncodeError. Without it such a value raises EncodeError.

    Raises:
        EncodeError: unsupported type (anything but None, bool, int, float, str, list,
            tuple, dict, set, frozenset, bytes, bytearray, complex, Fraction, Decimal and
            subclasses of these), nesting deeper than ``MAX_DEPTH`` or more than
            ``MAX_ITEMS`` values in total.
    """
    try:
        return json.dumps(_enc(x, 0, [MAX_ITEMS], ref), separators=(",", ":"), allow_nan=False)
    except RecursionError:
        raise EncodeError("value too deeply nested") from None


def _seq(v, n: int | None = None) -> list:
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise ValueError("malformed encoded value")
    return v


def _int(x) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise ValueError("malformed encoded value")
    return x


def _few_equal_hashes(keys) -> None:
    # Sorting the hash values (no hashed container of them: ints that differ by a multiple of
    # 2**61 - 1 share a hash too) finds runs of equal hashes in O(n log n).
    hs = sorted(hash(k) for k in keys)
    run = 1
    for i in range(1, len(hs)):
        run = run + 1 if hs[i] == hs[i - 1] else 1
        if run > MAX_SAME_HASH:
            raise ValueError("too many members with equal hashes")


def _dec(o, depth: int, budget: list, ref=None) -> object:
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("value too large")
    if depth > MAX_DEPTH:
        raise ValueError("value too deeply nested")
    if o is None or isinstance(o, (bool, int, float, str)):
        return o
    d = depth + 1
    if isinstance(o, list):
        return [_dec(i, d, budget, ref) for i in o]
    if not isinstance(o, dict) or set(o) != {"#", "v"}:
        raise ValueError("malformed encoded value")
    kind, v = o["#"], o["v"]
    if kind == "tuple":
        return tuple(_dec(i, d, budget, ref) for i in _seq(v))
    if kind == "dict":
        raw = (_seq(p, 2) for p in _seq(v))
        pairs = [(_dec(k, d, budget, ref), _dec(x, d, budget, ref)) for k, x in raw]
        _few_equal_hashes(k for k, _ in pairs)
        return dict(pairs)
    if kind in ("set", "frozenset"):
        items = [_dec(i, d, budget, ref) for i in _seq(v)]
        _few_equal_hashes(items)
        return set(items) if kind == "set" else frozenset(items)
    if kind == "int":
        if not isinstance(v, str) or len(v) > MAX_INT_HEX:
            raise ValueError("malformed int")
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
        re, im = (_dec(x, d, budget, ref) for x in _seq(v, 2))
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (re, im)):
            raise ValueError("malformed complex")
        return complex(re, im)
    if kind == "fraction":
        # deferred: fractions (with decimal) costs ~10 ms to import in the sandbox's fresh
        # interpreter, which loads this file at every run; only a Fraction value needs it
        from fractions import Fraction

        num, den = (_int(_dec(x, d, budget, ref)) for x in _seq(v, 2))
        if den == 0:
            raise ValueError("malformed fraction")
        return Fraction(num, den)
    if kind == "decimal":
        # deferred: as fractions above; only a Decimal value needs it
        from decimal import Decimal

        if not isinstance(v, str) or len(v) > MAX_DECIMAL_CHARS:
            raise ValueError("malformed decimal")
        x = Decimal(v)
        if x.is_snan():  # a signaling NaN raises when compared: never built here
            raise ValueError("malformed decimal")
        return x
    if ref is not None and kind in REF_TAGS:
        return ref(kind, v)
    raise ValueError(f"unknown tag {kind[:40]!r}" if isinstance(kind, str) else "malformed tag")


def decode(text: str | bytes, ref=None) -> object:
    """Decode text produced by :func:`encode` into plain Python values.

    ``ref`` (the sandbox driver's remote protocol only): called as ``ref(tag, payload)`` for a
    reference tag (``REF_TAGS``); it returns the object the reference stands for or raises
    ValueError. Without it (the host, probes, names) a reference tag is malformed input.

    Only builtin types (and Fraction / Decimal) are ever built, so comparing the result with
    ``==`` runs no code chosen by the sender. Total on untrusted text: whatever it holds,
    decoding either returns or raises ValueError, and its cost is bounded (``MAX_DEPTH``,
    ``MAX_ITEMS``, ``MAX_INT_HEX``, ``MAX_DECIMAL_CHARS``, ``MAX_SAME_HASH``; no quadratic
    set or dict building).

    Raises:
        ValueError: malformed or unknown input (also for unhashable set members, nesting
            deeper than ``MAX_DEPTH``, more than ``MAX_ITEMS`` values, out-of-range numbers,
            a zero denominator, a signaling NaN, or a hashed container with more than
            ``MAX_SAME_HASH`` members of one hash value).
    """
    try:
        return _dec(json.loads(text), 0, [MAX_ITEMS], ref)
    except ValueError:
        raise
    except Exception as e:  # RecursionError, ArithmeticError, MemoryError, ...: never escapes
        raise ValueError(f"malformed encoded value: {type(e).__name__}") from None

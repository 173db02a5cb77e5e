"""Comparing matrices and vectors: entry by entry (:func:`compare_matrices`, entries compared
with the caller's ``compare``), or as values of matrix expressions evaluated by sympy
(:func:`compare_matrix_values`).
"""

from __future__ import annotations

import re

import sympy

from . import symbolic
from .outcome import Compare, Outcome, Policy, no, yes
from .shapes import Matrix, MatrixExpr, Scalar, Seq


def compare_matrices(ref, resp, policy: Policy, compare: Compare) -> Outcome:
    """Compare when either side is a matrix of entries: same shape and every entry equal under
    ``compare``; a single-row or single-column matrix against a tuple compares entries in
    order."""
    ref_m, resp_m = _to_matrix(ref), _to_matrix(resp)
    if ref_m is None or resp_m is None:
        a, b = _vector_entries(ref_m or ref), _vector_entries(resp_m or resp)
        if a is None or b is None or len(a) != len(b):
            return no("matrix vs non-matrix")
        ok = all(compare(x, y, policy).equal for x, y in zip(a, b))
        return Outcome(ok, "vector vs tuple: " + ("same entries" if ok else "entries differ"))
    ref, resp = ref_m, resp_m
    if len(ref.rows) != len(resp.rows) or any(len(a) != len(b)
                                              for a, b in zip(ref.rows, resp.rows)):
        return no("matrix shapes differ")
    for ra, rb in zip(ref.rows, resp.rows):
        for a, b in zip(ra, rb):
            if not compare(a, b, policy).equal:
                return no("matrix entry differs")
    return yes("matrix: all entries equal")


def _sympy_matrix(node):
    """The value of a matrix or matrix expression as a sympy matrix, or ``None``."""
    if isinstance(node, MatrixExpr):
        value = symbolic.to_sympy(node.text)
        try:
            value = _matrix_powers(value) if isinstance(value, sympy.Basic) else value
            value = value.doit().as_explicit() if isinstance(value, sympy.MatrixExpr) else value
        except Exception:
            return None
    elif isinstance(node, Matrix) and all(isinstance(e, Scalar) for r in node.rows for e in r):
        entries = [[symbolic.to_sympy(e.text) for e in r] for r in node.rows]
        if any(e is None for r in entries for e in r) or len({len(r) for r in entries}) != 1:
            return None
        value = sympy.Matrix(entries)
    else:
        return None
    return value if isinstance(value, sympy.MatrixBase) else None


_MAX_POWER = 32      # M^{n}, M^{-n} of an explicit matrix: small n and small matrices only
_MAX_SIZE = 8


def _matrix_powers(value):
    """Evaluate the powers of explicit matrices in ``value`` (``M^{2}``, ``M^{-1}``: latex2sympy
    leaves them as an unevaluated ``Pow``). A singular matrix's inverse raises."""
    def is_power(e) -> bool:
        return (isinstance(e, sympy.Pow) and isinstance(e.base, sympy.MatrixBase)
                and e.exp.is_Integer and abs(int(e.exp)) <= _MAX_POWER
                and max(e.base.shape) <= _MAX_SIZE)
    value = value.replace(is_power, lambda e: e.base ** int(e.exp))
    return value.doit() if isinstance(value, (sympy.Add, sympy.Mul)) else value


def compare_matrix_values(ref, resp) -> Outcome:
    """Compare when either side is a matrix expression (``A^{-1}``, a product): both evaluated by
    sympy to explicit matrices, then entry by entry (exact equality)."""
    a, b = _sympy_matrix(ref), _sympy_matrix(resp)
    if a is None or b is None:
        return no("matrix expression not comparable")
    if a.shape != b.shape:
        return no("matrix shapes differ")
    for x, y in zip(a, b):
        if symbolic.exact_equal(x, y) is not True:
            return no("matrix value: an entry differs")
    return yes("matrix value: all entries equal")


def _to_matrix(node):
    if isinstance(node, Matrix):
        return node
    if isinstance(node, Seq) and len(node.items) == 1 and isinstance(node.items[0], Matrix):
        return node.items[0]
    return _nested_list(node)


def _nested_list(node) -> Matrix | None:
    """``[[1, 2], [3, 4]]`` (a list of rows, as Python or numpy print a matrix) -> its matrix:
    square brackets outside and in, rows of one length."""
    if not (isinstance(node, Seq) and node.open == "[" and node.close == "]" and node.items):
        return None
    rows = node.items
    if not all(isinstance(r, Seq) and r.open == "[" and r.close == "]" and not r.pm
               and all(isinstance(e, Scalar) for e in r.items) for r in rows):
        return None
    if len({len(r.items) for r in rows}) != 1:
        return None
    return Matrix(tuple(tuple(r.items) for r in rows))


def _vector_entries(node):
    """Entries of a single-row/column matrix or of a tuple, in order; else ``None``."""
    if isinstance(node, Matrix):
        if all(len(r) == 1 for r in node.rows):
            return [r[0] for r in node.rows]
        if len(node.rows) == 1:
            return list(node.rows[0])
        return None
    if isinstance(node, Seq) and node.open in ("(", "[", "") and len(node.items) > 1:
        return list(node.items)
    if isinstance(node, Scalar) and "\\hat{" in node.text:
        return _unit_vector_entries(node.text)
    return None


_UNIT_TERM_RE = re.compile(r"\s*([+-]?)\s*([^+\-]*?)\s*\\hat\{([ijk])\}")


def _unit_vector_entries(text: str):
    """``-7\\hat{i} + 16\\hat{j} + 5\\hat{k}`` (unit vectors, see normalize) -> its components
    as scalars (``\\hat{k}`` only when written); ``None`` unless the text is only such terms."""
    coeffs, pos = {}, 0
    for m in _UNIT_TERM_RE.finditer(text):
        if m.start() != pos or m.group(3) in coeffs:
            return None
        coeff = re.sub(r"\\(?:cdot|times)\s*$", "", m.group(2).strip()).strip() or "1"
        coeffs[m.group(3)] = Scalar(("-" if m.group(1) == "-" else "") + coeff)
        pos = m.end()
    if text[pos:].strip() or not coeffs:
        return None
    axes = "ijk" if "k" in coeffs else "ij"
    return [coeffs.get(a, Scalar("0")) for a in axes]

"""The mathematical shapes an answer parses into (:func:`.structure.parse_answer`): a scalar,
a sequence, an assignment, a relation, a set expression, a matrix, a matrix expression, or text
(a clock time is :class:`.clock.Clock`). :mod:`.equivalence` picks its comparison by shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scalar:
    """A single number or expression (normalised LaTeX); ``percent`` if a % was attached."""

    text: str
    percent: bool = False
    unit: str = ""       # canonical unit of measurement (``cm``, ``kg``; see .units) or ""


@dataclass(frozen=True)
class Seq:
    """Several values. ``open``/``close`` are the brackets (``""`` for a bare list)."""

    items: tuple
    open: str = ""
    close: str = ""
    pm: bool = False
    raw: str = ""


@dataclass(frozen=True)
class Assign:
    """``label = value`` where the label is a name (``x``, ``f(x)``, ``|AB|``, ``A:B``)."""

    label: str
    value: object
    rhs_text: str = ""


@dataclass(frozen=True)
class Relation:
    """A chain ``parts[0] ops[0] parts[1] ...`` (equations that are not assignments,
    inequalities)."""

    parts: tuple
    ops: tuple


@dataclass(frozen=True)
class SetExpr:
    """A set of reals written with ``\\cup``, ``\\setminus``, ``\\mathbb{R}``, ``\\emptyset``."""

    text: str


@dataclass(frozen=True)
class Matrix:
    """A matrix or vector: rows of parsed entries."""

    rows: tuple


@dataclass(frozen=True)
class MatrixExpr:
    """An expression of matrices (``2\\begin{pmatrix}..\\end{pmatrix}``, a sum or product):
    compared by its value."""

    text: str


@dataclass(frozen=True)
class Text:
    """A word answer (``yes``, ``Tuesday``, a sentence), lower-cased, spaces collapsed."""

    text: str

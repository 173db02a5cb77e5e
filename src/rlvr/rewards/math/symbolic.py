"""The sympy side: guarded LaTeX -> sympy conversion and value comparison.

sympy is slow and some inputs make it hang (``9^{9^{9^{9}}}`` is evaluated eagerly as an
integer with hundreds of millions of digits), so every string is checked by :func:`is_safe`
before it reaches latex2sympy, and comparisons evaluate numerically at high precision (at
fixed sample points when there are free variables) instead of calling ``simplify``. All of this
is deterministic: the sample points are constants, not random draws.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sympy
from latex2sympy2_extended import latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig
from sympy import Float, I, Rational, Symbol
from sympy.solvers.inequalities import solve_rational_inequalities

from .normalize import brace_depth, find_group
from .numbers import TooLarge, eval_arith

MAX_SYMPY_CHARS = 1500
MAX_DEPTH = 40
MAX_EXP = 20_000
_PREC = 40                       # decimal digits used for numeric comparison
_REL_TOL = Float("1e-25", _PREC)  # exact vs exact: must agree to ~25 digits...
_CONFIRM_PREC = 100              # ...then again at this many digits (and more for big numbers)
_CONFIRM_MAX_PREC = 1000
_MAX_POLY_DEGREE = 60            # rational-function relations solved from their real roots
_MAX_SOLVESET_DEGREE = 8         # other relations: sympy's solveset only below this degree
_SAMPLE_TOL = 1e-12              # expressions with variables, compared at sample points
# Deterministic sample values for free variables (positive, irrational-looking, away from
# the usual poles 0, 1, pi/2...). Variable k gets _SAMPLES[(j + k) % len] at point j.
_SAMPLES = ("0.7318", "1.4142", "2.2361", "0.4472", "3.1623", "1.7321", "2.6458")

_CONVERSION = ConversionConfig(interpret_as_mixed_fractions=True, lowercase_symbols=False)


def _exponents(s: str):
    """Yield the text of every exponent (after ``^``) in ``s``."""
    for m in re.finditer(r"\^", s):
        k = m.end()
        while k < len(s) and s[k] == " ":
            k += 1
        if k < len(s) and s[k] == "{":
            end = find_group(s, k)
            yield s[k + 1:end - 1] if end > 0 else s[k:]
        else:
            mm = re.match(r"-?\d+|\\?[a-zA-Z]+|.", s[k:])
            yield mm.group(0) if mm else ""


def _nested_powers_ok(s: str) -> bool:
    """``(2^{20000})^{20000}``: a power of a group that itself contains a power multiplies the
    exponents; allow it only for small outer exponents."""
    for m in re.finditer(r"[)}]\s*\^", s):
        close = m.start()
        depth, k = 0, close
        while k >= 0:
            if s[k] in ")}":
                depth += 1
            elif s[k] in "({":
                depth -= 1
                if depth == 0:
                    break
            k -= 1
        if "^" in s[max(k, 0):close]:
            exp = next(_exponents(s[m.end() - 1:]), "")
            try:
                v = eval_arith(exp)
            except TooLarge:
                return False
            if v is not None and abs(v) > 10:
                return False
    return True


def is_safe(s: str) -> bool:
    """Whether ``s`` can be handed to latex2sympy/sympy without risk of a blow-up.

    Rejects long strings, deep nesting, power towers (an exponent that itself contains ``^``
    or ``!``), numeric exponents above ``MAX_EXP`` and factorials of large arguments.
    """
    if len(s) > MAX_SYMPY_CHARS or brace_depth(s) > MAX_DEPTH:
        return False
    for exp in _exponents(s):
        if "^" in exp or "!" in exp or r"\exp" in exp:
            return False
        try:
            v = eval_arith(exp)
        except TooLarge:
            return False
        if v is not None and abs(v) > MAX_EXP:
            return False
    if not _nested_powers_ok(s):
        return False
    if re.search(r"\\binom\s*\{?\s*\d{5,}|\\binom\s*\{[^{}]*\}\s*\{?\s*\d{5,}", s):
        return False
    for m in re.finditer(r"(\d+)\s*!", s):
        if len(m.group(1)) > 4 or int(m.group(1)) > 3000:
            return False
    if re.search(r"[)}]\s*!", s) or r"\exp" in s and "^" in s:
        return False
    return True


def _post_process(expr):
    """Map the imaginary unit and Euler's number spelled as plain symbols."""
    try:
        subs = {}
        for sym in expr.free_symbols:
            if sym.name == "i":
                subs[sym] = I
        if subs:
            expr = expr.xreplace(subs)
    except Exception:
        pass
    return expr


def _decimals_to_rationals(s: str) -> str:
    # 10.5 -> \frac{105}{10}: decimals inside an expression are exact in maths.
    def rep(m):
        whole, frac = m.group(1), m.group(2)
        return r"(\frac{%s}{1%s})" % (whole + frac, "0" * len(frac))
    return re.sub(r"(?<![\d.])(\d+)\.(\d+)(?![\d.])", rep, s)


@lru_cache(maxsize=4096)
def to_sympy(s: str):
    """Convert normalised LaTeX to a sympy object, or ``None`` if unsafe/unparseable.

    Decimals are converted to exact rationals first; ``i`` becomes the imaginary unit.
    Cached: references are converted once.
    """
    if not s or not is_safe(s):
        return None
    try:
        expr = latex2sympy(_decimals_to_rationals(s), normalization_config=None,
                           conversion_config=_CONVERSION)
    except Exception:
        return None
    return _post_process(expr) if isinstance(expr, sympy.Basic) else expr


def numeric_value(expr):
    """High-precision numeric value of a constant sympy expression, or ``None``."""
    try:
        if expr.free_symbols:
            return None
        v = sympy.N(expr, _PREC)
        if v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            return None
        re_, im_ = v.as_real_imag()
        if not (re_.is_Number and im_.is_Number):
            return None
        return complex(re_, im_) if im_ != 0 else re_
    except Exception:
        return None


def close(a, b, rel) -> bool:
    """``|a - b| <= rel * max(|a|, |b|)`` (with an absolute floor for values near 0)."""
    try:
        diff = abs(a - b)
        scale = max(abs(a), abs(b))
        if scale == 0:
            return diff == 0
        return diff <= rel * scale or diff <= Float("1e-300")
    except Exception:
        return False


def exact_equal(a, b) -> bool | None:
    """Whether two sympy values are equal (constants: to ~25 digits at 40, confirmed by
    :func:`distinct_values`; with variables: at 4 deterministic sample points to 1e-12
    relative). ``None`` when undecidable."""
    try:
        if a == b:
            return True
        syms = sorted((a.free_symbols | b.free_symbols), key=lambda s: s.name)
    except Exception:
        return None
    if not syms:
        va, vb = numeric_value(a), numeric_value(b)
        if va is None or vb is None:
            return None
        return bool(close(_to_mp(va), _to_mp(vb), _REL_TOL)) and not distinct_values(a, b)
    return _sample_equal(a, b, syms)


def _confirm_prec(*exprs) -> int:
    """Digits for :func:`distinct_values`: near-coincidences come from large numbers
    (``\\sqrt{10^{60}+1}`` is ``10^{30}`` to 60 digits), so the largest integer's length
    (twice, for the margin) is added to the base precision."""
    digits = 0
    for e in exprs:
        for n in e.atoms(sympy.Rational):
            digits = max(digits, len(str(abs(n.p))), len(str(n.q)))
    return min(_CONFIRM_PREC + 2 * digits, _CONFIRM_MAX_PREC)


def distinct_values(a, b) -> bool:
    """Whether two constants that agree at the 40-digit comparison still differ exactly.

    Exact values must be equal, not close: ``e^{\\pi\\sqrt{163}}`` is within 1e-29 (relative)
    of ``640320^3+744``. Both are evaluated again at ``_CONFIRM_PREC`` digits or more (sympy's
    evalf is adaptive, so each value is correct to about that many digits) and must agree to
    all but 15 of them. Cheap (a few ms), unlike ``simplify``; structurally equal values,
    unevaluated sums and integrals (slow, and their numeric value is approximate) are not
    re-checked."""
    try:
        if a == b or _heavy(a, b) or (a - b) == 0:
            return False
        prec = _confirm_prec(a, b)
        va, vb = sympy.N(a, prec), sympy.N(b, prec)
        diff = sympy.N(abs(va - vb), 20)
        scale = sympy.N(sympy.Max(abs(va), abs(vb)), 20)
        return bool(diff > scale * Float(10, 20) ** (15 - prec))
    except Exception:
        return False


def _to_mp(v):
    if isinstance(v, complex):
        return sympy.Float(v.real, _PREC) + I * sympy.Float(v.imag, _PREC)
    return v


_HEAVY = (sympy.Sum, sympy.Product, sympy.Integral, sympy.Derivative, sympy.Limit)


def _heavy(*exprs) -> bool:
    """Unevaluated sums/integrals with symbolic bounds: numeric sampling is slow and unreliable."""
    try:
        return any(e.has(*_HEAVY) for e in exprs)
    except Exception:
        return True


def _values_at(a, b, syms, j: int) -> tuple[complex, complex] | None:
    """``a`` and ``b`` at the ``j``-th sample point (30 digits), or None where either does not
    evaluate to a number."""
    point = {s: Float(_SAMPLES[(j + k) % len(_SAMPLES)], 30) for k, s in enumerate(syms)}
    try:
        return complex(sympy.N(a.xreplace(point), 30)), complex(sympy.N(b.xreplace(point), 30))
    except Exception:
        return None


def _sample_equal(a, b, syms) -> bool | None:
    if _heavy(a, b):
        return None
    agree = 0
    for j in range(4):
        values = _values_at(a, b, syms, j)
        if values is None:
            continue
        va, vb = values
        if any(z != z or abs(z) == float("inf") for z in (va, vb)):
            continue
        if abs(va - vb) > _SAMPLE_TOL * max(abs(va), abs(vb), 1e-12):
            return False
        agree += 1
    if agree < 2:
        return None
    # the points agree to 1e-12; at the first point taken exactly they must agree exactly
    # (``x + 10^{-20}`` is not ``x``)
    exact_point = {s: Rational(_SAMPLES[k % len(_SAMPLES)]) for k, s in enumerate(syms)}
    try:
        return not distinct_values(a.xreplace(exact_point), b.xreplace(exact_point))
    except Exception:
        return True


def proportional(a, b) -> bool | None:
    """Whether ``a = c * b`` for a nonzero constant ``c`` (equations ``a = 0``, ``b = 0``
    describe the same set). Checked at sample points. ``None`` when undecidable."""
    try:
        syms = sorted((a.free_symbols | b.free_symbols), key=lambda s: s.name)
    except Exception:
        return None
    if not syms or _heavy(a, b):
        return None
    ratios = []
    for j in range(5):
        values = _values_at(a, b, syms, j)
        if values is None:
            continue
        va, vb = values
        if abs(vb) < 1e-12:
            if abs(va) < 1e-12:
                continue
            return False
        ratios.append(va / vb)
    if len(ratios) < 2 or abs(ratios[0]) < 1e-12:
        return None if len(ratios) < 2 else False
    return all(abs(r - ratios[0]) <= 1e-9 * abs(ratios[0]) for r in ratios)


def constant_ratio(a, b) -> float | None:
    """The real constant ``c`` with ``a = c * b`` (checked at sample points, see
    :func:`proportional`), or ``None``."""
    if proportional(a, b) is not True:
        return None
    syms = sorted((a.free_symbols | b.free_symbols), key=lambda s: s.name)
    for j in range(5):
        values = _values_at(a, b, syms, j)
        if values is None:
            continue
        va, vb = values
        if abs(vb) > 1e-12:
            r = va / vb
            return r.real if abs(r.imag) <= 1e-9 * abs(r) else None
    return None


def relation_set(rel):
    """Solution set (a sympy ``Set`` over the reals) of a univariate relation, or ``None``."""
    try:
        syms = rel.free_symbols
        if len(syms) != 1:
            return None
        (x,) = syms
        xr = Symbol(x.name, real=True)
        return _solve_real(rel.xreplace({x: xr}), xr)
    except Exception:
        return None


def _solve_real(rel, x):
    """The set of reals satisfying ``rel`` (a relation, or an And/Or of relations), or ``None``.

    sympy's general ``as_set`` (solveset) computes every complex root of a polynomial and takes
    tens of seconds on ``x^{17} + 3x^{13} - 2x^5 + x > 0``; a rational function with rational
    coefficients is solved from its real roots instead (tens of ms, exact: the roots are
    radicals or ``CRootOf``), and other relations of high degree are not solved at all."""
    if isinstance(rel, (sympy.And, sympy.Or)):
        parts = [_solve_real(arg, x) for arg in rel.args]
        if any(p is None for p in parts):
            return None
        return sympy.Intersection(*parts) if isinstance(rel, sympy.And) else sympy.Union(*parts)
    fast = _rational_relation_set(rel, x)
    if fast is not None:
        return fast
    if _max_degree(rel) > _MAX_SOLVESET_DEGREE:
        return None
    solved = rel.as_set()
    return None if solved.has(sympy.ConditionSet) else solved    # sympy could not solve it


def _rational_relation_set(rel, x):
    """Solution set of ``p(x)/q(x) op 0`` with ``p``, ``q`` over the rationals, else ``None``."""
    op = getattr(rel, "rel_op", None)
    if op not in ("<", "<=", ">", ">=", "==", "!="):
        return None
    num, den = sympy.fraction(sympy.together(rel.lhs - rel.rhs))
    if not (num.is_polynomial(x) and den.is_polynomial(x)):
        return None
    pn, pd = sympy.Poly(num, x), sympy.Poly(den, x)
    if not all(p.domain.is_ZZ or p.domain.is_QQ for p in (pn, pd)):
        return None
    if max(pn.degree(), pd.degree()) > _MAX_POLY_DEGREE:
        return None
    return solve_rational_inequalities([[((pn, pd), op)]])


def _max_degree(expr) -> int:
    """The largest integer exponent in ``expr`` (0 when there is none)."""
    exps = [p.exp for p in expr.atoms(sympy.Pow) if p.exp.is_Integer]
    return max((abs(int(e)) for e in exps), default=0)


def as_rational(expr) -> Rational | None:
    """The value as an exact sympy ``Rational`` when it is one."""
    try:
        return expr if expr.is_Rational else None
    except Exception:
        return None

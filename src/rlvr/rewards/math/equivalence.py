"""Is the extracted answer mathematically the reference?

:func:`compare` takes two parsed answers (see :mod:`.structure`) and returns an
:class:`Outcome`: equal or not, whether the response offered several candidates for a
single-valued reference, and which rule decided. Cheap rules run first (string identity, exact
numbers with :class:`fractions.Fraction`), sympy only when the cheap rules cannot decide.

Numeric tolerance (the labelling policy):

- a reference written as a decimal with ``d`` decimals is a rounded value and accepts any
  response within ``0.5 * 10^-d`` of it (``3.14`` accepts ``3.14159`` and ``\\pi``, not ``3.15``);
- an exact reference (integer, fraction, radical, pi, e, ...) accepts an exact response only if
  equal, and a decimal response only if essentially exact (relative error below
  ``5 * 10^-exact_sig_digits``; 9 digits by default: ``0.333333333`` for ``1/3``, not ``0.33``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

import mpmath

from . import symbolic
from .normalize import compact
from .numbers import Num, TooLarge, eval_arith, parse_number
from .structure import (Assign, Clock, Matrix, MatrixExpr, Relation, Scalar, Seq, SetExpr, Text,
                        has_variables, is_label, parse_answer)

mpmath.mp.dps = 50


@dataclass(frozen=True)
class Policy:
    """Numeric tolerance settings (see module docstring)."""

    exact_sig_digits: int = 9
    rounded_reference_tolerance: bool = True
    accept_unevaluated: bool = True


@dataclass(frozen=True)
class Outcome:
    """Result of a comparison: ``equal``; ``multiple`` when the response listed several
    candidates for a single-valued reference; ``detail`` names the deciding rule."""

    equal: bool
    detail: str
    multiple: bool = False


def _yes(detail: str) -> Outcome:
    return Outcome(True, detail)


def _no(detail: str) -> Outcome:
    return Outcome(False, detail)


# ---------------------------------------------------------------------------------------------
# Numbers


def _num_of(node: Scalar) -> Num | None:
    t = node.text
    m = re.fullmatch(r"\s*(-?\d+)\s*:\s*(\d+)\s*", t)    # ratio 7:32
    if m and int(m.group(2)) != 0:
        return Num(Fraction(int(m.group(1)), int(m.group(2))))
    n = parse_number(t)
    if n is None:
        try:
            v = eval_arith(t)
        except TooLarge:
            return None
        if v is None:
            return None
        n = Num(v)
    return Num(n.value, n.decimals, n.percent or node.percent)


def _variants(value, decimals, percent):
    """A percent can mean its number (25) or its fraction (0.25)."""
    yield value, decimals
    if percent:
        yield value / 100, None if decimals is None else decimals + 2


def numbers_match(ref_v, ref_dec, resp_v, resp_dec, policy: Policy) -> bool:
    """The tolerance policy for one reference value against one response value.

    Values may be ``Fraction`` or ``mpmath`` numbers; ``*_dec`` is the number of decimals the
    value was written with (``None`` = exact).
    """
    if isinstance(ref_v, Fraction) and isinstance(resp_v, Fraction) and ref_v == resp_v:
        return True
    a, b = _mp(ref_v), _mp(resp_v)
    diff = abs(a - b)
    if ref_dec is not None and policy.rounded_reference_tolerance:
        return diff <= mpmath.mpf(5) * mpmath.power(10, -(ref_dec + 1)) * (1 + mpmath.mpf("1e-12"))
    scale = max(abs(a), abs(b))
    if resp_dec is None:
        return diff == 0 if isinstance(ref_v, Fraction) and isinstance(resp_v, Fraction) \
            else diff <= mpmath.mpf("1e-25") * scale
    return diff <= mpmath.mpf(5) * mpmath.power(10, -policy.exact_sig_digits) * scale


def _mp(v):
    if isinstance(v, Fraction):
        return mpmath.mpf(v.numerator) / v.denominator
    if isinstance(v, complex):
        return mpmath.mpc(v.real, v.imag)
    try:
        return mpmath.mpf(str(v))
    except Exception:
        return mpmath.mpc(complex(v))


def _match_with_percent(ref_v, ref_dec, ref_pct, resp_v, resp_dec, resp_pct, policy) -> bool:
    if ref_pct and resp_pct:
        return numbers_match(ref_v, ref_dec, resp_v, resp_dec, policy)
    for rv, rd in _variants(ref_v, ref_dec, ref_pct):
        for sv, sd in _variants(resp_v, resp_dec, resp_pct):
            if numbers_match(rv, rd, sv, sd, policy):
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Scalars

_BASE_RE = re.compile(r"^([0-9A-Za-z]+)_\{?(\d+)\}?$")


_PLAIN_NUMBER_RE = re.compile(r"^[-+]?\\?\$?\s*(\d[\d,]*(\.\d*)?|\.\d+)\s*(\\?%)?$")
_BINARY_OP_RE = re.compile(
    r"[\d)}]\s*(?:[+\-*×·÷^]|\\times|\\cdot|\\div)\s*[\d(\\{]")
_SCIENTIFIC_RE = re.compile(r"^\s*[-+]?\d+(\.\d+)?\s*(?:\*|×|\\times|\\cdot)\s*10\s*\^\s*\{?\s*[-+]?\d+\s*\}?\s*$")


def unevaluated_arithmetic(answer: str, reference: str) -> bool:
    """True when the reference is a plain number but the answer is arithmetic still to be
    done (``81 * 7`` for ``567``, ``48+24`` for ``72``): repeating the question's operation
    must not earn the reward. A single fraction (``1/2``, ``\\frac{1}{2}``) and scientific
    notation (``3 \\times 10^5``) are values, not unevaluated work."""
    if not _PLAIN_NUMBER_RE.match(reference.strip()):
        return False
    text = answer.strip().rstrip("=").strip()
    return bool(_BINARY_OP_RE.search(text)) and not _SCIENTIFIC_RE.match(text)


def _same_spelling(a: str, b: str) -> bool:
    """Identical up to spacing and ``\\text`` wrappers. Braces are kept: ``\\sqrt{2}+1`` is
    not ``\\sqrt{2+1}`` (both lose their braces under :func:`compact`)."""
    def key(t: str) -> str:
        return re.sub(r"\s+", "", re.sub(r"\\text\{([^{}]*)\}", r"\1", t))
    return key(a) == key(b)


def compare_scalars(ref: Scalar, resp: Scalar, policy: Policy) -> Outcome:
    """Compare two single values: string, base-n numeral, exact number, then sympy."""
    if ref.unit and resp.unit and ref.unit != resp.unit:
        # the answer must be in the reference's unit: 5 m is not 5 cm, 50 mm is not 5 cm either
        return _no(f"different units: {resp.unit} vs {ref.unit}")
    if _same_spelling(ref.text, resp.text) and ref.percent == resp.percent:
        return _yes("string match")
    if not policy.accept_unevaluated and unevaluated_arithmetic(resp.text, ref.text):
        return _no(f"unevaluated arithmetic: {resp.text} (the reference is a number)")
    base = _compare_base(ref.text, resp.text)
    if base is not None:
        return base
    rn, sn = _num_of(ref), _num_of(resp)
    if rn is not None and sn is not None:
        ok = _match_with_percent(rn.value, rn.decimals, rn.percent, sn.value, sn.decimals,
                                 sn.percent, policy)
        return Outcome(ok, f"numeric: {resp.text} {'==' if ok else '!='} {ref.text}")
    return _compare_symbolic(ref, resp, rn, sn, policy)


def _compare_base(ref: str, resp: str) -> Outcome | None:
    mr, ms = _BASE_RE.match(ref.strip()), _BASE_RE.match(resp.strip())
    if not mr and not ms:
        return None
    digits_r = mr.group(1) if mr else ref.strip()
    digits_s = ms.group(1) if ms else resp.strip()
    if mr and ms and mr.group(2) != ms.group(2):
        return _no("base-n: different bases")
    if not re.fullmatch(r"[0-9A-Za-z]+", digits_r + digits_s):
        return None
    ok = digits_r.lstrip("0").upper() == digits_s.lstrip("0").upper()
    return Outcome(ok, "base-n numeral digits")


def _compare_symbolic(ref: Scalar, resp: Scalar, rn: Num | None, sn: Num | None,
                      policy: Policy) -> Outcome:
    a = symbolic.to_sympy(ref.text) if rn is None else None
    b = symbolic.to_sympy(_imag_j(resp.text, ref.text)) if sn is None else None
    if (rn is None and a is None) or (sn is None and b is None):
        return _no("unparseable or unsafe expression")
    va = rn.value if rn is not None else symbolic.numeric_value(a)
    vb = sn.value if sn is not None else symbolic.numeric_value(b)
    if va is not None and vb is not None:
        ok = _match_with_percent(va, rn.decimals if rn else None, ref.percent or bool(rn and rn.percent),
                                 vb, sn.decimals if sn else None, resp.percent or bool(sn and sn.percent),
                                 policy)
        return Outcome(ok, f"numeric value: {'equal' if ok else 'differs'}")
    if a is None or b is None:
        return _no("number vs expression with variables")
    res = symbolic.exact_equal(a, b)
    if res is None:
        return _no("symbolic: undecided")
    return Outcome(res, f"symbolic: {'equal' if res else 'differs'}")


def _imag_j(resp: str, ref: str) -> str:
    # 3+4j for 3+4i: engineers' imaginary unit, only when the reference uses i.
    if re.search(r"(?<![a-zA-Z\\])i(?![a-zA-Z])", ref) and re.search(r"\dj(?![a-zA-Z])|(?<![a-zA-Z\\])j$", resp):
        return re.sub(r"(?<![a-zA-Z\\])j(?![a-zA-Z])", "i", resp)
    return resp


# ---------------------------------------------------------------------------------------------
# Dispatch


def compare(ref, resp, policy: Policy = Policy()) -> Outcome:
    """Compare parsed reference ``ref`` with parsed response ``resp`` (any shapes)."""
    if isinstance(ref, Text) or isinstance(resp, Text):
        return _compare_text(ref, resp)
    if isinstance(ref, Clock) or isinstance(resp, Clock):
        return _compare_clocks(ref, resp, policy)
    if isinstance(ref, Assign) and not isinstance(resp, (Assign, Relation)):
        return compare(ref.value, resp, policy)
    if isinstance(resp, Assign) and not isinstance(ref, (Assign, Relation)):
        return compare(ref, resp.value, policy)
    if isinstance(ref, Assign) and isinstance(resp, Assign):
        out = compare(ref.value, resp.value, policy)
        if out.equal:
            return out
        return _compare_equations(_as_relation(ref), _as_relation(resp), policy)
    if isinstance(ref, (Relation, Assign)) or isinstance(resp, (Relation, Assign)):
        return _compare_relations(ref, resp, policy)
    if isinstance(ref, SetExpr) or isinstance(resp, SetExpr):
        return _compare_real_sets(ref, resp, policy)
    if isinstance(ref, MatrixExpr) or isinstance(resp, MatrixExpr):
        return _compare_matrix_values(ref, resp)
    if isinstance(ref, Matrix) or isinstance(resp, Matrix):
        return _compare_matrices(ref, resp, policy)
    if isinstance(ref, Seq) or isinstance(resp, Seq):
        return _compare_seq(ref, resp, policy)
    return compare_scalars(ref, resp, policy)


def _compare_clocks(ref, resp, policy) -> Outcome:
    """Times of day: equal when some reading of one is a reading of the other (``3:45`` without
    am/pm is both 03:45 and 15:45; ``3:45 AM`` is not ``15:45``)."""
    if not (isinstance(ref, Clock) and isinstance(resp, Clock)):
        # "7:32" read as a time beside a ratio (\(V_1:V_2 = 7:32\)): compare it as written
        ratio = [Scalar(f"{n.hour}:{n.minute:02d}") if isinstance(n, Clock) and not n.meridiem
                 and not n.second else n for n in (ref, resp)]
        if any(isinstance(n, Clock) for n in ratio):
            return _no("time of day vs another kind of answer")
        return compare(ratio[0], ratio[1], policy)
    ok = bool(ref.seconds_of_day() & resp.seconds_of_day())
    return Outcome(ok, "time of day " + ("equal" if ok else "differs"))


def _compare_text(ref, resp) -> Outcome:
    def words(node):
        if isinstance(node, Text):
            return node.text
        if isinstance(node, Scalar):
            return " ".join(re.sub(r"\\text\{([^{}]*)\}", r"\1", node.text).lower().split())
        return None
    a, b = words(ref), words(resp)
    ok = a is not None and b is not None and a.strip(" .") == b.strip(" .")
    return Outcome(ok, "text match" if ok else "text differs")


def _as_relation(node: Assign) -> Relation:
    return Relation((node.label, node.rhs_text), ("=",))


# ----- sequences


def _distinct_count(items, policy) -> int:
    reps: list = []
    for it in items:
        if not any(compare(r, it, policy).equal for r in reps):
            reps.append(it)
            if len(reps) > 1:
                return 2
    return len(reps)


def _compare_seq(ref, resp, policy) -> Outcome:
    if not isinstance(ref, Seq):
        if resp.open == "" and len(resp.items) > 1:
            if _distinct_count(resp.items, policy) > 1:
                alt = _decimal_comma(resp, ref, policy)
                if alt is not None:
                    return alt
                return Outcome(False, "several candidate answers for a single value", True)
            return compare(ref, resp.items[0], policy)
        if len(resp.items) == 1 and resp.open != "{":
            return compare(ref, resp.items[0], policy)
        return _no("sequence vs single value")
    if not isinstance(resp, Seq):
        if len(ref.items) == 1 and ref.open != "{":
            return compare(ref.items[0], resp, policy)
        alt = _decimal_comma(ref, resp, policy)
        if alt is not None:
            return alt
        return _no("single value vs several")
    return _compare_two_seqs(ref, resp, policy)


def _decimal_comma(seq: Seq, single, policy) -> Outcome | None:
    """``1000,99`` / ``0,111``: a comma between digits is a decimal comma when the other side
    is one number."""
    m = re.fullmatch(r"\s*(-?\d+),(\d+)\s*", seq.raw or "")
    if not m or not isinstance(single, Scalar):
        return None
    out = compare_scalars(Scalar(f"{m.group(1)}.{m.group(2)}"), single, policy)
    return out if out.equal else None


def _interval_like(s: Seq) -> bool:
    return len(s.items) == 2 and s.open in "([" and s.close in ")]" and s.open != "" and (
        s.open != s.close.translate(str.maketrans(")]", "([")) or any(
            isinstance(i, Scalar) and "infty" in i.text for i in s.items))


def _compare_two_seqs(ref: Seq, resp: Seq, policy) -> Outcome:
    if _interval_like(ref) or _interval_like(resp):
        if (ref.open, ref.close) != (resp.open, resp.close):
            return _no("interval: different endpoint brackets")
    # Tuples and intervals are ordered; sets and bare lists (roots, solutions) are not, but a
    # bare list answering a tuple is read in the tuple's order.
    ordered = "{" not in (ref.open, resp.open) and (ref.open != "" or resp.open != "")
    if len(ref.items) != len(resp.items) and not ordered:
        ref, resp = _distinct(ref, policy), _distinct(resp, policy)   # a set: repeats count once
    if len(ref.items) != len(resp.items):
        return _no(f"{len(resp.items)} elements vs {len(ref.items)}")
    if _all_assign(ref.items) and _all_assign(resp.items):
        return _compare_mappings(ref.items, resp.items, policy)
    if _all_assign(ref.items) or _all_assign(resp.items):
        # labelled values against a plain tuple: the tuple lists the variables in their
        # conventional (alphabetical) order, (x, y, z) or (a, b, c)
        ordered = True
        ref, resp = _by_label(ref), _by_label(resp)
    if ordered:
        for a, b in zip(ref.items, resp.items):
            if not compare(a, b, policy).equal:
                return _no("tuple element differs")
        return _yes("tuple: all elements equal")
    return _unordered(ref.items, resp.items, policy)


def _distinct(seq: Seq, policy) -> Seq:
    """``seq`` with repeated elements dropped (first occurrence kept); at most 64 elements are
    compared pairwise, longer lists are returned unchanged."""
    if len(seq.items) > 64:
        return seq
    kept: list = []
    for it in seq.items:
        if not any(compare(k, it, policy).equal for k in kept):
            kept.append(it)
    return Seq(tuple(kept), seq.open, seq.close, seq.pm, seq.raw)


def _by_label(seq: Seq) -> Seq:
    """``y = 2, x = 1`` -> ``x = 1, y = 2`` when every item is a value of a distinct
    one-letter variable (optionally subscripted: ``x_1, x_2``)."""
    if not _all_assign(seq.items):
        return seq
    keys = [compact(i.label) for i in seq.items]
    if len(set(keys)) != len(keys) or not all(re.fullmatch(r"[A-Za-z](?:_\d+)?", k) for k in keys):
        return seq
    order = sorted(range(len(keys)), key=lambda k: (keys[k][0], int(keys[k][2:] or 0)))
    return Seq(tuple(seq.items[k] for k in order), seq.open, seq.close, seq.pm, seq.raw)


def _all_assign(items) -> bool:
    return all(isinstance(i, Assign) for i in items)


def _compare_mappings(ref_items, resp_items, policy) -> Outcome:
    ref_map = {compact(i.label): i.value for i in ref_items}
    resp_map = {compact(i.label): i.value for i in resp_items}
    if set(ref_map) == set(resp_map):
        ok = all(compare(ref_map[k], resp_map[k], policy).equal for k in ref_map)
        return Outcome(ok, "labelled values")
    return _unordered([i.value for i in ref_items], [i.value for i in resp_items], policy)


def _unordered(ref_items, resp_items, policy) -> Outcome:
    """Every reference element matched by a distinct response element (any order)."""
    used = [False] * len(resp_items)
    for a in ref_items:
        for k, b in enumerate(resp_items):
            if not used[k] and compare(a, b, policy).equal:
                used[k] = True
                break
        else:
            return _no("set: an element is missing")
    return _yes("set: same elements")


# ----- matrices


def _compare_matrices(ref, resp, policy) -> Outcome:
    ref_m, resp_m = _to_matrix(ref), _to_matrix(resp)
    if ref_m is None or resp_m is None:
        a, b = _vector_entries(ref_m or ref), _vector_entries(resp_m or resp)
        if a is None or b is None or len(a) != len(b):
            return _no("matrix vs non-matrix")
        ok = all(compare(x, y, policy).equal for x, y in zip(a, b))
        return Outcome(ok, "vector vs tuple: " + ("same entries" if ok else "entries differ"))
    ref, resp = ref_m, resp_m
    if len(ref.rows) != len(resp.rows) or any(len(a) != len(b) for a, b in zip(ref.rows, resp.rows)):
        return _no("matrix shapes differ")
    for ra, rb in zip(ref.rows, resp.rows):
        for a, b in zip(ra, rb):
            if not compare(a, b, policy).equal:
                return _no("matrix entry differs")
    return _yes("matrix: all entries equal")


def _sympy_matrix(node):
    """The value of a matrix or matrix expression as a sympy matrix, or ``None``."""
    import sympy
    if isinstance(node, MatrixExpr):
        value = symbolic.to_sympy(node.text)
        try:
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


def _compare_matrix_values(ref, resp) -> Outcome:
    a, b = _sympy_matrix(ref), _sympy_matrix(resp)
    if a is None or b is None:
        return _no("matrix expression not comparable")
    if a.shape != b.shape:
        return _no("matrix shapes differ")
    for x, y in zip(a, b):
        if symbolic.exact_equal(x, y) is not True:
            return _no("matrix value: an entry differs")
    return _yes("matrix value: all entries equal")


def _to_matrix(node):
    if isinstance(node, Matrix):
        return node
    if isinstance(node, Seq) and len(node.items) == 1 and isinstance(node.items[0], Matrix):
        return node.items[0]
    return None


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
    return None


# ----- relations, equations, sets of reals


def _compare_relations(ref, resp, policy) -> Outcome:
    r_ops = ref.ops if isinstance(ref, Relation) else ("=",)
    s_ops = resp.ops if isinstance(resp, Relation) else ("=",)
    eq_r = all(o == "=" for o in r_ops)
    eq_s = all(o == "=" for o in s_ops)
    if eq_r and eq_s and isinstance(ref, (Relation, Assign)) and isinstance(resp, (Relation, Assign)):
        ra = _as_relation(ref) if isinstance(ref, Assign) else ref
        sa = _as_relation(resp) if isinstance(resp, Assign) else resp
        return _compare_equations(ra, sa, policy)
    if not eq_r or not eq_s:
        return _compare_real_sets(ref, resp, policy)
    for quantity, value in ((resp, ref), (ref, resp)):
        rhs = _named_quantity_value(quantity)
        if rhs is not None and not isinstance(value, (Relation, Assign)):
            # "A + B = [matrix]" for the matrix: the left side names the quantity asked for
            return compare(value, rhs, policy)
    return _no("equation vs non-equation")


def _named_quantity_value(node):
    """The value of ``expr = constant`` when ``expr`` is built from matrix names (``A^2``,
    ``A + B``, ``A^{-1}``): it names the quantity asked for. An expression in lower-case
    unknowns (``x + z = 1``, ``a + 3z = 0``) is an equation, not a value (as Math-Verify's
    tests label it). ``None`` otherwise."""
    if not isinstance(node, Relation) or node.ops != ("=",):
        return None
    lhs, rhs = node.parts
    if has_variables(rhs) and r"\begin" not in rhs:
        return None
    names = set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", lhs)))
    if not names or not all(n.isupper() for n in names):
        return None
    return parse_answer(rhs)


def _compare_equations(ref: Relation, resp: Relation, policy) -> Outcome:
    if len(ref.parts) != 2 or len(resp.parts) != 2:
        return _no("equation chains differ")
    if compact("=".join(ref.parts)) == compact("=".join(resp.parts)):
        return _yes("string match")
    exprs = [symbolic.to_sympy(p) for p in (*ref.parts, *resp.parts)]
    if any(e is None for e in exprs):
        return _no("equation not parseable")
    try:
        da, db = exprs[0] - exprs[1], exprs[2] - exprs[3]
    except Exception:
        return _no("equation not parseable")
    try:
        if da == db or da == -db or (da - db).expand() == 0 or (da + db).expand() == 0:
            return _yes("equations: identical after rearranging")
    except Exception:
        pass
    res = symbolic.proportional(da, db)
    return Outcome(bool(res), "equations: same solution set" if res else "equations differ")


def _real_set(node):
    """The set of reals described by ``node`` (sympy), or ``None``."""
    import sympy
    if isinstance(node, SetExpr):
        return _set_from_text(node.text)
    if isinstance(node, Seq) and len(node.items) == 2 and node.open in "([" and node.open:
        lo, hi = (symbolic.to_sympy(i.text) if isinstance(i, Scalar) else None for i in node.items)
        if lo is None or hi is None:
            return None
        try:
            return sympy.Interval(lo, hi, node.open == "(", node.close == ")")
        except Exception:
            return None
    if isinstance(node, Seq) and node.open == "{":
        vals = [symbolic.to_sympy(i.text) if isinstance(i, Scalar) else None for i in node.items]
        return None if any(v is None for v in vals) else sympy.FiniteSet(*vals)
    if isinstance(node, Relation):
        return _relation_to_set(node)
    if isinstance(node, Seq) and node.open == "" and all(isinstance(i, Relation) for i in node.items):
        sets = [_relation_to_set(i) for i in node.items]     # "x < 1 or x > 2"
        return None if any(x is None for x in sets) else sympy.Union(*sets)
    return None


def _split_on_command(text: str, cmd: str) -> list[str]:
    """Split at ``cmd`` (e.g. ``\\cup``) where it is not inside brackets."""
    pieces, last = [], 0
    for m in re.finditer(re.escape(cmd) + r"(?![a-zA-Z])", text):
        before = text[:m.start()]
        depth = sum(before.count(c) for c in "([{") - sum(before.count(c) for c in ")]}")
        if depth == 0 or (depth == 1 and False):
            pieces.append(text[last:m.start()])
            last = m.end()
    pieces.append(text[last:])
    return [p.strip() for p in pieces]


def _set_from_text(text: str):
    """Build a sympy set from ``A \\cup B``, ``A \\setminus B``, ``\\mathbb{R}``, intervals."""
    import sympy
    t = text.strip()
    for cmd, build in ((r"\setminus", None), (r"\cup", sympy.Union), (r"\cap", sympy.Intersection)):
        pieces = _split_on_command(t, cmd)
        if len(pieces) > 1:
            sets = [_set_from_text(p) for p in pieces]
            if any(x is None for x in sets):
                return None
            if build is None:
                out = sets[0]
                for other in sets[1:]:
                    out = sympy.Complement(out, other)
                return out
            return build(*sets)
    if t in (r"\mathbb{R}", r"\mathbb{R}}"):
        return sympy.S.Reals
    if t == r"\emptyset":
        return sympy.S.EmptySet
    node = parse_answer(t)
    if isinstance(node, SetExpr):
        return None
    return _real_set(node)


def _relation_to_set(node: Relation):
    import sympy
    from sympy.core.relational import Relational
    text = _relation_text(node)
    obj = symbolic.to_sympy(text)
    if obj is None or not isinstance(obj, (Relational, sympy.And, sympy.Or)):
        return None
    return symbolic.relation_set(obj)


def _relation_text(node: Relation) -> str:
    parts = list(node.parts)
    named = [k for k, p in enumerate(parts) if is_label(p) and re.fullmatch(r"[A-Za-z]\w*\(.+\)", compact(p))]
    if len(named) == 1 and not any(re.search(r"[A-Za-z]", p) for k, p in enumerate(parts)
                                   if k != named[0]):
        parts[named[0]] = "x"        # "0 < f(x) < 1" is a statement about the value f(x)
    out = parts[0]
    for op, part in zip(node.ops, parts[1:]):
        out += f" {op} {part}"
    return out


def _compare_real_sets(ref, resp, policy) -> Outcome:
    if isinstance(ref, SetExpr) and isinstance(resp, SetExpr) and compact(ref.text) == compact(resp.text):
        return _yes("string match")
    a, b = _real_set(ref), _real_set(resp)
    if a is None or b is None:
        if isinstance(ref, Relation) and isinstance(resp, Relation):
            ok = compact(_relation_text(ref)) == compact(_relation_text(resp))
            return Outcome(ok, "relation string match" if ok else "relations differ")
        return _no("set/relation not comparable")
    try:
        import sympy
        if a == b:
            return _yes("same set of reals")
        diff = sympy.Union(sympy.Complement(a, b), sympy.Complement(b, a))
        ok = diff.is_empty is True or diff == sympy.S.EmptySet
    except Exception:
        return _no("set comparison failed")
    return Outcome(ok, "same set of reals" if ok else "sets of reals differ")


def compare_strings(ref: str, resp: str, policy: Policy = Policy()) -> Outcome:
    """Parse both strings (see :func:`.structure.parse_answer`) and :func:`compare` them."""
    return compare(parse_answer(ref), parse_answer(resp), policy)

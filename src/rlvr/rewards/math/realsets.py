"""Comparing relations: equations (the same solution set), inequalities and sets of reals
(intervals, unions, set differences, ``\\mathbb{R}``), decided by sympy.
"""

from __future__ import annotations

import re

import sympy
from sympy.core.relational import Relational

from . import symbolic
from .labels import has_variables, is_label
from .normalize import compact
from .outcome import Compare, Outcome, Policy, no, yes
from .shapes import Assign, Relation, Scalar, Seq, SetExpr
from .structure import parse_answer


def as_relation(node: Assign) -> Relation:
    """The assignment ``x = value`` as the equation it states."""
    return Relation((node.label, node.rhs_text), ("=",))


def compare_relations(ref, resp, policy: Policy, compare: Compare) -> Outcome:
    """Compare when either side is a relation or an assignment: equations as equations,
    inequalities as sets of reals, and ``A + B = [matrix]`` as the value it names (compared
    with ``compare``)."""
    r_ops = ref.ops if isinstance(ref, Relation) else ("=",)
    s_ops = resp.ops if isinstance(resp, Relation) else ("=",)
    eq_r = all(o == "=" for o in r_ops)
    eq_s = all(o == "=" for o in s_ops)
    if (eq_r and eq_s and isinstance(ref, (Relation, Assign))
            and isinstance(resp, (Relation, Assign))):
        ra = as_relation(ref) if isinstance(ref, Assign) else ref
        sa = as_relation(resp) if isinstance(resp, Assign) else resp
        return compare_equations(ra, sa, policy)
    if not eq_r or not eq_s:
        return compare_real_sets(ref, resp, policy)
    for quantity, value in ((resp, ref), (ref, resp)):
        rhs = _named_quantity_value(quantity)
        if rhs is not None and not isinstance(value, (Relation, Assign)):
            # "A + B = [matrix]" for the matrix: the left side names the quantity asked for
            return compare(value, rhs, policy)
    return no("equation vs non-equation")


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
    names = set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])",
                           re.sub(r"\\[A-Za-z]+", " ", lhs)))
    if not names or not all(n.isupper() for n in names):
        return None
    return parse_answer(rhs)


def compare_equations(ref: Relation, resp: Relation, policy) -> Outcome:
    """Two equations ``a = b``: equal as written, identical after rearranging, or with the same
    solution set (one side's ``a - b`` proportional to the other's)."""
    if len(ref.parts) != 2 or len(resp.parts) != 2:
        return no("equation chains differ")
    if compact("=".join(ref.parts)) == compact("=".join(resp.parts)):
        return yes("string match")
    exprs = [symbolic.to_sympy(p) for p in (*ref.parts, *resp.parts)]
    if any(e is None for e in exprs):
        return no("equation not parseable")
    try:
        da, db = exprs[0] - exprs[1], exprs[2] - exprs[3]
    except Exception:
        return no("equation not parseable")
    try:
        if da == db or da == -db or (da - db).expand() == 0 or (da + db).expand() == 0:
            return yes("equations: identical after rearranging")
    except Exception:
        pass
    res = symbolic.proportional(da, db)
    return Outcome(bool(res), "equations: same solution set" if res else "equations differ")


def _real_set(node):
    """The set of reals described by ``node`` (sympy), or ``None``."""
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
    if isinstance(node, Seq) and node.open == "" and all(
            isinstance(i, (Relation, SetExpr)) or _interval_seq(i) for i in node.items):
        sets = [_real_set(i) for i in node.items]     # "x < 1 or x > 2", "(0, 1) or (2, 3)"
        return None if any(x is None for x in sets) else sympy.Union(*sets)
    return None


def _interval_seq(node) -> bool:
    """``(a, b)`` / ``[a, b)``...: two values in brackets, read as an interval in a union."""
    return isinstance(node, Seq) and len(node.items) == 2 and node.open in ("(", "[") \
        and node.close in (")", "]")


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
    text = _relation_text(node)
    obj = symbolic.to_sympy(text)
    if obj is None or not isinstance(obj, (Relational, sympy.And, sympy.Or)):
        return None
    return symbolic.relation_set(obj)


def _relation_text(node: Relation) -> str:
    parts = list(node.parts)
    named = [k for k, p in enumerate(parts)
             if is_label(p) and re.fullmatch(r"[A-Za-z]\w*\(.+\)", compact(p))]
    if len(named) == 1 and not any(re.search(r"[A-Za-z]", p) for k, p in enumerate(parts)
                                   if k != named[0]):
        parts[named[0]] = "x"        # "0 < f(x) < 1" is a statement about the value f(x)
    out = parts[0]
    for op, part in zip(node.ops, parts[1:]):
        out += f" {op} {part}"
    return out


_FLIP = {">": "<", r"\ge": r"\le", "<": "<", r"\le": r"\le", r"\ne": r"\ne"}


def _as_difference(node: Relation):
    """``a > b`` -> ``(b - a, "<")``: one relation ``d op 0`` with ``op`` in <, \\le, \\ne
    (sympy), or ``None``."""
    if len(node.ops) != 1 or node.ops[0] not in _FLIP:
        return None
    lhs, rhs = (symbolic.to_sympy(p) for p in node.parts)
    if lhs is None or rhs is None:
        return None
    try:
        d = rhs - lhs if node.ops[0] in (">", r"\ge") else lhs - rhs
    except Exception:
        return None
    return d, _FLIP[node.ops[0]]


def same_inequality(ref: Relation, resp: Relation) -> bool:
    """Whether two inequalities sympy cannot solve (two variables, ``2^x > x^2``) state the
    same thing: written as ``d op 0`` (sides swapped, direction flipped), the differences
    are equal up to a positive constant factor (any nonzero one for ``\\ne``)."""
    a, b = _as_difference(ref), _as_difference(resp)
    if a is None or b is None or a[1] != b[1]:
        return False
    ratio = symbolic.constant_ratio(a[0], b[0])
    if ratio is None:
        return False
    return ratio != 0 if a[1] == r"\ne" else ratio > 0


def compare_real_sets(ref, resp, policy) -> Outcome:
    """Compare the sets of reals both sides describe (intervals, unions, inequalities, finite
    sets) with sympy; relations sympy cannot read are compared as written."""
    if (isinstance(ref, SetExpr) and isinstance(resp, SetExpr)
            and compact(ref.text) == compact(resp.text)):
        return yes("string match")
    a, b = _real_set(ref), _real_set(resp)
    if a is None or b is None:
        if isinstance(ref, Relation) and isinstance(resp, Relation):
            ok = compact(_relation_text(ref)) == compact(_relation_text(resp))
            if not ok and same_inequality(ref, resp):
                return yes("inequalities: identical after rearranging")
            return Outcome(ok, "relation string match" if ok else "relations differ")
        return no("set/relation not comparable")
    try:
        if a == b:
            return yes("same set of reals")
        diff = sympy.Union(sympy.Complement(a, b), sympy.Complement(b, a))
        ok = diff.is_empty is True or diff == sympy.S.EmptySet
    except Exception:
        return no("set comparison failed")
    return Outcome(ok, "same set of reals" if ok else "sets of reals differ")

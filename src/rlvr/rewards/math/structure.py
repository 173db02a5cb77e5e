"""Parse an answer string into its mathematical shape.

A final answer is one of: a scalar (number or expression), a sequence (bare list ``1, 2``,
tuple ``(1, 2)``, interval ``[0, 1)``, set ``\\{1, 2\\}``, the two values of ``a \\pm b``), an
assignment ``x = 3`` (a *label* on the left, a value on the right), a relation (an equation
between expressions or an inequality), a set expression (``\\cup``, ``\\setminus``,
``\\mathbb{R}``, ``\\emptyset``), a matrix, or a piece of text. The comparison rules in
:mod:`.equivalence` depend on the shape, so it is decided once here, with caching.

Units, currency, ``\\text{...}`` words and degree signs are taken off first
(:mod:`.text_units`); the shapes themselves are in :mod:`.shapes`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .clock import Clock, parse_clock
from .labels import has_variables, is_label, variable_names
from .normalize import clean_latex, find_group, split_top_level, unwrap_command
from .numwords import english_number
from .shapes import Assign, Matrix, MatrixExpr, Relation, Scalar, Seq, SetExpr, Text
from .text_units import replace_text_groups, strip_units
from .units import canonical_unit

# The shapes parse_answer returns, importable from here beside it.
__all__ = ["Assign", "Clock", "Matrix", "MatrixExpr", "Relation", "Scalar", "Seq", "SetExpr",
           "Text", "has_variables", "is_label", "parse_answer"]


_EMPTY_RE = re.compile(r"^(?:there (?:are|is) )?no (?:real |integer |positive )?"
                       r"(?:solutions?|roots?|values?)(?: exists?)?$|^(?:the )?empty set$|"
                       r"^\\emptyset$|^\\\{\s*\\\}$|^無解$|^无解$",
                       re.I)
_REALS_RE = re.compile(r"(?:x (?:can be|is) )?(?:the set of |the )?(?:all |any |every )?"
                       r"real (?:numbers?|values?)(?: of x)?|all (?:the )?reals|"
                       r"(?:all|全体)?实数(?:集)?")
_REL_OPS = re.compile(r"\\le(?![a-zA-Z])|\\ge(?![a-zA-Z])|\\ne(?![a-zA-Z])|\\in(?![a-zA-Z])|"
                      r"\\notin(?![a-zA-Z])|<|>|=")
_THOUSANDS_RE = re.compile(r"(?<![\d.,(\[{])[1-9]\d{0,2}(?:,\d{3})+(?![\d,)\]}])")
# Words that say "approximately": read like \approx (the value after them is the answer).
_APPROX_WORDS_RE = re.compile(r"(?i)(?:^|(?<=[\s=]))(?:about|approximately|approx\.?|roughly|"
                              r"around|circa)(?=\s)|(?:^|(?<=[\s=]))~(?=\s*\d)|大约|约为|约")


def _bracketed(s: str) -> tuple[str, str, str] | None:
    """``(open, inside, close)`` when one bracket pair encloses all of ``s``."""
    if s.startswith(r"\{") and s.endswith(r"\}"):
        inner = s[2:-2]
        depth = 0
        for k in range(len(inner) - 1):
            if inner[k:k + 2] == r"\{":
                depth += 1
            elif inner[k:k + 2] == r"\}":
                depth -= 1
                if depth < 0:
                    return None
        return "{", inner, "}"
    if len(s) < 2 or s[0] not in "([" or s[-1] not in ")]":
        return None
    depth = 0
    for k, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and k != len(s) - 1:
                return None
    return s[0], s[1:-1], s[-1]


def _split_relation(s: str) -> tuple[list[str], list[str]]:
    parts, ops, depth, last = [], [], 0, 0
    i = 0
    while i < len(s):
        c = s[i]
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif depth == 0:
            m = _REL_OPS.match(s, i)
            if m and not (c == "\\" and i > 0 and s[i - 1] == "\\"):
                parts.append(s[last:i].strip())
                ops.append(m.group(0))
                last = i = m.end()
                continue
        if c == "\\":
            m2 = re.match(r"\\[A-Za-z]+", s[i:])
            if m2 and not _REL_OPS.match(s, i):
                i += m2.end()
                continue
        i += 1
    parts.append(s[last:].strip())
    return parts, ops


@lru_cache(maxsize=8192)
def parse_answer(raw: str):
    """Parse an extracted answer into :class:`Scalar` / :class:`Seq` / :class:`Assign` /
    :class:`Relation` / :class:`SetExpr` / :class:`Matrix` / :class:`Text`.

    Never raises; an empty string gives ``Text("")``.
    """
    return _parse(clean_latex(raw), 0)


def _parse(s: str, depth: int):
    s = s.strip()
    if depth > 8:
        return Scalar(s)
    for cmd in ("boxed", "fbox"):
        inner = unwrap_command(s, cmd)
        if inner is not None:
            return _parse(clean_latex(inner), depth + 1)
    s = _APPROX_WORDS_RE.sub(r"\\approx ", s)
    if r"\approx" in s:
        # "x \approx 11" names the value; "\frac{22}{7} \approx 3.14" gives the exact one first
        before, _, after = s.partition(r"\approx")
        before, after = before.strip(), after.replace(r"\approx", " ").strip()
        if not before or is_label(before):
            s = after
        elif after:
            s = before if not re.fullmatch(r"[^=]*=\s*", before) else after
        else:
            s = before
    clock = parse_clock(s)
    if clock is not None:
        return clock
    text = _as_text(s)
    if text is not None:
        return text
    s, trailing = replace_text_groups(s)
    s, percent, removed = strip_units(s)
    unit = (canonical_unit(trailing) or canonical_unit(removed) or ""
            if (trailing or removed) else "")
    # "1, 2, 3, ..." goes on: keep the ellipsis as an element so it never equals a finite list
    s = re.sub(r",\s*(?:\.\.\.|…|\\ldots)\s*\.?$", r", \\ldots", s.strip())
    s = s.strip().rstrip(".").strip() if not s.endswith(r"\ldots") else s
    if _EMPTY_RE.match(s):
        return SetExpr(r"\emptyset")
    s = _separators_to_commas(s)
    if ", " not in s:   # 1,234,567 is one number unless the commas are list separators
        s = _THOUSANDS_RE.sub(lambda m: m.group(0).replace(",", ""), s)
        s = _computation_decimal_commas(s)
    if s.startswith("{") and find_group(s, 0) == len(s):
        return _parse(s[1:-1], depth + 1)   # bare braces are grouping: {1,2} is a list
    items = split_top_level(s, ",;")
    if len(items) > 1:
        return _make_seq(items, "", "", s, depth)
    if not items:
        return Text("")
    return _parse_single(items[0], percent, depth, unit)


def _as_text(s: str) -> Text | None:
    inner = unwrap_command(s, "text")
    candidate = inner if inner is not None else s
    if inner is not None and re.fullmatch(r"[\d\s.,+-]+", inner):
        return None
    words = re.sub(r"\\text\{([^{}]*)\}", r"\1", candidate).strip()
    spelled = english_number(words)
    if spelled is not None:      # "five", "two thirds", "negative three": a number
        return _number_scalar(*spelled)
    per = re.fullmatch(r"(?i)(.+?)\s*(?:percent|per cent|%|\\%)", words)
    spelled = english_number(per.group(1)) if per else None
    if spelled is not None:      # "fifty percent"
        return Scalar(_number_scalar(*spelled).text, percent=True)
    named = _named_set(words)
    if named is not None:
        return named
    if re.fullmatch(r"[A-Za-z][A-Za-z'\s.-]*[A-Za-z.]|[A-Za-z]{2,}", words) and not re.search(
            r"(?<![A-Za-z])(?:and|or)(?![A-Za-z])", words) and not _letter_algebra(words):
        if len(words) >= 3 or inner is not None or words.lower() in ("no", "ok"):
            return Text(" ".join(words.lower().rstrip(".").split()))
    return None


def _letter_algebra(words: str) -> bool:
    """Whether letters joined by minus signs are algebra, not a word answer: ``p - q``,
    ``ab - c`` (a spaced minus between short names) or ``a-b`` (a hyphen between single letters);
    ``x-intercept`` and ``well-defined`` are words."""
    if re.search(r"(?<![A-Za-z])[A-Za-z]-[A-Za-z](?![A-Za-z])", words):
        return all(len(t) == 1 for t in re.split(r"\s*-\s*", words))
    return bool(re.search(r"\s-\s", words)) and all(
        1 <= len(t) <= 3 and t.isalpha() for t in re.split(r"\s+-\s+", words))


def _named_set(words: str) -> SetExpr | None:
    """A set of reals named in words: ``all real numbers`` -> ``\\mathbb{R}``, ``no solution``
    -> ``\\emptyset``."""
    w = " ".join(words.lower().rstrip(".").split())
    if _EMPTY_RE.match(w):
        return SetExpr(r"\emptyset")
    if _REALS_RE.fullmatch(w):
        return SetExpr(r"\mathbb{R}")
    return None


def _number_scalar(value, decimals) -> Scalar:
    """A :class:`Scalar` spelling ``value`` (a Fraction) the way the comparison reads it."""
    if value.denominator == 1:
        return Scalar(str(value.numerator))
    if decimals is not None:
        return Scalar(f"{float(value):.{decimals}f}")
    sign = "-" if value < 0 else ""
    return Scalar(f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}")


_ARITH_OP_RE = re.compile(r"[×*+/]|\\times|\\cdot|\\div|(?<=\d)\s-\s")


def _computation_decimal_commas(s: str) -> str:
    """``3 × 2,5 = 7,5``: inside a computation (an arithmetic operator and no brackets), a comma
    between digits that is not a thousands separator is a decimal comma, not a list."""
    if re.search(r"[(\[{]", s) or not _ARITH_OP_RE.search(s):
        return s
    return re.sub(r"(?<![\d,])(\d+),(\d{1,2}|\d{4,})(?![\d,])", r"\1.\2", s)


def _separators_to_commas(s: str) -> str:
    s = re.sub(r"(?<=[\d)\]}$])\s*(?:or|and)\s*(?=[A-Za-z(\[\\\-\d$])", " , ", s)
    s = re.sub(r"\s+(?:and|or|以及|或者|或|和)\s+|(?:以及|或者|或|和)", " , ", s)
    s = re.sub(r"^\s*,|,\s*$", "", s)
    s = re.sub(r",\s*,", ",", s)
    return s.strip()


def _make_seq(items, open_, close, raw, depth):
    if open_ in ("{", ""):
        # a set or list element "1 \pm \sqrt{5}" or "x = \pm 1" stands for two elements
        items = [v for it in items for v in (
            _pm_variants(it) if r"\pm" in it or r"\mp" in it else (it,))]
    parsed = tuple(_parse(it, depth + 1) for it in items)
    return Seq(_group_assignments(parsed), open_, close, raw=raw)


def _pm_variants(s: str) -> tuple[str, str]:
    """``a \\pm b`` -> ``("a + b", "a - b")`` (every ``\\pm`` takes the same sign)."""
    plus = s.replace(r"\mp", "-").replace(r"\pm", "+")
    minus = s.replace(r"\mp", "+").replace(r"\pm", "-")
    return re.sub(r"^\s*\+", "", plus), minus


def _group_assignments(items: tuple) -> tuple:
    """``p=5, q=2, p=7, q=2`` -> ``((5, 2), (7, 2))``; ``x=1, x=2`` -> ``(1, 2)``."""
    if len(items) < 2 or not all(isinstance(it, Assign) for it in items):
        return items
    labels = [it.label.replace(" ", "") for it in items]
    if len(set(labels)) == 1:
        return tuple(it.value for it in items)
    first = labels.index(labels[0], 1) if labels.count(labels[0]) > 1 else None
    if first and len(labels) % first == 0 and all(
            labels[k] == labels[k % first] for k in range(len(labels))):
        groups = [items[k:k + first] for k in range(0, len(items), first)]
        return tuple(Seq(tuple(g.value for g in grp), "(", ")") for grp in groups)
    return items


def _parse_single(s: str, percent: bool, depth: int, unit: str = ""):
    if re.fullmatch(r"\\begin\{[vV]matrix\}.*\\end\{[vV]matrix\}", s, re.S):
        return Scalar(s, percent, unit)     # |..| bars: the determinant, a number
    if re.match(r"\\begin\{[pbB]?matrix\}|\\begin\{array\}", s):
        m = _parse_matrix(s, depth)
        if m is not None:
            return m
    br = _bracketed(s)
    if br is not None:
        open_, inner, close = br
        if (re.match(r"\s*\\begin\{", inner) and re.search(r"\\end\{[^{}]*\}\s*$", inner)
                and open_ in "(["):
            return _parse(inner, depth + 1)   # \left[\begin{array}..\end{array}\right]
        items = split_top_level(inner, ",;")
        if len(items) >= 2 or open_ == "{":
            return _make_seq(items, open_, close, s, depth)
        if open_ == "(" and close == ")":
            return _parse(inner, depth + 1)
    if re.search(r"\\cup|\\cap|\\setminus|\\mathbb\{R\}|\\emptyset", s) and not _names_a_set(s):
        return SetExpr(s)
    if r"\pm" in s or r"\mp" in s:
        items = _group_assignments(tuple(_parse(v, depth + 1) for v in _pm_variants(s)))
        return Seq(items, pm=True, raw=s)
    parts, ops = _split_relation(s)
    if ops:
        return _relation(parts, ops, depth, unit)
    if re.search(r"\\begin\{(?:[pbB]?matrix|array)\}", s):
        return MatrixExpr(_arrays_as_matrices(s))
    return Scalar(s, percent, unit)


def _relation(parts: list[str], ops: list[str], depth: int, unit: str = ""):
    if any(not p for p in parts):
        if ops == [r"\in"] and not parts[0]:
            return _parse(parts[1], depth + 1)      # "\in [1, 2]": the set named
        if any(op != "=" for op in ops):
            # "\ge 3", "> 3", "\ne 3" bound or exclude a value, they do not state one
            return Relation(tuple(parts), tuple(ops))
        return Scalar(" ".join(parts))
    if all(op == "=" for op in ops):
        named = _named_tuple(parts[0], parts[-1], depth)
        if named is not None:
            return named
        if len(parts) >= 3:
            return Assign(parts[0], _with_unit(_parse(parts[-1], depth + 1), unit), parts[-1])
        if is_label(parts[0]) or (not has_variables(parts[0]) and not (
                re.fullmatch(r"\s*-?[\d.]+\s*", parts[0]) and has_variables(parts[1]))):
            # "x = 3", "f(x) = 1"; or a computation "\frac{1}{2} \cdot 20 = 10": the value
            # counts. "7 = 11a + c" is a constraint on a and c, not a value: an equation.
            return Assign(parts[0], _with_unit(_parse(parts[1], depth + 1), unit), parts[1])
        if is_label(parts[1]) and (re.fullmatch(r"[-\d\s.]+", parts[0]) or not (
                variable_names(parts[1]) & variable_names(parts[0]))):
            # "12 = x"; "2x + 3 = y": the label on the right names the value on the left
            return Assign(parts[1], _parse(parts[0], depth + 1), parts[0])
    if ops == [r"\in"] and is_label(parts[0]):
        return _parse(parts[1], depth + 1)
    return Relation(tuple(parts), tuple(ops))


def _with_unit(value, unit: str):
    """``value`` carrying the unit that was taken off the end of ``label = value`` (``d = 5
    \\text{ m}``), so that it is compared like the bare ``5 \\text{ m}``."""
    if unit and isinstance(value, Scalar) and not value.unit:
        return Scalar(value.text, value.percent, unit)
    return value


def _names_a_set(s: str) -> bool:
    """``A \\cup B = \\{1, 2\\}``, ``x \\in \\mathbb{R}``: a name on the left of ``=`` or
    ``\\in`` (read as a relation, whose right side is the answer), not a set expression."""
    parts, ops = _split_relation(s)
    return len(ops) == 1 and ops[0] in ("=", r"\in") and is_label(parts[0])


def _arrays_as_matrices(s: str) -> str:
    """``[\\begin{array}{cc}..\\end{array}]`` (``\\left[..\\right]`` once sizing is dropped) ->
    ``\\begin{bmatrix}..\\end{bmatrix}``, the spelling latex2sympy reads inside expressions."""
    return re.sub(r"[\[(]?\s*\\begin\{array\}(?:\{[^{}]*\})?(.*?)\\end\{array\}\s*[\])]?",
                  lambda m: r"\begin{bmatrix}" + m.group(1) + r"\end{bmatrix}", s, flags=re.S)


def _named_tuple(lhs: str, rhs: str, depth: int) -> Seq | None:
    """``(a, b) = (3, 4)`` -> the labelled values ``a = 3, b = 4`` (a tuple of names on the left
    of a tuple of values of the same length), so it equals ``(3, 4)`` and ``b = 4, a = 3``."""
    left, right = _bracketed(lhs.strip()), _bracketed(rhs.strip())
    if left is None or right is None or left[0] != right[0]:
        return None
    names = split_top_level(left[1], ",;")
    values = split_top_level(right[1], ",;")
    if len(names) < 2 or len(names) != len(values) or not all(is_label(n) for n in names):
        return None
    return Seq(tuple(Assign(n, _parse(v, depth + 1), v) for n, v in zip(names, values)),
               left[0], left[2], raw=rhs)


def _parse_matrix(s: str, depth: int) -> Matrix | None:
    m = re.match(r"\\begin\{([pbvBV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}\s*$", s, re.S)
    if not m or re.search(r"\\(?:begin|end)\{" + m.group(1) + r"\}", m.group(2)):
        return None     # several matrices (a product or sum): a matrix expression
    body = m.group(2).strip()
    body = re.sub(r"\\\\\s*$", "", body)
    rows = [r for r in re.split(r"\\\\", body) if r.strip()]
    parsed = tuple(tuple(_parse(c, depth + 1) for c in r.split("&")) for r in rows)
    return Matrix(parsed)

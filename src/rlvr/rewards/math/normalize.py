"""String and LaTeX normalisation of answers.

Everything here is pure string work (no sympy), so it is cheap and runs on every answer before
any comparison. The goal is that two spellings of the same written answer become the same
string: ``\\dfrac{1}{2}`` and ``\\frac12``, ``10,\\!000`` and ``10000``, ``x \\leq 5`` and
``x <= 5`` (both become ``x \\le 5``), unicode ``√5`` and ``\\sqrt{5}``.
"""

from __future__ import annotations

import re

# Unicode / full-width characters that models emit instead of LaTeX or ASCII.
_CHAR_MAP = {
    "，": ",", "：": ":", "。": ".", "；": ";", "（": "(", "）": ")", "［": "[", "］": "]",
    "＝": "=", "＋": "+", "－": "-", "％": "%", "／": "/", "！": "!", "？": "?",
    "−": "-", "–": "-", "—": "-", "×": r"\times ", "÷": r"\div ", "·": r"\cdot ",
    "⋅": r"\cdot ", "π": r"\pi ", "∞": r"\infty ", "≤": r"\le ", "⩽": r"\le ",
    "≥": r"\ge ", "⩾": r"\ge ", "≠": r"\ne ", "±": r"\pm ", "∓": r"\mp ",
    "°": r"^\circ ", "∪": r"\cup ", "∩": r"\cap ", "∈": r"\in ", "∅": r"\emptyset ",
    "≈": r"\approx ", "ℝ": r"\mathbb{R}", "√": r"\sqrt", "∖": r"\setminus ", "\u00a0": " ",
    "\u200b": "", "\u3000": " ", "ⅈ": "i", "．": ".", "＜": "<", "＞": ">", "⟨": "(", "⟩": ")",
    "¢": r" \text{ cents}",                                    # 54¢: a unit, like "54 cents"
    **{chr(0xFF10 + d): str(d) for d in range(10)},            # full-width digits
}
# Unicode vulgar fractions: "½", and "1½" (a mixed number, written 1\frac{1}{2} in LaTeX).
_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5),
           "⅖": (2, 5), "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7),
           "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10)}
_CHAR_MAP.update({k: r"\frac{%d}{%d}" % v for k, v in _VULGAR.items()})
_CHAR_RE = re.compile("|".join(re.escape(k) for k in _CHAR_MAP))
# A run of superscript (subscript) characters is one exponent (index): x⁴ -> x^{4},
# 10⁻³ -> 10^{-3}, x₁ -> x_{1}.
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺ⁿ", "0123456789-+n"))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₋₊", "0123456789-+"))
_SUPER_RE = re.compile("[" + "".join(_SUPERSCRIPTS) + "]+")
_SUB_RE = re.compile("[" + "".join(_SUBSCRIPTS) + "]+")

# A doubled backslash (``\\frac`` written as ``\\\\frac``, from an over-escaped string) hides a
# command. Where a row separator ``\\\\`` may precede a word (inside an environment or an
# aligned ``&`` row: ``x \\\\y``), only these command names are undone; elsewhere any name is.
_KNOWN_CMDS = (
    "frac|dfrac|tfrac|cfrac|sqrt|pi|text|cdot|times|left|right|infty|le|ge|leq|geq|neq|ne|"
    "sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|sinh|cosh|tanh|log|ln|exp|boxed|mathbf|"
    "mathrm|mathbb|circ|degree|pm|mp|begin|end|alpha|beta|gamma|delta|theta|lambda|mu|sigma|"
    "omega|phi|cup|cap|setminus|emptyset|varnothing|binom|dbinom|sum|prod|int|lim|ldots|cdots|"
    "dots|approx|in|notin|subset|subseteq|lfloor|rfloor|lceil|rceil|langle|rangle|mid|div"
)
_DOUBLE_BS_RE = re.compile(r"(?<!\\)\\\\(?=(?:" + _KNOWN_CMDS + r")(?![a-zA-Z]))")
_DOUBLE_BS_ANY_RE = re.compile(r"(?<!\\)\\\\(?=[a-zA-Z]{2,})")
_ROWS_RE = re.compile(r"(?<!\\)\\begin(?![a-zA-Z])|&")

# ISO interval notation: "]0, 1[" is (0, 1), "[0, 1[" is [0, 1), "]0, 1]" is (0, 1]. Read only
# where a bracket faces outward (an opening "]" or a closing "["), with plain endpoints, and
# where the interval stands alone (not "[1, 2], [3, 4]" or a matrix row).
_ISO_INTERVAL_RE = re.compile(
    r"(?:(?<=^)|(?<=[\s({,=$:])|(?<=\\cup)|(?<=\\cap)|(?<=\\in))([\[\]])"
    r"([^\[\](),;]+),([^\[\](),;]+)([\[\]])(?=$|[\s)},;.$]|\\cup|\\cap|\\setminus)")

_SPACING_RE = re.compile(r"(?<!\\)\\(?:[,;:! ]|quad|qquad|enspace|thinspace|hspace\{[^{}]*\}|"
                         r"displaystyle|textstyle|scriptstyle|scriptscriptstyle|limits|nolimits)(?![a-zA-Z])")
_SIZING_RE = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)"
                        r"(?![a-zA-Z])\s*(\\?[()\[\]|.{}]|\\[lr]?[vV]ert|\\langle|\\rangle)?")
# Plain-text maths ("pi/2", "sqrt(2)", "exp(16)", "2*pi"): function and constant names that
# LaTeX writes as commands. Only whole words not already a command are rewritten.
_PLAIN_NAMES_RE = re.compile(
    r"(?<![A-Za-z\\])(pi|sqrt|exp|ln|log|sin|cos|tan|cot|csc|arcsin|arccos|arctan|sinh|"
    r"cosh|tanh|theta|alpha|beta|infty)(?![A-Za-z])")
_PLAIN_INF_RE = re.compile(r"(?<![A-Za-z\\])(?:infinity|inf)(?![A-Za-z])", re.I)
# Typography only (underline, bold symbols, font size): the wrapped answer is the answer.
# Wrappers taking a group are unwrapped (``\underline{129}`` -> ``{129}``); declarations
# (``\bf 10``, ``{\bf 10}``, ``\large 129``) are dropped.
_WRAPPERS_RE = re.compile(r"\\(?:underline|boldsymbol|bm|pmb)\s*(?=\{)")
# Unit vectors (bold, hatted or arrowed i, j, k) are one notation, \hat{i}: not a unit text to
# drop (``-7\mathbf{i} + 16\mathbf{j}`` is a vector, never the number 9).
_UNIT_VECTOR_RE = re.compile(r"\\(?:mathbf|hat|vec|boldsymbol|bm|textbf)\s*"
                             r"\{\s*\\?([ijk])(?:math)?\s*\}")
# Colour is typography too: \color{red}{42}, \textcolor{blue}{42}, {\color{red} 42}.
_COLOR_RE = re.compile(r"\\(?:textcolor|color|colorbox)\s*(?:\[[a-zA-Z]*\]\s*)?\{[\w!.,\s]*\}\s*")
# A residue's modulus written after it (42 \pmod{100}, 42 (mod 100)) names the modulus, not a
# second value: the residue is the answer.
_MOD_SUFFIX_RE = re.compile(r"(?:\s|\\[ ,;:!])*(?:\\pmod\s*(?:\{\s*\d+\s*\}|\d+)|"
                            r"\(\s*(?:\\text\s*\{\s*)?mod\s*\}?\s*\d+\s*\)|"
                            r"\\b?mod\s*(?:\{\s*\d+\s*\}|\d+))\s*$")
_DECLARATIONS_RE = re.compile(r"\\(?:bf|it|rm|sf|tt|bfseries|mdseries|normalfont|tiny|"
                              r"scriptsize|footnotesize|small|normalsize|large|Large|LARGE|"
                              r"huge|Huge)(?![a-zA-Z])\s*")
# Upright / italic / text i and e (ISO style) are the imaginary unit and Euler's number.
_CONST_RE = re.compile(r"\\(?:mathrm|mathit|text|textrm|textit|operatorname)\s*\{([ie])\}")
# The logarithm to base e is the natural logarithm: \log_e 2, \log_{e} 2 -> \ln 2.
_LOG_E_RE = re.compile(r"\\log\s*_\s*(?:e|\{\s*e\s*\})(?![a-zA-Z])")
# A repeating decimal marked with \bar (0.\bar{3}, 0.1\bar{6}) is the \overline notation.
_BAR_RE = re.compile(r"(\d\.\d*)\\bar\s*(?:\{(\d+)\}|(\d))")
# A number with thousands separators filling a brace group: \frac{3,840}{289}, \sqrt{1,000}.
_GROUPED_ARG_RE = re.compile(r"(?<!\\)\{\s*(\d{1,3}(?:,\d{3})+)\s*\}")
_TEXT_CMDS_RE = re.compile(r"\\(?:textbf|textnormal|textrm|textit|textsf|texttt|mathrm|mathbf|"
                           r"mathit|mathsf|mathtt|mbox|operatorname\*?|emph|hbox)\s*\{")


def map_chars(s: str) -> str:
    """Replace unicode maths, superscripts, vulgar fractions and full-width characters by
    LaTeX/ASCII equivalents."""
    s = _SUPER_RE.sub(lambda m: _script("^", _SUPERSCRIPTS, m.group(0)), s)
    s = _SUB_RE.sub(lambda m: _script("_", _SUBSCRIPTS, m.group(0)), s)
    return _CHAR_RE.sub(lambda m: _CHAR_MAP[m.group(0)], s)


def _iso_intervals(s: str) -> str:
    """``]0, 1[`` -> ``(0, 1)``, ``[0, 1[`` -> ``[0, 1)``, ``]0, 1]`` -> ``(0, 1]``."""
    def rep(m: re.Match) -> str:
        lo, a, b, hi = m.groups()
        if lo == "[" and hi == "]":
            return m.group(0)
        return ("(" if lo == "]" else "[") + a + "," + b + (")" if hi == "[" else "]")
    return _ISO_INTERVAL_RE.sub(rep, s) if "[" in s or "]" in s else s


def _script(mark: str, table: dict, run: str) -> str:
    # one character: x² -> x^2 (as LaTeX writes it); a run: 10⁻³ -> 10^{-3}
    text = "".join(table[c] for c in run)
    return mark + (text if len(text) == 1 else "{" + text + "}")


def find_group(s: str, start: int, open_ch: str = "{", close_ch: str = "}") -> int:
    """Index just past the group opened at ``s[start]`` (which must be ``open_ch``).

    Returns -1 when the group is never closed (truncated output). Escaped braces (``\\{``)
    are not counted, so ``\\boxed{\\{1,2\\}}`` matches as a whole. Linear time.
    """
    depth = 0
    i, n = start, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in "{}":
            i += 2
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _sqrt_parens(s: str) -> str:
    # "\sqrt(x+1)" (from unicode √(x+1)) -> "\sqrt{x+1}"; "\sqrt5" -> "\sqrt{5}".
    out, i = [], 0
    while True:
        j = s.find(r"\sqrt", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        k = j + 5
        index = re.match(r"\[[^\[\]]*\]", s[k:])     # \sqrt[3]2 -> \sqrt[3]{2}
        if index:
            k += index.end()
        out.append(s[i:k])
        if k < len(s) and s[k] == "(":
            end = find_group(s, k, "(", ")")
            if end > 0:
                out.append("{" + s[k + 1:end - 1] + "}")
                i = end
                continue
        m = re.match(r"\s*(\d+(?:\.\d+)?|[a-zA-Z])", s[k:]) if k < len(s) and s[k] != "[" else None
        if m and not s[k:].lstrip().startswith("{"):
            out.append("{" + m.group(1) + "}")
            i = k + m.end()
            continue
        i = k


def _frac_shorthand(s: str) -> str:
    # \frac12 -> \frac{1}{2}; \frac1{72} -> \frac{1}{72}; \frac{9}4 -> \frac{9}{4}
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*([a-zA-Z0-9])\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\s*\{([^{}]*)\}\s*([a-zA-Z0-9])", r"\\frac{\1}{\2}", s)
    return s


def plain_names(s: str) -> str:
    """Plain-text maths to LaTeX commands: ``pi/2`` -> ``\\pi/2``, ``sqrt(2)`` -> ``\\sqrt(2)``,
    ``exp(16)`` -> ``e^{16}``, ``infinity`` -> ``\\infty``; ``*`` products are kept (latex2sympy
    reads them). Text inside ``\\text{...}`` is left alone (it may be a word answer)."""
    if not re.search(r"[a-z]{2}", s):
        return s
    parts = re.split(r"(\\text\s*\{[^{}]*\})", s)
    for k in range(0, len(parts), 2):
        t = _PLAIN_NAMES_RE.sub(r"\\\1", parts[k])
        t = _PLAIN_INF_RE.sub(r"\\infty", t)
        t = _exp_call(t)
        parts[k] = t
    return "".join(parts)


def _paren_exponents(s: str) -> str:
    # 2^(1/3) -> 2^{1/3}: plain-text exponents in parentheses (LaTeX would read ^( as ^{(})
    out, i = [], 0
    while True:
        j = s.find("^", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        k = j + 1
        while k < len(s) and s[k] == " ":
            k += 1
        if k < len(s) and s[k] == "(":
            end = find_group(s, k, "(", ")")
            if end > 0:
                out.append(s[i:j] + "^{" + s[k + 1:end - 1] + "}")
                i = end
                continue
        out.append(s[i:j + 1])
        i = j + 1


def _exp_call(s: str) -> str:
    # \exp(x) / \exp{x} -> e^{x}: one spelling for the exponential function.
    out, i = [], 0
    while True:
        j = s.find(r"\exp", i)
        if j < 0 or re.match(r"[A-Za-z]", s[j + 4:j + 5]):
            out.append(s[i:])
            return "".join(out)
        k = j + 4
        while k < len(s) and s[k] == " ":
            k += 1
        if k < len(s) and s[k] in "({":
            end = find_group(s, k, s[k], ")" if s[k] == "(" else "}")
            if end > 0:
                out.append(s[i:j] + "e^{" + s[k + 1:end - 1] + "}")
                i = end
                continue
        out.append(s[i:k])
        i = k


def strip_math_delims(s: str) -> str:
    """Remove surrounding ``$..$``, ``$$..$$``, ``\\(..\\)``, ``\\[..\\]`` and stray ``$``.

    Dollar signs left over after removing delimiters are dropped too: in an extracted final
    answer a lone ``$`` is either a broken delimiter or a currency sign, neither of which
    changes the value.
    """
    s = s.strip()
    for _ in range(4):
        before = s
        for a, b in (("$$", "$$"), ("$", "$"), (r"\(", r"\)"), (r"\[", r"\]")):
            if s.startswith(a) and s.endswith(b) and len(s) >= len(a) + len(b):
                s = s[len(a):len(s) - len(b)].strip()
        if s == before:
            break
    s = s.replace(r"\(", " ").replace(r"\)", " ").replace(r"\[", " ").replace(r"\]", " ")
    s = s.replace(r"\$", " ").replace("$", " ")
    return s.strip()


def clean_latex(s: str) -> str:
    """Canonical spelling of a LaTeX/plain answer (no semantic change).

    - unicode and full-width symbols -> LaTeX/ASCII; ``\\\\frac`` (doubled backslash) -> ``\\frac``
    - ``\\dfrac``/``\\tfrac``/``\\cfrac`` -> ``\\frac``; ``\\frac12`` -> ``\\frac{1}{2}``;
      ``\\sqrt3`` -> ``\\sqrt{3}``
    - ``\\left``/``\\right``/spacing commands dropped; ``10,\\!000`` and ``1{,}234`` -> plain
      digits with commas; ``\\textbf``/``\\mathrm``/... -> ``\\text``
    - relations spelled one way: ``\\le``, ``\\ge``, ``\\ne``, ``<``, ``>``
    - markdown bold and surrounding maths delimiters removed, whitespace collapsed, trailing
      sentence punctuation removed.

    Never raises; returns ``""`` for an empty input.
    """
    if not s:
        return ""
    s = map_chars(s)
    s = (_DOUBLE_BS_RE if _ROWS_RE.search(s) else _DOUBLE_BS_ANY_RE).sub(r"\\", s)
    s = re.sub(r"(?<=[\w)}])\s*\*\*\s*(?=[\w({-])", "^", s)   # Python power 9**9
    s = s.replace("**", " ").replace("__", " ").replace('\\"', " ").replace('"', " ")
    s = re.sub(r"(\d)\s*,\\!\s*(?=\d)", r"\1,", s)
    # 1{,}000 is a thousands separator, never a list comma ((1{,}000, 2{,}000) is a pair)
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d{3}(?!\d))", r"\1", s)
    s = re.sub(r"(\d)\s*\{\s*,\s*\}\s*(?=\d)", r"\1,", s)
    # \left. / \right. are null delimiters: the dot is not a decimal point
    s = _SIZING_RE.sub(lambda m: "" if m.group(1) in (None, ".") else m.group(1), s)
    s = _GROUPED_ARG_RE.sub(lambda m: "{" + m.group(1).replace(",", "") + "}", s)
    s = _UNIT_VECTOR_RE.sub(r"\\hat{\1}", s)
    s = _WRAPPERS_RE.sub("", s)
    s = _COLOR_RE.sub("", s)
    s = _MOD_SUFFIX_RE.sub("", s)
    s = _DECLARATIONS_RE.sub("", s)
    s = _CONST_RE.sub(r"\1", s)
    s = _LOG_E_RE.sub(r"\\ln", s)
    s = _BAR_RE.sub(lambda m: m.group(1) + r"\overline{" + (m.group(2) or m.group(3)) + "}", s)
    s = _SPACING_RE.sub(" ", s)
    s = _iso_intervals(s)
    s = re.sub(r"(?<=[)\]])\s*U\s*(?=[(\[])", r" \\cup ", s)     # (0, 1) U (2, 3): ASCII union
    s = re.sub(r"\\[lr]angle(?![a-zA-Z])", lambda m: "(" if m.group(0)[1] == "l" else ")", s)
    s = re.sub(r"(?:\^\s*)?\\(?:text)?degree(?![a-zA-Z])", r"^\\circ ", s)
    s = s.replace("~", " ")
    s = re.sub(r"\\[dtc]frac(?![a-zA-Z])", r"\\frac", s)
    s = _frac_shorthand(s)
    s = plain_names(s)
    s = _paren_exponents(s)
    s = _sqrt_parens(s)
    s = _TEXT_CMDS_RE.sub(r"\\text{", s)
    s = re.sub(r"\\text\s*\{\s*\}", "", s)
    s = re.sub(r"\\leq(?:slant)?(?![a-zA-Z])|\\le(?![a-zA-Z])|<=|\\lt(?![a-zA-Z])\s*=", r"\\le ", s)
    s = re.sub(r"\\geq(?:slant)?(?![a-zA-Z])|\\ge(?![a-zA-Z])|>=|\\gt(?![a-zA-Z])\s*=", r"\\ge ", s)
    s = re.sub(r"\\neq(?![a-zA-Z])|\\ne(?![a-zA-Z])|!=|=/=", r"\\ne ", s)
    s = re.sub(r"\\lt(?![a-zA-Z])", "<", s)
    s = re.sub(r"\\gt(?![a-zA-Z])", ">", s)
    s = s.replace(r"\%", "%").replace(r"\varnothing", r"\emptyset")
    s = re.sub(r"\\(?:mathbb|Bbb)\s*\{?\s*R\s*\}?", r"\\mathbb{R}", s)
    s = s.replace(r"\dots", r"\ldots").replace(r"\cdots", r"\ldots")
    s = currency_decimal_comma(s)   # before the $ signs go
    s = strip_math_delims(s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r",\s*(?:\.\.\.|…)\s*$", r", \\ldots", s)   # "1, 2, 3, ..." continues
    s = re.sub(r"(?<!\\)[.,;:。]+$", "", s).strip()
    s = re.sub(r"(?<![\d)}\s!])!+$", "", s).strip()     # "5!" is a factorial, "yes!" is not
    s = set_builder_condition(s)
    s = conjunction_as_intersection(s)
    return s


_SET_BUILDER_RE = re.compile(
    r"^\\\{\s*([A-Za-z])\s*(?:\\in\s*\\mathbb\{R\}\s*)?(?:\\mid|\||:|\\colon)\s*(.+?)\s*\\\}$")


def set_builder_condition(s: str) -> str:
    """``\\{x \\mid 1 \\le x < 4\\}`` (also ``\\{x : ...\\}``, ``\\{x | ...\\}``,
    ``\\{x \\in \\mathbb{R} \\mid ...\\}``) -> its condition ``1 \\le x < 4``: the set of
    reals described by a condition on one variable is compared as that condition."""
    m = _SET_BUILDER_RE.match(s)
    if not m or r"\}" in m.group(2) or not re.search(re.escape(m.group(1)), m.group(2)):
        return s
    return m.group(2)


_AND_RE = re.compile(r"\s*(?:\\text\{\s*and\s*\}|(?<![A-Za-z\\])and(?![A-Za-z])|并且|且|"
                     r"\\land(?![a-zA-Z])|\\wedge(?![a-zA-Z]))\s*")
_INEQ_RE = re.compile(r"<|>|\\le(?![a-zA-Z])|\\ge(?![a-zA-Z])|\\ne(?![a-zA-Z])")


def conjunction_as_intersection(s: str) -> str:
    """``x > -3 \\text{ and } x < 2`` -> ``(x > -3) \\cap (x < 2)``: inequalities in one variable
    joined by "and" hold together, so they describe the intersection of their solution sets
    (a comma or "or" lists alternatives, a union). Equations (``x = 1 and y = 2``) are left
    as they are."""
    if not _AND_RE.search(s) or re.search(r"(?<![A-Za-z])or(?![A-Za-z])|或|\\lor|\\vee|,", s):
        return s
    pieces = [p.strip() for p in _AND_RE.split(s)]
    if len(pieces) < 2 or not all(_INEQ_RE.search(p) and p.count("{") == p.count("}")
                                  for p in pieces):
        return s
    names = set(re.findall(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", s)))
    if len(names) != 1:
        return s
    return r" \cap ".join(f"({p})" for p in pieces)


_CURRENCY_RE = re.compile(r"[€£¥元]|\\euro|\bEUR\b|\bUSD\b|\bBRL\b|\bdollars?\b|\beuros?\b|\\\$")
_CURRENCY_PREFIX_RE = re.compile(r"\b(?:R|US|C|A|HK|NZ|S)\$")


def currency_decimal_comma(s: str) -> str:
    """``€3,50`` / ``3,50 €`` / ``R$ 3,20`` / ``1.234,56 €``: beside a currency sign, a comma
    followed by one or two digits is a decimal comma (``$1,000`` keeps its thousands
    separator). A bare ``$`` counts as a currency sign only when it is not a maths delimiter
    (an odd number of them), so ``$1,2$`` stays a list."""
    s = _CURRENCY_PREFIX_RE.sub(r"\\$", s)
    bare = len(re.findall(r"(?<!\\)\$", s))
    if not (_CURRENCY_RE.search(s) or bare % 2 == 1):
        return s
    return re.sub(r"(?<![\d.,])(\d{1,3}(?:\.\d{3})*|\d+),(\d{1,2})(?![\d,])",
                  lambda m: m.group(1).replace(".", "") + "." + m.group(2), s)


def compact(s: str) -> str:
    """Whitespace-free form for exact string comparison (``\\frac{1}{2}`` == ``\\frac {1} {2}``)."""
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\s+", "", s)
    s = s.replace("{", "").replace("}", "")
    return s


def unwrap_command(s: str, cmd: str) -> str | None:
    """If ``s`` is exactly ``\\cmd{...}``, return the inside, else ``None``."""
    s = s.strip()
    prefix = "\\" + cmd
    if not s.startswith(prefix):
        return None
    k = len(prefix)
    while k < len(s) and s[k] == " ":
        k += 1
    if k >= len(s) or s[k] != "{":
        return None
    end = find_group(s, k)
    if end != len(s):
        return None
    return s[k + 1:end - 1].strip()


def split_top_level(s: str, seps: str = ",;") -> list[str]:
    """Split ``s`` at separator characters outside any brackets.

    Brackets counted: ``()``, ``[]``, ``{}`` and LaTeX environments. A mismatched interval such
    as ``[0,1)`` still counts as one bracket level (open by ``[``, closed by ``)``). Returns
    stripped, non-empty parts.
    """
    parts, depth, cur, env = [], 0, [], 0
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            if s.startswith(r"\begin", i):
                env += 1
            elif s.startswith(r"\end", i):
                env -= 1
            elif s.startswith(r"\{", i):
                depth += 1
            elif s.startswith(r"\}", i):
                depth = max(0, depth - 1)
            cur.append(s[i:i + 2])
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        if c in seps and depth == 0 and env <= 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def brace_depth(s: str) -> int:
    """Maximum nesting depth of ``{}``/``()``/``[]`` in ``s`` (used as a guard)."""
    depth = best = 0
    for c in s:
        if c in "{([":
            depth += 1
            if depth > best:
                best = depth
        elif c in "})]":
            depth -= 1
    return best

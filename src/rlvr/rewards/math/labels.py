"""Names and variables in an answer's LaTeX: whether a side of ``=`` is a label (``x``,
``f(x)``, ``a_{37}``) naming a value rather than computing one, and which variables it holds.
:mod:`.structure` reads ``label = value`` with these, :mod:`.text_units` tells a unit from
algebra, :mod:`.realsets` an equation from a set."""

from __future__ import annotations

import re


def is_label(s: str) -> bool:
    """Whether ``s`` names a quantity rather than computing one: ``x``, ``a_{37}``, ``f(x)``,
    ``f^{-1}(x)``, ``A \\cup B``, ``|AB|``, ``A:B``, ``\\frac{NO}{BO}``, ``V_1:V_2``, ``P(A)``.
    Sums, products with numbers and powers are not labels (``a + 3z``, ``x^2/4``)."""
    t = s.replace(" ", "")
    if not t or len(t) > 40:
        return False
    t = re.sub(r"_\{[^{}]*\}|_\\?[A-Za-z0-9]", "", t)
    t = re.sub(r"\^\{?-1\}?(?=\()", "", t)     # f^{-1}(x): the inverse function, a name
    t = re.sub(r"(?<=[A-Za-z}])\([^()]*\)", "", t)
    t = re.sub(r"\\(?:frac|overline|angle|triangle|vec|mathbf|mathrm|operatorname|text|hat|bar)",
               "", t)
    t = re.sub(r"[{}|:/'()]|\\prime|\\\|", "", t)
    if not t or t in ("e", r"\pi", "i"):
        return False
    return bool(re.fullmatch(r"(?:[A-Za-z]|\\[A-Za-z]+)+", t))


def has_variables(s: str) -> bool:
    """Whether ``s`` holds a variable letter outside LaTeX commands (``2x + 1``, not ``\\pi``)."""
    return bool(re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", s)))


def variable_names(s: str) -> set[str]:
    """Letters and commands naming variables in ``s`` (``f(x)`` -> ``{f, x}``)."""
    without = re.sub(r"\\(?:frac|sqrt|cdot|times|left|right)", " ", s)
    return set(re.findall(r"\\[A-Za-z]+|[A-Za-z]", without))

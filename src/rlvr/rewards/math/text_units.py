"""What an answer says besides its value, taken off before it is parsed: ``\\text{...}``
groups (separators, scale words, units), currency signs, unit words at the end, degree signs,
a percent sign. Whether a word is a unit depends on what surrounds it (``5 cm`` is a length,
``4x^2`` is algebra), so :mod:`.structure` calls these on the answer as a whole and keeps the
canonical unit (:mod:`.units`) on the value it parses.
"""

from __future__ import annotations

import re

from .labels import has_variables
from .normalize import find_group
from .shapes import Scalar
from .units import BOUND_WORDS_RE, canonical_unit

_SCALE = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_SEPARATOR_WORDS = {"and", "or", "and/or", "或", "和", "或者"}
_UNIT_WORDS_SHORT = {"cm", "mm", "km", "kg", "mg", "ml", "ft", "lb", "lbs", "oz", "mi", "yd",
                     "hr", "hrs", "mph", "kph", "sec", "min", "rad", "deg", "sq", "cu", "pt",
                     "m", "in", "s", "h", "g", "l", "mL", "L"}
_TRIG_RE = re.compile(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])")
_CJK_RE = re.compile(r"[\u4e00-\u9fff]")


def replace_text_groups(s: str) -> tuple[str, str]:
    """Resolve every ``\\text{...}``: separators become commas, scale words become powers of
    ten, words that bound the value (``at least``) or hold a number stay, other words are units
    (dropped) unless the whole answer is text. Returns the text and
    the unit word that ended it (``5\\text{ cm}`` -> ``("5 ", "cm")``), if any."""
    out, i, trailing = [], 0, ""
    has_math = bool(re.search(r"[\d\\^=+]", re.sub(r"\\text\{[^{}]*\}", "", s)))
    while True:
        j = s.find(r"\text{", i)
        if j < 0:
            out.append(s[i:])
            break
        end = find_group(s, j + 5)
        if end < 0:
            out.append(s[i:])
            break
        out.append(s[i:j])
        inner = s[j + 6:end - 1].strip()
        low = inner.lower()
        if low in _SEPARATOR_WORDS:
            out.append(" , ")
        elif low in _SCALE:
            out.append(r" \times 10^{%d}" % _SCALE[low])
        elif BOUND_WORDS_RE.search(inner) or re.search(r"\d", inner):
            # "\text{at least } 12", "12 \text{ or more}", "3 \text{ (or 4)}": not a unit; kept,
            # so the answer does not read as the bare value
            out.append(f" {inner} ")
        elif has_math and not re.fullmatch(r"[\d.,\s()+-]+", inner):
            out.append(" ")
            unit_power = re.match(r"\s*\^\s*\{?\s*[23]\s*\}?", s[end:])
            word = inner
            if unit_power:          # "5\text{ cm}^2": the square belongs to the unit
                end += unit_power.end()
                word += "^" + unit_power.group(0).strip(" ^{}")
            trailing = word if not s[end:].strip(" .") else ""
        else:
            out.append(inner)
        i = end
    return "".join(out), trailing


def strip_units(s: str) -> tuple[str, bool, str]:
    """Remove currency signs, trailing unit words and degree signs; detect percent. Returns
    ``(text, percent, unit words removed from the end)``."""
    percent, removed = False, []
    s = re.sub(r"[€£¥元]|\\euro|\bUSD\b|\bdollars?\b|\bcents?\b", " ", s).strip()
    # a Chinese note in brackets (（个）, （单位：米）) is dropped; a hedge (（或4）) is not a note
    s = re.sub(r"[（(](?![^()（）]*(?:或|可能|也许|还是))[^()（）]*[\u4e00-\u9fff][^()（）]*[)）]",
               " ", s).strip()
    m = re.search(r"\s*(?:%|\bpercent\b|\bper cent\b|\bpct\b)\s*$", s)
    if m:
        percent, s = True, s[:m.start()].strip()
    if _TRIG_RE.search(s):
        s = re.sub(r"(\d+(?:\.\d+)?)\s*\^\s*\{?\s*\\circ\s*\}?", r"(\1\\pi/180)", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?", "", s)
    s = re.sub(r"\\circ(?![a-zA-Z])", "", s)
    for _ in range(3):
        m = re.search(r"(?<=[\d}).\s])\s*([A-Za-z]{2,}|[A-Za-z]+(?:\^\{?[23]\}?|\^\s*\d)|"
                      r"[A-Za-z]+/[A-Za-z]+|[\u4e00-\u9fff]+)\s*$|(?<=\d)\s+([mshgLl])\s*$", s)
        if not m or not re.search(r"\d", s[:m.start()]):
            break
        word = m.group(1) or m.group(2)     # group 2: a one-letter unit after "5 " (5 m, 3 s)
        scale = re.match(r"万亿|亿|万", word)
        if scale and re.search(r"\d$", s[:m.start(1)].rstrip()):
            # "2万人": 万 belongs to the number (20000, read by .numbers), 人 is a counted noun
            if word[scale.end():]:
                removed.insert(0, word[scale.end():])
            s = s[:m.start(1) + scale.end()].strip()
            break
        start = m.start(1) if m.group(1) else m.start(2)
        if _is_unit_word(word, s[:m.start()], spaced=s[:start][-1:].isspace()):
            if s[:m.start()].rstrip().endswith("\\"):
                break
            removed.insert(0, word)
            s = s[:m.start()].strip()
        else:
            break
    return s, percent, " ".join(removed)


def _is_unit_word(word: str, before: str, spaced: bool) -> bool:
    """Whether ``word``, ending an answer after ``before``, is a unit (or a counted noun such as
    ``apples``) rather than algebra. A power or a single letter is algebra unless it spells a
    unit of measurement: ``3R^2``, ``4x^2`` and ``\\pi r^2 h`` keep their letters, ``5 cm^2`` and
    ``12 \\text{ft}^3`` do not. A one-letter unit (``5 m``, ``5 m^2``) needs a number without
    variables before it, and a space unless the number is a decimal (``1,000.99m^2``): ``5m``
    and ``5m^2`` are products. Written onto the number, a two-letter unit must be a common
    abbreviation (``5cm``; ``2ms`` is a product) and a longer word a unit (``5abc`` is a
    product). Words that bound or deny the value (``or more``, ``not``) are never units."""
    base = re.sub(r"\^.*$", "", word)
    if _CJK_RE.match(word):
        return True
    if BOUND_WORDS_RE.fullmatch(base.lower()) or base.lower() in _SEPARATOR_WORDS:
        return False
    known = canonical_unit(word) is not None
    if "/" in word:
        return known or min(len(p) for p in base.split("/")) >= 2
    if len(base) == 1 or "^" in word:
        measured = spaced or re.fullmatch(r"\s*-?[\d,]*\.\d+\s*", before)   # 2.5m^2: metres
        return known and (len(base) > 1 or bool(measured and not has_variables(before)))
    if len(base) >= 3:
        return spaced or known
    return base in _UNIT_WORDS_SHORT or (spaced and known)


def unit_reading(node: Scalar, unit: str) -> Scalar:
    """``node`` read with a one-letter unit written onto its number (``25m^2``, ``5m``) when
    that spells ``unit``, the reference's unit: next to ``25 \\text{ m}^2`` the response
    ``25m^2`` is square metres, where alone it is a product. ``node`` itself otherwise."""
    m = re.fullmatch(r"\s*(-?\d[\d,]*(?:\.\d+)?)\s*([A-Za-z](?:\^\{?[23]\}?)?)\s*", node.text)
    if node.unit or not m or canonical_unit(m.group(2)) != unit:
        return node
    return Scalar(m.group(1), node.percent, unit)

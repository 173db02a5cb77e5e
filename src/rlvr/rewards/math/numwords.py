"""Numbers written in words: Chinese numerals and English number words.

>>> chinese_number("负二分之一")
(Fraction(-1, 2), None)
>>> english_number("two thirds")
(Fraction(2, 3), None)

Both return ``(value, decimals)`` (``decimals``: how many digits after the point the number was
written with, ``None`` for an exact value) or ``None`` when the text is not exactly one number.
Pure string work, no sympy.
"""

from __future__ import annotations

import re
from fractions import Fraction

Parsed = tuple[Fraction, "int | None"]

# ---------------------------------------------------------------------------------------------
# Chinese: 负三, 十二, 一百零五, 三点一四, 二分之一, 一又二分之一, 3分之2, 负5

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000}
ZH_NUMERAL_CHARS = "".join(_ZH_DIGITS) + "".join(_ZH_UNITS) + "点负又分之"
_ARABIC_RE = re.compile(r"\d+(?:\.\d+)?")


def chinese_number(t: str) -> Parsed | None:
    """Parse a number written in Chinese (digits 零..九, units 十 百 千 万 亿, decimal point 点,
    minus sign 负, fractions ``X分之Y`` = Y/X, mixed numbers ``A又X分之Y`` or ``1又1/2``); Arabic
    digits may stand in for any part (``负5``, ``3分之2``). ``百分之`` (percent) is handled by
    the caller. Returns ``None`` for anything else."""
    t = t.strip()
    if not t or not re.search(f"[{ZH_NUMERAL_CHARS}]", t):
        return None
    neg = t.startswith("负")
    t = t[1:] if neg else t
    whole = Fraction(0)
    if "又" in t:
        head, _, t = t.partition("又")
        w = _zh_plain(head)
        slash = re.fullmatch(r"(\d+)\s*/\s*(\d+)", t.strip())     # 1又1/2: an Arabic fraction
        if w is None or w[1] is not None or ("分之" not in t and not slash):
            return None
        whole = w[0]
        if slash:
            if int(slash.group(2)) == 0:
                return None
            v = whole + Fraction(int(slash.group(1)), int(slash.group(2)))
            return (-v if neg else v), None
    if "分之" in t:
        den_s, _, num_s = t.partition("分之")
        den, num = _zh_plain(den_s), _zh_plain(num_s)
        if den is None or num is None or den[0] == 0:
            return None
        v, dec = whole + num[0] / den[0], None
    else:
        parsed = _zh_plain(t)
        if parsed is None:
            return None
        v, dec = parsed
    return (-v if neg else v), dec


def _zh_plain(t: str) -> Parsed | None:
    """A number without sign or fraction: Chinese numerals with 点, or Arabic digits."""
    if _ARABIC_RE.fullmatch(t):
        return Fraction(t), (len(t.split(".")[1]) if "." in t else None)
    if not t or any(c not in _ZH_DIGITS and c not in _ZH_UNITS and c != "点" for c in t):
        return None
    int_part, _, frac_part = t.partition("点")
    if any(c not in _ZH_DIGITS for c in frac_part):
        return None
    value = _zh_integer(int_part) if int_part else 0
    if value is None:
        return None
    frac = Fraction(0)
    if frac_part:
        digits = "".join(str(_ZH_DIGITS[c]) for c in frac_part)
        frac = Fraction(int(digits), 10 ** len(digits))
    return Fraction(value) + frac, (len(frac_part) if frac_part else None)


def _zh_integer(t: str) -> int | None:
    if all(c in _ZH_DIGITS for c in t) and len(t) > 1:   # 一二三 written digit by digit
        return int("".join(str(_ZH_DIGITS[c]) for c in t))
    total, section, digit = 0, 0, None
    for c in t:
        if c in _ZH_DIGITS:
            digit = _ZH_DIGITS[c]
        elif c in ("万", "亿"):
            section = (section + (digit or 0)) * _ZH_UNITS[c]
            total += section
            section, digit = 0, None
        else:
            section += (1 if digit is None else digit) * _ZH_UNITS[c]
            digit = None
    return total + section + (digit or 0)


# ---------------------------------------------------------------------------------------------
# English: five, twenty-one, one hundred and five, negative three, three point five,
# one half, two thirds, three quarters, one and a half, a dozen

_UNITS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * k for k, w in enumerate(
    "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if k >= 2}
_SCALES = {"hundred": 100, "thousand": 10 ** 3, "million": 10 ** 6, "billion": 10 ** 9,
           "trillion": 10 ** 12}
_DENOMS = {"half": 2, "halves": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5,
           "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11,
           "twelfth": 12, "hundredth": 100, "thousandth": 1000}
_WORD_RE = re.compile(r"[a-z]+")


def english_number(t: str) -> Parsed | None:
    """Parse English number words (case-insensitive; hyphens, "and", a leading "negative" /
    "minus", "point" decimals, fractions such as "two thirds" / "a half", mixed numbers
    "one and a half", "a dozen"). ``None`` unless every word is part of one number."""
    words = _WORD_RE.findall(t.lower())
    if not words or re.sub(r"[a-z\s,-]", "", t.lower()).strip():
        return None
    neg = words[0] in ("negative", "minus")
    words = words[1:] if neg else words
    parsed = _mixed(words)
    if parsed is None:
        return None
    v, dec = parsed
    return (-v if neg else v), dec


def _mixed(words: list[str]) -> Parsed | None:
    # "one and a half": an integer, "and", a fraction
    for k in range(1, len(words) - 1):
        if words[k] == "and" and _denominator(words[-1]) is not None:
            whole, frac = _integer(words[:k]), _fraction(words[k + 1:])
            if whole is not None and frac is not None:
                return whole + frac, None
    if _denominator(words[-1]) is not None:
        frac = _fraction(words)
        return None if frac is None else (frac, None)
    if "point" in words:
        k = words.index("point")
        whole = _integer(words[:k]) if k else 0
        digits = [_UNITS.get(w) for w in words[k + 1:]]
        if whole is None or not digits or any(d is None or d > 9 for d in digits):
            return None
        text = "".join(map(str, digits))
        return Fraction(whole) + Fraction(int(text), 10 ** len(text)), len(text)
    if words == ["a", "dozen"] or words == ["dozen"]:
        return Fraction(12), None
    n = _integer(words)
    return None if n is None else (Fraction(n), None)


def _denominator(word: str) -> int | None:
    if word in _DENOMS:
        return _DENOMS[word]
    if word.endswith("s") and word[:-1] in _DENOMS:
        return _DENOMS[word[:-1]]
    return None


def _fraction(words: list[str]) -> Fraction | None:
    """"two thirds", "a half", "one quarter", "three fourths"."""
    den = _denominator(words[-1])
    head = words[:-1]
    if den is None:
        return None
    num = 1 if head in ([], ["a"], ["an"]) else _integer(head)
    return None if num is None else Fraction(num, den)


def _integer(words: list[str]) -> int | None:
    """"one hundred and five" -> 105; ``None`` if a word is not part of an integer."""
    words = [w for w in words if w != "and"]
    if not words:
        return None
    total, current, seen = 0, 0, False
    for w in words:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


_VOCAB = sorted(set(_UNITS) | set(_TENS) | set(_SCALES) | set(_DENOMS)
                | {d + "s" for d in _DENOMS}
                | {"a", "an", "and", "dozen", "point", "negative", "minus"},
                key=len, reverse=True)
_PHRASE_RE = re.compile(r"(?i)\b(?:" + "|".join(_VOCAB) + r")(?:[\s-]+(?:" + "|".join(_VOCAB)
                        + r"))*\b")
_FILLER = {"a", "an", "and"}


def english_numbers_in(text: str) -> list[str]:
    """Number phrases written in English words inside a sentence, in order, each exactly one
    number (``"So she has a dozen eggs."`` -> ``["a dozen"]``; ``"three-fourths of the square"``
    -> ``["three-fourths"]``). Leading and trailing filler words ("a", "and") are dropped
    unless they belong to the number ("a dozen", "a half")."""
    found = []
    for m in _PHRASE_RE.finditer(text):
        words = re.split(r"([\s-]+)", m.group(0))
        while words and words[-1].lower() in _FILLER | {""} or words and not words[-1].strip(" -"):
            words.pop()
        while words and (not words[0].strip(" -") or words[0].lower() in ("and",)):
            words.pop(0)
        phrase = "".join(words).strip(" -")
        if phrase and phrase.lower() not in _FILLER and english_number(phrase) is not None:
            found.append(phrase)
        elif phrase.lower().startswith(("a ", "an ")) and english_number(phrase.split(" ", 1)[1]):
            found.append(phrase.split(" ", 1)[1])
    return found

"""Reading the answer out of a sentence: :func:`refine` reduces the text after a marker to the
value it states (``"The largest $n$ is 34"`` -> ``"34"``), with the sentence tools the answer
finders share (where a sentence ends, maths spans, prose or not, :func:`looks_cut_off`).
"""

from __future__ import annotations

import re

from .clock import FIND_RE as CLOCK_RE
from .normalize import compact, currency_decimal_comma
from .numwords import ZH_NUMERAL_CHARS, english_number, english_numbers_in
from .units import BOUND_WORDS_RE

_COPULA_RE = re.compile(r"(?i)(?:\s(?:is|are|was|equals|be|it's|its)\s)|(?:是|为|等于)")
_FUNC_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "frac", "text",
               "mod", "pmod", "gcd", "lcm", "max", "min", "det", "arcsin", "arccos", "arctan",
               "and", "or", "infty", "cdot", "times", "circ", "left", "right", "pmatrix",
               "bmatrix", "begin", "end", "pct", "percent", "dfrac", "tfrac"}
# Lookbehinds are ASCII: a number right after a CJK character ("共有12种") is still a number;
# a Chinese scale after the digits is part of it ("2万" is 20000).
NUMBER_RE = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
                       r"(?:万亿|亿|万)?\s*%?|"
                       r"(?<![A-Za-z0-9_.])[-+]?\.\d+%?")
_ZH_NUMERAL_RE = re.compile(f"(?:百分之)?[{ZH_NUMERAL_CHARS}]+")
# Common words that contain numeral characters but are not numbers (一共 "altogether", 一样
# "the same", 第一 "first", 万一 "in case" ...).
_ZH_NOT_NUMBER_RE = re.compile(r"一共|一起|一样|一定|一下|一些|一直|一般|一边|一旦|"
                               r"一切|一致|一点儿|"
                               r"唯一|统一|同一|每一|万一|之一|第[零〇一二两三四五六七八九十百千万]+|"
                               r"十分|万分|百分比|分之一秒")


def math_spans(seg: str) -> list[tuple[int, int, str]]:
    """The maths spans of ``seg`` (``$$...$$``, ``$...$``, ``\\(...\\)``, ``\\[...\\]``) as
    ``(start, end, inner text)``, leaving out a ``$`` pair that encloses prose between two
    dollar amounts."""
    spans = []
    for m in _SPAN_RE.finditer(seg):
        inner = next(g for g in m.groups() if g is not None)
        if m.group(2) is not None and _CURRENCY_SPAN_RE.match(inner):
            continue     # "$250 each month ... saved $1,000": two dollar amounts, not maths
        spans.append((m.start(), m.end(), inner))
    return spans


# An escaped dollar (``$\\$45$``: a dollar sign typeset inside maths) neither opens nor closes
# an inline span.
_INLINE_RE = r"(?<!\\)\$((?:\\[\s\S]|[^$\\])*)\$"
_INLINE_SPAN = r"(?<!\\)\$((?:\\[\s\S]|[^$\\])+)\$"      # the same, not empty
_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|" + _INLINE_SPAN + r"|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_CURRENCY_SPAN_RE = re.compile(r"\d[\d,.]*\s+(?:[^\\$]*\s)?[A-Za-z]{3,}\s+[A-Za-z]{3,}")


def _prose_words(seg: str) -> list[str]:
    no_math = re.sub(_INLINE_RE + r"|\\\(.*?\\\)|\\text\{[^{}]*\}|\\[A-Za-z]+", " ", seg)
    return [w for w in re.findall(r"(?<![A-Za-z])[A-Za-z]{3,}(?![A-Za-z])|[\u4e00-\u9fff]{2,}",
                                  no_math)
            if w.lower() not in _FUNC_WORDS and not _ZH_NUMERAL_RE.fullmatch(w)]


def is_prose(seg: str) -> bool:
    """Whether ``seg`` is prose: two or more words outside maths (function names and numerals
    do not count), or one word of Chinese."""
    words = _prose_words(seg)
    return len(words) >= 2 or (len(words) == 1
                               and re.search(r"[\u4e00-\u9fff]", words[0]) is not None)


def sentence_end(seg: str) -> int:
    """Index where the first sentence of ``seg`` ends (outside maths)."""
    i, n, in_math = 0, len(seg), False
    while i < n:
        if seg.startswith("$$", i):
            close = seg.find("$$", i + 2)
            i = n if close < 0 else close + 2
            continue
        c = seg[i]
        if c == "\\" and in_math:
            i += 2       # an escaped character inside maths (``\$``) toggles nothing
            continue
        if c == "$" and not (i > 0 and seg[i - 1] == "\\"):
            if in_math or not currency_dollar(seg, i):
                in_math = not in_math
        elif not in_math:
            if seg.startswith("\n\n", i) or c in "。！？" or seg.startswith("I hope", i):
                return i
            if c == "\n" and seg[:i].strip():
                return i
            if c in ".!?" and (i + 1 == n or seg[i + 1] in " \n\t\"'") and not (
                    c == "." and i > 0 and seg[i - 1] == "\\"):
                return i
        i += 1
    return n


# "$18 every day.": a dollar sign before an amount with no closing `$` in its sentence, or whose
# would-be span holds no maths, is a currency sign, not the start of a maths span.
_AMOUNT_RE = re.compile(r"\$\s?\d[\d,]*(?:\.\d+)?")
_MATH_CHARS_RE = re.compile(r"[\\{}^_=+*/<>]")
_STOP_RE = re.compile(r"[.!?](?=\s|$)|\n")


def currency_dollar(seg: str, i: int) -> bool:
    """Whether the ``$`` at ``seg[i]`` is a currency sign (``"she makes $18."``, ``"$1,000 in
    total"``) rather than the opening of a maths span (``"$18 + x$"``, ``"$42 + \\frac{"``)."""
    amount = _AMOUNT_RE.match(seg, i)
    if not amount:
        return False
    rest = seg[amount.end():]
    close = re.search(r"(?<!\\)\$", rest)
    stop = _STOP_RE.search(rest)
    if close and not (stop and stop.start() < close.start()):
        return False     # closed in the same sentence: a maths span (or two amounts, see above)
    would_be = rest[:stop.start()] if stop else rest
    return not _MATH_CHARS_RE.search(would_be)


# "6, not 7" / 6，不是7 / 6而不是7: the value denied after the answer is not a second answer
# (nor, after the copula 是, the answer itself).
_DENIED_TAIL_RE = re.compile(r"(?:\s*[,，;；]\s*(?:and |but |而)?|\s+(?:and |but )|\s*而\s*|"
                             r"\s*[(（]\s*)"
                             r"(?:(?<![A-Za-z])not\b|不是|并非|并不是)[^。!?]*$")


def refine(seg: str) -> str | None:
    """Reduce the text after a marker to the answer itself.

    ``"The largest $n$ is 34"`` -> ``"34"``; ``"Jane started Sphere 3 hours ago"`` -> ``"3"``;
    pure maths is returned unchanged. ``None`` if prose without a single identifiable value.
    """
    # the rest of a bold marker ("**Final Answer**\n\n$$ 42 $$") is not part of the answer
    seg = _drop_discourse(re.sub(r"^[\s:：*]+", "", seg))
    if seg.startswith(("$$", r"\[")):
        close = seg.find("$$", 2) if seg.startswith("$$") else seg.find(r"\]")
        if close > 0:
            return seg[2:close].strip() or None
    end = sentence_end(seg)
    seg = drop_justification(seg[:end].strip().strip("*").strip())
    seg = _DENIED_TAIL_RE.sub("", seg) or seg
    if not seg:
        return None
    yes_no = _YES_NO_RE.match(seg)
    if yes_no and (not yes_no.group(2) or refine(yes_no.group(2)) is None):
        return yes_no.group(1)          # "No, it is not possible." / "Yes, since 7 divides 42."
    if english_number(seg) is not None:
        return seg          # "twenty-one", "one half": a number in words
    clocks = {m.group(0) for m in CLOCK_RE.finditer(seg)}
    if len(clocks) == 1 and not NUMBER_RE.search(CLOCK_RE.sub(" ", strip_spans(seg))):
        return clocks.pop().strip()      # "so it leaves at 9:05 a.m."
    choice = _CHOICE_SUBJECT_RE.match(seg)
    if choice:
        return choice.group(1)          # "Option (B) is the right one."
    if not is_prose(seg):
        return _unwrap_math(seg)
    cop = None
    for m in _COPULA_RE.finditer(seg):
        if seg[:m.start()].count("$") % 2 == 0:
            cop = m
    if cop is not None:
        after = _drop_discourse(seg[cop.end():].strip())
        if after and not is_prose(after):
            if not re.search(r"[\d\\$^=]|[\u4e00-\u9fff]", after) and english_number(after) is None:
                words = list(dict.fromkeys(english_numbers_in(seg)))
                if len(words) == 1 and not NUMBER_RE.search(strip_spans(seg)):
                    return words[0]      # "three-fourths of the square is shaded"
            return after
        seg = after or seg
    assigned = trailing_assignment(seg)
    if assigned:
        return assigned
    spans = math_spans(seg)
    distinct = {compact(s[2]) for s in spans}
    if len(distinct) == 1 and not re.search(r"\d", strip_spans(seg)):
        return seg if _bounded(seg) else spans[-1][2]
    nums = {n.group(0).replace(" ", "")
            for n in NUMBER_RE.finditer(currency_decimal_comma(strip_spans(seg)))}
    if len(nums) == 1 and not spans:
        return seg if _bounded(seg) else _math_token(seg, nums.pop())
    if not nums and not spans:
        zh = zh_numerals(seg)
        if len(zh) == 1:
            return zh[0]
        words = list(dict.fromkeys(english_numbers_in(seg)))
        if len(words) == 1:
            return words[0]      # "So she has a dozen eggs.", "three-fourths of it is shaded"
    if spans and seg.rstrip(" .").endswith("$"):
        return spans[-1][2]
    return None


# Discourse adverbs right after the marker or copula ("The answer is still 25.", "is therefore
# $x = 3$") say how the value is reached or stated, not what it is. Words that bound or qualify
# the value ("at least", "about", "not") are not among them and stay with the answer.
_DISCOURSE_RE = re.compile(
    r"(?i)^(?:(?:still|now|also|therefore|thus|hence|clearly|simply|indeed|exactly|precisely|"
    r"actually|just|again|so|then|definitely|certainly|obviously|surely|really|finally)"
    r"(?:\s*,\s*|\s+))+(?=[-+$\\(\d.]|[A-Za-z]\b|[A-Za-z]{2,}\s*(?:\(|=))")


def _drop_discourse(seg: str) -> str:
    """``seg`` without leading discourse adverbs before its value (``"still 25"`` -> ``"25"``,
    ``"then $x = 2$"`` -> ``"$x = 2$"``); unchanged when no value-like text follows them."""
    return _DISCOURSE_RE.sub("", seg, count=1)


def _bounded(seg: str) -> bool:
    """Whether the sentence bounds or denies its one value instead of stating it (``"more than
    12"``, ``"at least $12$"``, ``"12 or more"``, ``"not 12"``): then the whole sentence is the
    answer, which is not the value."""
    for m in BOUND_WORDS_RE.finditer(seg):
        if re.match(r"\s*(?:\$|\\\()?\s*[-+]?\.?\d", seg[m.end():]):
            return True
        if re.match(r"(?i)or|at", m.group(0)) and re.search(r"[\d$)]\s*$", seg[:m.start()]):
            return True
    return False


# A justification after the answer (", since x > 0", " because 3 × 4 = 12", ", which is the
# number of ways", ", as required", " is the only solution") and a trailing remark in brackets
# ("(ways)", "(not 13)", "(since 6 × 7 = 42)"), but not an alternative or a hedge ("(or 0.25)",
# "(i.e. 1/4)", "(maybe 13)").
_JUSTIFY_RE = re.compile(
    r"(?i)(?:,|(?<=\s))(?:because|since|as\s+(?:required|expected|desired|claimed|needed|shown))\b"
    r"|,\s*which\b|(?<=\s)is\s+the\s+(?:only|unique)\s+(?:solution|answer|root|value|possibility)\b"
    r"|[，,]\s*(?:因为|由于)")
_REMARK_RE = re.compile(r"\s\(([^()]*)\)$")
_NOT_A_REMARK_RE = re.compile(r"(?i)\b(?:or|maybe|possibly|perhaps|probably|might|could|i\.\s?e|"
                              r"e\.\s?g|that is|equivalently|approx|about|roughly|alternatively)\b")
_YES_NO_RE = re.compile(r"(?i)(yes|no)\s*(?:[,.;:!]\s*(.*)|$)", re.S)


def drop_justification(seg: str) -> str:
    """``seg`` without a justification or remark after its answer (the first one outside
    maths): ``"12 because 3 × 4 = 12"`` -> ``"12"``, ``"x = 5 (we reject x = -2)"`` ->
    ``"x = 5"``. Unchanged when nothing would be left before it."""
    for m in _JUSTIFY_RE.finditer(seg):
        head = seg[:m.start()].rstrip(" ,，\t\n")
        if head and head.count("$") % 2 == 0 and head.count("(") == head.count(")"):
            return head      # (a "since" inside a bracketed remark leaves with the remark)
    m = _REMARK_RE.search(seg)
    if m and re.search(r"(?<![\\A-Za-z])[A-Za-z]{2,}", m.group(1)) and \
            not _NOT_A_REMARK_RE.search(m.group(1)) and seg[:m.start()].strip():
        return seg[:m.start()].rstrip()
    return seg


# A multiple-choice answer stated as the subject: "Option E is correct", "(B) is the right one".
_CHOICE_SUBJECT_RE = re.compile(
    r"(?i:(?:the\s+)?(?:option|choice|answer)\s+)?\(?([A-J])\)?\s+(?i:is|would\s+be)\s+"
    r"(?i:the\s+)?(?i:correct|right|best|true)(?i:\s+(?:one|answer|choice|option))?\s*[.!]?$")
_TRAILING_ASSIGN_RE = re.compile(
    r"(?:^|[\s,:;])([A-Za-z](?:_\{?\w+\}?)?(?:\([a-z]\))?\s*=\s*[^=]+?)\s*$")


def trailing_assignment(seg: str) -> str | None:
    """``"Taking the positive root, x = (-1 + sqrt(5))/2"`` -> ``"x = (-1 + sqrt(5))/2"``: a
    sentence that ends by giving a variable its value (the value has no prose in it)."""
    m = _TRAILING_ASSIGN_RE.search(seg.rstrip(" ."))
    if not m or "$" in m.group(1):
        return None
    value = m.group(1).split("=", 1)[1]
    return m.group(1).strip() if value.strip() and not is_prose(value) else None


_TOKEN_OP_RE = re.compile(r"[\^*/]|\b(?:sqrt|pi|exp|ln|log)\b")


def _math_token(seg: str, number: str) -> str:
    """The plain-text maths written around ``number`` when it is part of one
    (``"a factor of e^16."`` -> ``"e^16"``, ``"about 3*pi"`` -> ``"3*pi"``), else ``number``."""
    for tok in re.findall(r"[^\s,;]+", seg):
        tok = tok.rstrip(".。!?")
        if (number in tok and tok != number and _TOKEN_OP_RE.search(tok)
                and not re.search(r"[A-Za-z]{5,}", tok)):
            return tok
    return number


def zh_numerals(seg: str) -> list[str]:
    """Distinct numbers written in Chinese numerals in a sentence (``一共有十二个`` ->
    ``["十二"]``), leaving out words that merely contain numeral characters."""
    seg = seg.replace("千米", "公里").replace("千克", "公斤").replace("千瓦", "瓦")  # 千 of a unit
    found = _ZH_NUMERAL_RE.findall(_ZH_NOT_NUMBER_RE.sub("，", seg))
    return list(dict.fromkeys(n for n in found if n.strip("点分之又负")))


def _unwrap_math(seg: str) -> str:
    """``$x = 7$`` -> ``x = 7`` when one maths span is the whole segment."""
    m = re.fullmatch(r"\$\$([^$]+)\$\$|" + _INLINE_SPAN + r"|\\\((.+?)\\\)|\\\[(.+?)\\\]", seg,
                     re.S)
    if not m:
        return seg
    return next(g for g in m.groups() if g is not None).strip()


def strip_spans(seg: str) -> str:
    """``seg`` with its inline maths (``$...$``, ``\\(...\\)``) replaced by spaces."""
    return re.sub(_INLINE_RE + r"|\\\(.*?\\\)", " ", seg)


_STOP_WORDS_RE = re.compile(r"(?i)\b(?:and|or|then|to|the|a|an|of|by|with|for|from|in|on|at|we|is|"
                            r"are|be|that|which|so|but|because|if|since|plus|minus|times|into|as|"
                            r"divided|multiplied|let|this|it|its|our|next|first)$")


def looks_cut_off(seg: str) -> bool:
    """Whether a prose sentence stops mid-way (a truncated completion): it ends in a comma, an
    open bracket or a function word, or more than two words follow its last value, with no
    sentence end. ``"the total is 42 and then we"`` is cut off; ``"the total is 42"``, ``"She
    has 15 apples"`` and ``"共有12种方法"`` are not."""
    t = seg.rstrip().rstrip("*").rstrip()
    if not t:
        return True
    if _unbalanced(t):
        return True      # "... which gives $42 + \frac{": cut inside maths
    if t[-1] in ".!?。！？$)]}%\"'" or t[-1].isdigit() or _CJK_END_RE.search(t):
        return False
    if t[-1] in ",:;(-=+，：；（、" or _STOP_WORDS_RE.search(t):
        return True
    values = list(re.finditer(r"\d|\$|\\\)", t))
    tail = t[values[-1].end():] if values else t
    return len(re.findall(r"[A-Za-z]+", tail)) > 2


def _unbalanced(t: str) -> bool:
    unescaped = re.sub(r"\\[${}]", "", t)
    dollars = [i for i, c in enumerate(unescaped) if c == "$"]
    if len(dollars) % 2 == 1 and currency_dollar(unescaped, dollars[-1]):
        dollars.pop()    # "She saved $1,000 in total.": a currency sign, not an open span
    return len(dollars) % 2 == 1 or unescaped.count("{") > unescaped.count("}") or \
        bool(re.search(r"\\[A-Za-z]*$|[\^_]$", t))


_CJK_END_RE = re.compile(r"[\u4e00-\u9fff]$")

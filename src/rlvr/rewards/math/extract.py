"""Finding the final answer in a model completion (and in a dataset reference).

Order of evidence, strongest first:

1. Only the text after the last ``</think>`` counts (reasoning is not an answer); chat-template
   residue (``<|im_start|>`` ...) and everything after it is cut off.
2. ``<answer>...</answer>`` tags (the last pair).
3. ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces, ``\\boxed 7``). Boxes written next to each
   other (joined only by spaces, commas, "and"/"or") form one list answer; a box followed by
   prose and a later box was abandoned, so the later one counts. Many different boxes
   (a "shotgun") are several answers.
4. ``#### N`` (GSM8K).
5. Marker phrases: "final answer", "the answer is", "Answer:", 答案是/答案为/最终答案/约为/约等于.
6. A closing "Therefore/Thus/So/Hence ..." sentence that ends with a value.
7. A short response that is only an answer.
8. The last number in the text, only if configured (off by default: credit for a number that
   merely appears in long reasoning teaches the wrong thing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.rewards.types import Extraction, Status

from .normalize import clean_latex, compact, currency_decimal_comma, find_group
from .clock import FIND_RE as CLOCK_RE
from .numwords import ZH_NUMERAL_CHARS, english_number, english_numbers_in

# Chat-template special tokens of any model family: <|im_end|>, <|eot_id|>, <|end|>,
# <｜end▁of▁sentence｜> (full-width bars), </s>, <end_of_turn>, <eos>, [INST].
_RESIDUE_RE = re.compile(r"<\|[A-Za-z_][\w.\-]{0,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?s>|<eos>|<pad>|"
                         r"<(?:start|end)_of_turn>|\[/?INST\]|\n[ \t]*(?:#{1,3}[ \t]*)?(?:User|Human|USER|HUMAN)[ \t]*:")
_LEADING_RESIDUE_RE = re.compile(r"^(?:\s*(?:" + _RESIDUE_RE.pattern + r")\s*(?:assistant|model)?\b\s*)+",
                                 re.I)
_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_HASH_RE = re.compile(r"####\s*([^\n]*)")
_MARKER_RE = re.compile(
    r"(?i)(?:\b(?:the\s+)?final\s+answer\b(?:\s+is\b|\s*[:：])?"
    r"|\b(?:the\s+)?(?:correct\s+)?answer\s+(?:is|would\s+be|should\s+be)\b"
    r"|\banswer\s*[:：]|\banswer\b(?=\s*(?:\$|\\\(|\\\[))"
    r"|最终答案\s*(?:是|为|：|:)?|答案\s*(?:约为|约等于|应为|是|为|：|:)?|(?<![回解])答\s*[:：]"
    r"|(?:结果|结论)\s*(?:是|为)|约为|约等于)")
_APPROX_RE = re.compile(r"(?i)约|approximately|approx\.?|about|roughly|\\approx|≈")
_CONCLUSION_RE = re.compile(r"(?i)(?:^|(?<=[\s.。$]))(?:therefore|thus|hence|so|in conclusion|"
                            r"consequently|in total|altogether)\b|所以|因此|综上所述|综上|"
                            r"一共|总共|共计|合计|总计|共有")
_HEDGE_RE = re.compile(r"(?i)\b(?:maybe|possibly|perhaps|probably|not sure|either|alternatively|"
                       r"(?:could|might) (?:also )?be)\b|可能|不确定|也许|或许")
_COPULA_RE = re.compile(r"(?i)(?:\s(?:is|are|was|equals|be|it's|its)\s)|(?:是|为|等于)")
_FUNC_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "frac", "text",
               "mod", "pmod", "gcd", "lcm", "max", "min", "det", "arcsin", "arccos", "arctan",
               "and", "or", "infty", "cdot", "times", "circ", "left", "right", "pmatrix",
               "bmatrix", "begin", "end", "pct", "percent", "dfrac", "tfrac"}
# Lookbehinds are ASCII: a number right after a CJK character ("共有12种") is still a number.
_NUMBER_RE = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\s*%?|"
                        r"(?<![A-Za-z0-9_.])[-+]?\.\d+%?")
_ZH_NUMERAL_RE = re.compile(f"(?:百分之)?[{ZH_NUMERAL_CHARS}]+")
# Common words that contain numeral characters but are not numbers (一共 "altogether", 一样
# "the same", 第一 "first", 万一 "in case" ...).
_ZH_NOT_NUMBER_RE = re.compile(r"一共|一起|一样|一定|一下|一些|一直|一般|一边|一旦|一切|一致|一点儿|"
                               r"唯一|统一|同一|每一|万一|之一|第[零〇一二两三四五六七八九十百千万]+|"
                               r"十分|万分|百分比|分之一秒")
_EMPTY_PHRASE_RE = re.compile(r"(?i)\bno (?:real |integer |positive )?(?:solutions?|roots?)\b|"
                              r"\bempty set\b|无解|没有(?:实数)?解")
_SHORT_CHARS = 160
_MAX_GROUP = 100          # boxes listed together beyond this are not read one by one
_MAX_MARKERS = 6          # only the last few marker phrases can hold the final answer
_MAX_SEGMENT = 3000       # an answer sentence longer than this is not an answer
_SHOTGUN = 5


@dataclass(frozen=True)
class _Box:
    start: int
    end: int
    content: str | None     # None: never closed (truncated)


def _brace_partners(text: str) -> dict[int, int]:
    """Map each unescaped ``{`` to its matching ``}`` (one linear pass with a stack)."""
    partners, stack = {}, []
    for m in re.finditer(r"\\[{}]|[{}]", text):
        tok = m.group(0)
        if len(tok) == 2:
            continue
        if tok == "{":
            stack.append(m.start())
        elif stack:
            partners[stack.pop()] = m.start()
    return partners


def find_boxes(text: str) -> list[_Box]:
    """All outermost ``\\boxed``/``\\fbox`` occurrences with their contents, in order.

    Linear time even for adversarial inputs (thousands of unclosed boxes). A box that is never
    closed gets ``content=None`` (truncated output).
    """
    if "boxed" not in text and "fbox" not in text:
        return []
    partners = _brace_partners(text)
    boxes, reach = [], -1
    for m in _BOX_RE.finditer(text):
        if m.start() < reach:
            continue          # nested inside the previous box
        k = m.end()
        while k < len(text) and text[k] == " ":
            k += 1
        if k < len(text) and text[k] == "{":
            close = partners.get(k)
            if close is None:
                boxes.append(_Box(m.start(), len(text), None))
                reach = len(text)
                continue
            boxes.append(_Box(m.start(), close + 1, text[k + 1:close]))
            reach = close + 1
        else:
            mm = re.match(r"[^\s$.,;{}]{1,50}", text[k:k + 50])
            if mm:
                boxes.append(_Box(m.start(), k + mm.end(), mm.group(0)))
                reach = k + mm.end()
    return boxes


def end_of_turn(text: str) -> str:
    """The completion's own turn: a leading ``<|im_start|>assistant`` echo dropped, and
    everything from the first chat-template special token (or a ``User:`` line) on cut off,
    since what follows is another turn. Used by the answer extractor and the format rules."""
    text = _LEADING_RESIDUE_RE.sub("", text)
    m = _RESIDUE_RE.search(text)
    return text[:m.start()] if m else text


def _final_part(text: str) -> tuple[str, str | None]:
    """Split off reasoning: returns (final text, reasoning or None)."""
    text = end_of_turn(text)
    if "</think>" in text:
        k = text.rfind("</think>")
        return text[k + len("</think>"):], text[:k].replace("<think>", "")
    if "<think>" in text:
        return "", text      # reasoning never closed: the output was cut off
    return text, None


def _is_joiner(between: str) -> bool:
    """Whether the text between two boxes just lists them (", ", " and ", "\\quad")."""
    t = re.sub(r"\\text\{([^{}]*)\}", r" \1 ", between)
    t = re.sub(r"\\(?:quad|qquad|[,;:! ])|\\[()\[\]]|\$|&|\\\\", " ", t)
    if len(t.strip()) > 40 or re.search(r"[.?!:。？！]|\n\s*\n", t):
        return False
    words = re.findall(r"[A-Za-z]+", t)
    if re.search(r"(?i)\b(?:wait|actually|no|not|but|instead|correct\w*|mistake|recompute|"
                 r"however|if|when|otherwise|else)\b", t):
        return False
    return not words or bool(re.search(r"(?i)\b(?:and|or)\b|[,;和或]", t))


def _from_boxes(text: str, boxes: list[_Box]) -> Extraction:
    last = boxes[-1]
    if last.content is None:
        return Extraction(Status.unparsed, method="boxed", reasoning=text[:last.start])
    group = [last]
    for prev in reversed(boxes[-_MAX_GROUP:-1]):
        if prev.content is None or not _is_joiner(text[prev.end:group[0].start]):
            break
        group.insert(0, prev)
    contents = [g.content.strip() for g in group]
    if not any(contents) or any(not c for c in contents):
        return Extraction(Status.unparsed, method="boxed", reasoning=text[:last.start])
    distinct_all = {re.sub(r"\s+", "", b.content) for b in boxes if b.content}
    if len(distinct_all) >= _SHOTGUN and len(distinct_all) > 2 * len(group):
        return Extraction(Status.multiple_answers, method="boxed",
                          candidates=tuple(sorted(distinct_all))[:20])
    uniq = list(dict.fromkeys(contents))
    answer = uniq[0] if len(uniq) == 1 else ", ".join(uniq)
    cands = tuple(uniq) if len(uniq) > 1 else ()
    return Extraction(Status.wrong, answer, "boxed", reasoning=text[:group[0].start], candidates=cands)


def _math_spans(seg: str) -> list[tuple[int, int, str]]:
    spans = []
    for m in re.finditer(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", seg, re.S):
        inner = next(g for g in m.groups() if g is not None)
        if m.group(2) is not None and _CURRENCY_SPAN_RE.match(inner):
            continue     # "$250 each month ... saved $1,000": two dollar amounts, not maths
        spans.append((m.start(), m.end(), inner))
    return spans


_CURRENCY_SPAN_RE = re.compile(r"\d[\d,.]*\s+(?:[^\\$]*\s)?[A-Za-z]{3,}\s+[A-Za-z]{3,}")


def _prose_words(seg: str) -> list[str]:
    no_math = re.sub(r"\$[^$]*\$|\\\(.*?\\\)|\\text\{[^{}]*\}|\\[A-Za-z]+", " ", seg)
    return [w for w in re.findall(r"(?<![A-Za-z])[A-Za-z]{3,}(?![A-Za-z])|[\u4e00-\u9fff]{2,}", no_math)
            if w.lower() not in _FUNC_WORDS and not _ZH_NUMERAL_RE.fullmatch(w)]


def _is_prose(seg: str) -> bool:
    words = _prose_words(seg)
    return len(words) >= 2 or (len(words) == 1 and re.search(r"[\u4e00-\u9fff]", words[0]) is not None)


def _sentence_end(seg: str) -> int:
    """Index where the first sentence of ``seg`` ends (outside maths)."""
    i, n, in_math = 0, len(seg), False
    while i < n:
        if seg.startswith("$$", i):
            close = seg.find("$$", i + 2)
            i = n if close < 0 else close + 2
            continue
        c = seg[i]
        if c == "$":
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


def refine(seg: str) -> str | None:
    """Reduce the text after a marker to the answer itself.

    ``"The largest $n$ is 34"`` -> ``"34"``; ``"Jane started Sphere 3 hours ago"`` -> ``"3"``;
    pure maths is returned unchanged. ``None`` if prose without a single identifiable value.
    """
    seg = seg.strip().lstrip(":：").strip()
    if seg.startswith("$$") or seg.startswith(r"\["):
        close = seg.find("$$", 2) if seg.startswith("$$") else seg.find(r"\]")
        if close > 0:
            return seg[2:close].strip() or None
    end = _sentence_end(seg)
    seg = seg[:end].strip().strip("*").strip()
    if not seg:
        return None
    if english_number(seg) is not None:
        return seg          # "twenty-one", "one half": a number in words
    clocks = {m.group(0) for m in CLOCK_RE.finditer(seg)}
    if len(clocks) == 1 and not _NUMBER_RE.search(CLOCK_RE.sub(" ", _strip_spans(seg))):
        return clocks.pop().strip()      # "so it leaves at 9:05 a.m."
    if not _is_prose(seg):
        return _unwrap_math(seg)
    cop = None
    for m in _COPULA_RE.finditer(seg):
        if seg[:m.start()].count("$") % 2 == 0:
            cop = m
    if cop is not None:
        after = seg[cop.end():].strip()
        if after and not _is_prose(after):
            if not re.search(r"[\d\\$^=]|[\u4e00-\u9fff]", after) and english_number(after) is None:
                words = list(dict.fromkeys(english_numbers_in(seg)))
                if len(words) == 1 and not _NUMBER_RE.search(_strip_spans(seg)):
                    return words[0]      # "three-fourths of the square is shaded"
            return after
        seg = after or seg
    assigned = _trailing_assignment(seg)
    if assigned:
        return assigned
    spans = _math_spans(seg)
    distinct = {compact(s[2]) for s in spans}
    if len(distinct) == 1 and not re.search(r"\d", _strip_spans(seg)):
        return spans[-1][2]
    nums = {n.group(0).replace(" ", "")
            for n in _NUMBER_RE.finditer(currency_decimal_comma(_strip_spans(seg)))}
    if len(nums) == 1 and not spans:
        return _math_token(seg, nums.pop())
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


_TRAILING_ASSIGN_RE = re.compile(r"(?:^|[\s,:;])([A-Za-z](?:_\{?\w+\}?)?(?:\([a-z]\))?\s*=\s*[^=]+?)\s*$")


def _trailing_assignment(seg: str) -> str | None:
    """``"Taking the positive root, x = (-1 + sqrt(5))/2"`` -> ``"x = (-1 + sqrt(5))/2"``: a
    sentence that ends by giving a variable its value (the value has no prose in it)."""
    m = _TRAILING_ASSIGN_RE.search(seg.rstrip(" ."))
    if not m or "$" in m.group(1):
        return None
    value = m.group(1).split("=", 1)[1]
    return m.group(1).strip() if value.strip() and not _is_prose(value) else None


_TOKEN_OP_RE = re.compile(r"[\^*/]|\b(?:sqrt|pi|exp|ln|log)\b")


def _math_token(seg: str, number: str) -> str:
    """The plain-text maths written around ``number`` when it is part of one
    (``"a factor of e^16."`` -> ``"e^16"``, ``"about 3*pi"`` -> ``"3*pi"``), else ``number``."""
    for tok in re.findall(r"[^\s,;]+", seg):
        tok = tok.rstrip(".。!?")
        if number in tok and tok != number and _TOKEN_OP_RE.search(tok) and not re.search(r"[A-Za-z]{5,}", tok):
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
    m = re.fullmatch(r"\$\$([^$]+)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", seg, re.S)
    if not m:
        return seg
    return next(g for g in m.groups() if g is not None).strip()


def _strip_spans(seg: str) -> str:
    return re.sub(r"\$[^$]*\$|\\\(.*?\\\)", " ", seg)


def _hedged(seg: str) -> bool:
    return bool(_HEDGE_RE.search(seg)) and len(set(re.findall(r"\d+(?:\.\d+)?", seg))) >= 2


def _from_markers(text: str) -> Extraction | None:
    matches = list(_MARKER_RE.finditer(text.replace("**", "  ")))
    for m in reversed(matches[-_MAX_MARKERS:]):
        seg = text[m.end():m.end() + _MAX_SEGMENT]
        if not seg.strip(" \n*:：$"):
            if m is matches[-1]:     # "... the final answer is" and nothing: cut off
                return Extraction(Status.unparsed, method="phrase", reasoning=text[:m.start()])
            continue
        head = seg[:_sentence_end(seg.strip()) + (len(seg) - len(seg.lstrip()))]
        # a hedge in the answer sentence or right after it ("5. Or it might be 6.")
        if _hedged(head) or _hedged(seg[:len(head) + 300]) and _HEDGE_RE.search(seg[len(head):len(head) + 300]):
            return Extraction(Status.multiple_answers, method="phrase", reasoning=text[:m.start()])
        ans = refine(seg)
        if ans:
            method = "zh_marker" if re.search(r"[\u4e00-\u9fff]", m.group(0)) else "phrase"
            approx = bool(_APPROX_RE.search(m.group(0)))
            return Extraction(Status.wrong, ans, method, approx, reasoning=text[:m.start()])
    return None


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
    return unescaped.count("$") % 2 == 1 or unescaped.count("{") > unescaped.count("}") or \
        bool(re.search(r"\\[A-Za-z]*$|[\^_]$", t))


_CJK_END_RE = re.compile(r"[\u4e00-\u9fff]$")


_VALUE_RE = re.compile(CLOCK_RE.pattern + "|" + _NUMBER_RE.pattern)
_PLEASANTRY_RE = re.compile(r"(?:\s*(?:I hope\b|Hope this helps|Let me know\b|希望)[^.!?。！\n]*[.!?。！]*)+\s*$",
                            re.I)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\$(])|(?<=[。！？])|\n+")
_LAST_SENTENCE_CHARS = 600


def _without_pleasantries(text: str) -> str:
    """Drop closing courtesy sentences ("I hope it is correct.") after the last statement."""
    return _PLEASANTRY_RE.sub("", text.rstrip()).rstrip()


def _from_conclusion(text: str) -> Extraction | None:
    """A final sentence "Therefore, ... is X." counts as a marked answer."""
    body = _without_pleasantries(text)
    matches = list(_CONCLUSION_RE.finditer(body))
    if not matches:
        return None
    m = matches[-1]
    seg = body[m.end():].lstrip(" ,，")
    if len(seg) > _MAX_SEGMENT:
        return None
    if looks_cut_off(seg):
        return None      # "so the total is 42 and then we": truncated, not a conclusion
    if seg[_sentence_end(seg):].strip(" .。!\n"):
        return None      # more sentences follow: not the closing statement
    ans = refine(seg)
    if ans:
        return Extraction(Status.wrong, ans, "phrase", reasoning=body[:m.start()])
    return None


def _from_last_sentence(text: str) -> Extraction | None:
    """The closing sentence states the answer without a marker ("She saved $1,000 in total.",
    "Solving, we find x = 5.", "共有12种方法。"): accepted only when it holds a single value,
    is complete (a cut-off completion is not credited with its last number), and is neither a
    question nor a hedge."""
    body = _without_pleasantries(text)
    tail = body[-_LAST_SENTENCE_CHARS:]
    pieces = [p for p in _SENTENCE_SPLIT_RE.split(tail) if p and p.strip()]
    if not pieces:
        return None
    last = pieces[-1].strip()
    if len(pieces) == 1 and len(body) > len(tail) or looks_cut_off(last) or last.rstrip().endswith(("?", "？")):
        return None
    values = {v.group(0).replace(" ", "")
              for v in _VALUE_RE.finditer(_strip_spans(currency_decimal_comma(last)))}
    if len(values) + len(_math_spans(last)) != 1 and not _trailing_assignment(last):
        return None      # a reasoning step ("6 times 7 gives 42"), not a statement of the answer
    if _hedged(last) or _HEDGE_RE.search(last):
        return None
    ans = refine(last)
    if ans and re.search(r"\d|\\|[\u4e00-\u9fff]", ans):
        return Extraction(Status.wrong, ans, "last_sentence", reasoning=body[:len(body) - len(last)])
    return None


_LEADING_OPTION_RE = re.compile(r"\(?([A-E])[.)]\s+(?=[A-Z])")


def _from_bare(text: str) -> Extraction | None:
    t = text.strip()
    if not t or len(t) > _SHORT_CHARS:
        return None
    lead = _LEADING_OPTION_RE.match(t)
    if lead and _is_prose(t[lead.end():]):
        return Extraction(Status.wrong, lead.group(1), "bare")    # "A. Because B is not valid"
    if _is_prose(t) and (looks_cut_off(t) or t.endswith(("?", "？"))):
        return None      # cut off, or a question ("Is the answer 5?"): not an answer
    if _hedged(t):
        return Extraction(Status.multiple_answers, method="bare")
    if not _is_prose(t):
        return Extraction(Status.wrong, t, "bare")
    if _without_pleasantries(t)[_sentence_end(t):].strip(" .。!！\n"):
        return None      # several sentences: reasoning, not an answer-only response
    spans = _math_spans(t)
    if len({compact(s[2]) for s in spans}) == 1 and not re.search(r"\d", _strip_spans(t)):
        return Extraction(Status.wrong, spans[0][2], "bare")
    ans = refine(t)
    if ans:
        return Extraction(Status.wrong, ans, "bare")
    if _EMPTY_PHRASE_RE.search(t) and not re.search(r"\d", t):
        return Extraction(Status.wrong, r"\emptyset", "bare")
    if len(spans) == 1:
        return Extraction(Status.wrong, spans[0][2], "bare")
    return None


def _last_number(text: str) -> Extraction | None:
    nums = list(_NUMBER_RE.finditer(text))
    if not nums:
        return None
    return Extraction(Status.wrong, nums[-1].group(0).strip(), "last_number")


def extract_answer(completion: str, allow_last_number: bool = False,
                   max_input_chars: int = 500_000) -> Extraction:
    """Find the final answer in ``completion`` (see the module docstring for the order).

    Returns an :class:`Extraction` whose status is ``wrong`` ("an answer was found"),
    ``unparsed`` (nothing stable found: empty box, prose only, truncated) or
    ``multiple_answers`` (hedges, shotgun boxes). Boxes that list several values are returned
    as one comma-separated answer with ``candidates`` set; whether that is a hedge depends on
    the reference and is decided by the verifier. Never raises for any string.
    """
    if not isinstance(completion, str) or not completion.strip():
        return Extraction(Status.unparsed)
    if len(completion) > max_input_chars:
        return Extraction(Status.unparsed, method="none", reasoning=None)
    final, reasoning = _final_part(map_chars_safe(completion))
    if not final.strip():
        return Extraction(Status.unparsed, reasoning=reasoning)
    ex = _extract_final(final, allow_last_number)
    if reasoning is not None:
        joined = reasoning if not ex.reasoning else reasoning + "\n" + ex.reasoning
        ex = Extraction(ex.status, ex.answer, ex.method, ex.approx, joined, ex.candidates)
    return ex


def map_chars_safe(text: str) -> str:
    """Unicode normalisation that keeps ``$``/``\\boxed`` positions meaningful."""
    return text.replace("\r\n", "\n").replace("＄", "$")


def _extract_final(final: str, allow_last_number: bool) -> Extraction:
    close = final.rfind("</answer>")
    open_ = final.rfind("<answer>", 0, close) if close >= 0 else -1
    if open_ >= 0:
        inner = final[open_ + len("<answer>"):close].strip()
        if not inner:
            return Extraction(Status.unparsed, method="answer_tag")
        ex = _extract_final(inner, False) if (find_boxes(inner) or len(inner) > _SHORT_CHARS) \
            else _from_bare(inner)
        if ex is None or ex.status is Status.unparsed:
            return Extraction(Status.wrong, inner, "answer_tag") if ex is None else ex
        return Extraction(ex.status, ex.answer, "answer_tag", ex.approx, ex.reasoning, ex.candidates)
    boxes = find_boxes(final)
    hashes = list(_HASH_RE.finditer(final))
    if hashes and (not boxes or hashes[-1].start() > boxes[-1].end):
        ans = hashes[-1].group(1).strip()
        if ans:
            return Extraction(Status.wrong, ans, "hash", reasoning=final[:hashes[-1].start()])
        if not final[hashes[-1].end():].strip():  # "####" and nothing after: no answer given
            return Extraction(Status.unparsed, method="hash", reasoning=final[:hashes[-1].start()])
    if boxes:
        ex = _from_boxes(final, boxes)
        later = _from_markers(final[boxes[-1].end:]) if ex.status is Status.wrong else None
        if later is not None and later.answer and re.search(r"[\d\\]", later.answer):
            return later
        return ex
    for finder in (_from_markers, _from_conclusion, _from_bare, _from_last_sentence):
        ex = finder(final)
        if ex is not None:
            return ex
    if allow_last_number:
        ex = _last_number(final)
        if ex is not None:
            return ex
    return Extraction(Status.unparsed, method="none", reasoning=final)


def reference_answer(reference: str) -> str:
    """The answer part of a dataset reference.

    - GSM8K full answer (``"...\\n#### 1,234"``) -> ``"1,234"``
    - a solution with ``\\boxed{...}`` -> the box content (several different boxes -> their
      comma-separated list; an unclosed box runs to the end of the text)
    - a long solution ending "Final Answer: The final answer is $X$" -> ``X``
    - anything else -> the string itself, stripped.
    """
    if not isinstance(reference, str):
        return ""
    t = reference.strip()
    if "####" in t:
        return t.rsplit("####", 1)[1].strip().splitlines()[0].strip() if t.rsplit("####", 1)[1].strip() else ""
    boxes = find_boxes(t)
    if boxes:
        contents = [b.content if b.content is not None else t[b.start:].split("{", 1)[-1]
                    for b in boxes]
        uniq = list(dict.fromkeys(c.strip() for c in contents if c and c.strip()))
        by_norm = list(dict.fromkeys(compact(clean_latex(c)) for c in uniq))
        if len(by_norm) == 1:
            return uniq[0]
        if uniq:
            return ", ".join(uniq)
    if len(t) > 200:
        ex = _from_markers(t) or _from_conclusion(t)
        if ex is not None and ex.answer:
            return ex.answer
    return t

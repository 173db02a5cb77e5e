"""Answers stated in prose: after a marker phrase ("final answer", "the answer is", 答案是),
in a closing "Therefore ..." sentence, in a closing sentence that holds one value, as a short
answer-only response, and (only if configured) the last number. Hedges make several answers.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.rewards.types import Extraction, Status

from .clock import FIND_RE as CLOCK_RE
from .normalize import clean_latex, compact, currency_decimal_comma, strip_math_delims
from .numbers import TooLarge, eval_arith, parse_number
from .sentences import (
    NUMBER_RE,
    drop_justification,
    is_prose,
    looks_cut_off,
    math_spans,
    refine,
    sentence_end,
    strip_spans,
    trailing_assignment,
)

_MARKER_RE = re.compile(
    r"(?i)(?:\b(?:the\s+)?final\s+answer\b(?:\s+is\b|\s*[:：])?"
    r"|\b(?:the\s+)?(?:correct\s+)?answer\s+(?:is|would\s+be|should\s+be)\b"
    r"|\b(?:the\s+)?(?:correct|right|best)\s+(?:answer\s+)?(?:option|choice)\s+is\b"
    r"|\banswer\s*[:：]|\banswer\b(?=\s*(?:\$|\\\(|\\\[))"
    r"|最终答案\s*(?:是|为|：|:)?|答案\s*(?:约为|约等于|应为|是|为|：|:)?|(?<![回解])答\s*[:：]"
    r"|(?:结果|结论)\s*(?:是|为)|约为|约等于)")
_APPROX_RE = re.compile(r"(?i)约|approximately|approx\.?|about|roughly|\\approx|≈")
_CONCLUSION_RE = re.compile(r"(?i)(?:^|(?<=[\s.。$]))(?:therefore|thus|hence|so|in conclusion|"
                            r"consequently|in total|altogether)\b|所以|因此|综上所述|综上|"
                            r"一共|总共|共计|合计|总计|共有")
_HEDGE_RE = re.compile(r"(?i)\b(?:maybe|possibly|perhaps|probably|not sure|either|alternatively|"
                       r"(?:could|might) (?:also )?be)\b|可能|不确定|也许|或许")
_EMPTY_PHRASE_RE = re.compile(r"(?i)\bno (?:real |integer |positive )?(?:solutions?|roots?)\b|"
                              r"\bempty set\b|无解|没有(?:实数)?解")
_REALS_PHRASE_RE = re.compile(r"(?i)\b(?:all|any|every) real (?:numbers?|values?)\b|"
                              r"\ball reals\b|全体实数")
_NEGATION_RE = re.compile(r"(?i)\b(?:not|no|except|but|other than)\b|不|除")
SHORT_CHARS = 160
_MAX_MARKERS = 6          # only the last few marker phrases can hold the final answer
_MAX_SEGMENT = 3000       # an answer sentence longer than this is not an answer


def _hedged(seg: str) -> bool:
    return bool(_HEDGE_RE.search(seg)) and len(set(re.findall(r"\d+(?:\.\d+)?", seg))) >= 2


# "The answer is **13** ways.": the bold span after the marker is the answer.
_BOLD_VALUE_RE = re.compile(r"[\s:：]*(?:\*\*[\s:：]*)?\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*")


def _drop_unopened_close(ans: str | None) -> str | None:
    """Drop closing brackets that close nothing in the answer: the restatement "(The answer is
    13.)" ends with the bracket it was written in. ``[0, 1)`` keeps its bracket."""
    while ans and ans.rstrip(" .")[-1:] in (")", "]") and \
            ans.count(")") + ans.count("]") > ans.count("(") + ans.count("["):
        ans = ans.rstrip(" .")[:-1].rstrip()
    return ans


def from_markers(text: str) -> Extraction | None:
    """The answer after a marker phrase ("final answer", "the answer is", 答案是 ...), the last
    of the last few markers that gives one; ``multiple_answers`` for a hedged answer sentence,
    ``unparsed`` when the last marker is followed by nothing (cut off); None otherwise."""
    matches = list(_MARKER_RE.finditer(text.replace("**", "  ")))
    for m in reversed(matches[-_MAX_MARKERS:]):
        seg = text[m.end():m.end() + _MAX_SEGMENT]
        if not seg.strip(" \n*:：$"):
            if m is matches[-1]:     # "... the final answer is" and nothing: cut off
                return Extraction(Status.unparsed, method="phrase", reasoning=text[:m.start()])
            continue
        head = seg[:sentence_end(seg.strip()) + (len(seg) - len(seg.lstrip()))]
        # a hedge in the answer sentence or right after it ("5. Or it might be 6.")
        if _hedged(head) or _hedged(seg[:len(head) + 300]) and _HEDGE_RE.search(
                seg[len(head):len(head) + 300]):
            return Extraction(Status.multiple_answers, method="phrase", reasoning=text[:m.start()])
        if m is not matches[0] and _conditional_lead(text, m.start()):
            continue     # "42. If order matters, the answer is 84.": a hedge on the answer before
        # 答案不是6: a value denied is no answer given (答案不是5，而是6 names one)
        neg = _NEG_LEAD_RE.match(seg)
        if neg and not re.search(r"(?:而|但|应该?|[，,])\s*是", head[neg.end():]):
            return Extraction(Status.wrong, head.strip(" :：*$"), "phrase",
                              reasoning=text[:m.start()])
        bold = _BOLD_VALUE_RE.match(seg)
        ans = _drop_unopened_close(refine(bold.group(1) if bold else seg))
        if ans:
            method = "zh_marker" if re.search(r"[\u4e00-\u9fff]", m.group(0)) else "phrase"
            approx = bool(_APPROX_RE.search(m.group(0)))
            found = Extraction(Status.wrong, ans, method, approx, reasoning=text[:m.start()])
            return revised(found, seg[len(head):])
    return None


# After the final answer: a retraction ("No wait, it's 4.", "Correction: 4.", 不对，应该是4)
# names the answer that counts; a hedge ("But it could also be 4.", "though 4 is also possible")
# offers a second one. Justifications ("because 3 × 4 = 12") and courtesies are neither.
# An explicit rejection of the answer ("that's wrong", "I made a mistake"), as opposed to a bare
# "wait" / "actually" that may open a check of it: one kind of retraction marker.
_REJECTION = (r"\b(?:(?:that'?s|this is|it'?s|that is) (?:wrong|incorrect|not right)|"
              r"I made an? (?:\w+ )?(?:error|mistake)|correction)\b|不对|错了")
_REJECTION_RE = re.compile("(?i)" + _REJECTION)
_RETRACT_RE = re.compile(r"(?i)\b(?:wait|actually|oops|on second thought|scratch that|"
                         r"(?:it|answer|result|value) should (?:actually )?be|instead)\b|"
                         + _REJECTION + r"|等等|算错|更正|应该是|其实")
# ("Alternatively, we can plug in ..." offers another method, not another answer.)
# A different *value* right after "alternatively" or a leading "or" ("(or 14)", "Or 14, if
# ...") is a second answer; "also valid / acceptable" vouches for one.
_TAIL_HEDGE_RE = re.compile(r"(?i)\b(?:maybe|possibly|perhaps|not sure|"
                            r"(?:could|might|may) (?:also )?be|(?:is|are) also possible|"
                            r"also (?:be )?(?:an? )?"
                            r"(?:valid|acceptable|plausible|possible|correct)|"
                            r"alternatively(?=[\s,:]*(?:[-$\\\d(]|(?:the answer|it) is\b)))\b|"
                            r"^[\s$(\[*]*or\b(?=[\s,:]*[-$\\\d(])|"
                            r"another possibility|(?:can(?:no|')?t|could ?n[o']t) be ruled out|"
                            r"可能|不确定|也许|或许|或者")
# A conditional alternative after the answer ("If order matters, the answer is 84.", "Note: if
# it asks for odd numbers, it would be 21.") offers a second answer for another reading; so does
# a generalisation ("or any multiple of 2 pi").
_CONDITIONAL_RE = re.compile(r"(?i)^[\s(*]*(?:(?:note|remark|but|however)\b[\s*:,]*)?"
                             r"(?:if|in case|unless|assuming)\b[^.!?]*?\b(?:(?:it|this|that|the "
                             r"(?:answer|result|value|count|total))(?:'d| would)(?: instead)? "
                             r"(?:be|become)|we(?:'d| would)(?: instead)? (?:get|have)|"
                             r"the answer (?:is|becomes))\b|"
                             # a contrast ("However, if repetition is allowed, we get 100.")
                             r"^[\s(*]*(?:however|but|alternatively)\b[\s,]*(?:if|when)\b[^.!?]*?"
                             r"\b(?:we|you) (?:would )?(?:get|obtain)\b")
# Another value named a solution too ("Also, x = -5 is a solution.", "-5 also satisfies the
# equation") unless the sentence rejects it ("..., but it is extraneous").
_ALSO_RE = re.compile(r"(?i)\b(?:is|are) also (?:a |another )?(?:valid )?"
                      r"(?:solution|root|answer)s?|\balso (?:satisfies|solves)|"
                      r"\balso [-$\\\d]\S* works|"
                      r"^[\s(*]*also(?=[^.!?]*\b(?:is|are) "
                      r"(?:a |another )?(?:valid )?(?:solution|root|answer))")
_REJECTED_RE = re.compile(r"(?i)\b(?:reject\w*|extraneous|discard\w*|invalid|not (?:valid|allowed|"
                          r"acceptable|possible)|excluded|ruled out|but)\b")
_GENERAL_RE = re.compile(r"(?i)\b(?:or|plus) (?:any|some|an?) (?:\w+ )?multiples? of\b")
_CONDITIONAL_START_RE = re.compile(r"(?i)^[\s(*]*(?:(?:note|remark|but|however)\b[\s*:,]*)?"
                                   r"(?:if|in case|unless|assuming)\b")
_NEG_LEAD_RE = re.compile(r"^[\s:：*$]*(?:不是|并非|并不是|不为|不等于|不可能是)")
_REVISION_LEAD_RE = re.compile(r"(?i)^[\s,，:：;!.]*(?:no\b[\s,]*)?(?:actually\b[\s,]*)?"
                               r"(?:(?:it|this|that|the\s+\w+)"
                               r"(?:'s|\s+(?:is|was|should\s+be|must\s+be|would\s+be))\s+)?")
_REVISION_CHARS = 600     # a revision follows the answer closely
_REVISION_SENTENCES = 4


def revised(ex: Extraction, tail: str) -> Extraction:
    """``ex`` (an answer found) as the text after it leaves it: ``multiple_answers`` when a
    hedge there offers a different value, the new value when a retraction there names one,
    else ``ex`` (a restatement of the same value, a justification, closing courtesies)."""
    if ex.status is not Status.wrong or not ex.answer or not tail.strip():
        return ex
    if _misrestated(ex.answer, tail):
        return Extraction(Status.multiple_answers, method=ex.method, reasoning=ex.reasoning)
    pending = False      # "Wait! I made an error. The correct value is 4.": the next sentence
    letter = bool(_LETTER_RE.fullmatch(ex.answer.strip()))
    for sent in _first_sentences(_without_pleasantries(tail)):
        if _GENERAL_RE.search(sent):
            return Extraction(Status.multiple_answers, method=ex.method, reasoning=ex.reasoning)
        hedge = _TAIL_HEDGE_RE.search(sent) or _CONDITIONAL_RE.search(sent) or (
            None if _REJECTED_RE.search(sent) else _ALSO_RE.search(sent))
        retract = _RETRACT_RE.search(sent)
        marker = hedge or retract
        if not (marker or pending):
            continue
        value = _stated_value(sent[marker.end():] if marker else sent, sent, hedge is not None,
                              letter)
        if value is None and retract is not None and _REJECTION_RE.search(sent):
            value = _later_clause_value(sent[retract.end():], letter)
        if value is None:
            pending = retract is not None
            continue
        if _same_value(value, ex.answer):
            return ex
        if hedge:
            return Extraction(Status.multiple_answers, method=ex.method, reasoning=ex.reasoning,
                              candidates=(ex.answer, value))
        return Extraction(Status.wrong, value, "revision", reasoning=ex.reasoning)
    return ex


# A clause that names the new value with a subject and verb ("it is 568", "the answer is 568").
_CLAUSE_LEAD_RE = re.compile(r"(?i)^\s*(?:so\s+|and\s+)?(?:it|this|that|the\s+(?:correct\s+)?"
                             r"\w+)(?:'s|\s+(?:is|should\s+be|must\s+be))\s+")


def _later_clause_value(after: str, letter: bool) -> str | None:
    """The value a later clause of a sentence rejecting the answer names ("Wait, that's wrong,
    it is 568."): the first clause after a comma, semicolon or colon that opens with a subject
    and verb and states one value (a check such as "80 * 7 = 560" is no such clause)."""
    for clause in re.split(r"[,;:]", after)[1:]:
        lead = _CLAUSE_LEAD_RE.match(clause)
        value = _stated_value(clause[lead.end():], clause, False, letter) if lead else None
        if value is not None:
            return value
    return None


_LETTER_RE = re.compile(r"\(?[A-E]\)?")
# "\boxed{\frac14}, i.e. 25%": a restatement right after the answer, in another form.
_RESTATE_RE = re.compile(r"(?i)^[\s,;:$)]*(?:i\.\s?e\.|that is|namely|in other words)[\s,:$]*")


def _misrestated(answer: str, tail: str) -> bool:
    """Whether a restatement right after the answer ("..., i.e. 20%", "that is, 13 after
    rounding") gives a number the answer does not round to: two different values. A
    restatement in decimals needs only to be the answer rounded (``1/3, i.e. 0.33``)."""
    m = _RESTATE_RE.match(tail)
    said = NUMBER_RE.match(tail[m.end():]) if m else None
    if said is None or re.match(r"\s*[-+*/^\\{(×÷=]", tail[m.end() + said.end():]):
        return False     # an expression ("i.e. 1/4", "i.e. 2 \cdot 6"), not one number
    try:
        a = parse_number(clean_latex(strip_math_delims(answer)).strip().rstrip("."))
        b = parse_number(said.group(0).strip(" .,;$"))
    except (TooLarge, ValueError, ZeroDivisionError):
        return False
    if a is None or b is None or a.percent:
        return False
    value, decimals = (b.value / 100, (b.decimals or 0) + 2) if b.percent else (b.value, b.decimals)
    if decimals is None:
        return value != a.value
    return abs(value - a.value) > Fraction(1, 2 * 10 ** decimals)


def _conditional_lead(text: str, pos: int) -> bool:
    """Whether the sentence holding ``pos`` opens with a condition ("If order matters, ...")."""
    start = max(text.rfind(c, 0, pos) for c in ".!?\n")
    return bool(_CONDITIONAL_START_RE.match(text[start + 1:pos]))


def _first_sentences(text: str) -> list[str]:
    out, rest = [], text[:_REVISION_CHARS]
    while rest.strip() and len(out) < _REVISION_SENTENCES:
        rest = rest.lstrip()
        end = sentence_end(rest)
        out.append(rest[:end])
        rest = rest[end + 1:]
    return out


def _stated_value(after: str, sent: str, hedge: bool, letter: bool = False) -> str | None:
    """The value a revising sentence states: what follows its marker ("it should be 4"), else,
    for a hedge, its only value ("though 4 is also possible"); None when it states none. With
    ``letter`` (the answer revised is an option letter) a lone option letter is a value too."""
    value = refine(_REVISION_LEAD_RE.sub("", after))
    if value and re.search(r"[\d\\]", value) and not _words_in(value):
        return value
    if value and letter and _LETTER_RE.fullmatch(value.strip()):
        return value      # "The answer is B. Actually no, C."
    if not hedge:
        return None      # a retraction must name its value ("Wait, x must be positive" does not)
    sent = drop_justification(sent)
    values = {v.group(0).strip() for v in NUMBER_RE.finditer(strip_spans(sent))}
    values |= {s[2].strip() for s in math_spans(sent)}
    return values.pop() if len(values) == 1 else None


_MATH_NAMES = {"sqrt", "pi", "frac", "dfrac", "ln", "log", "sin", "cos", "tan", "exp", "infty"}


def _words_in(value: str) -> list[str]:
    """Words (outside maths and LaTeX commands) in a candidate value: ``"3 is right"`` is a
    sentence about 3, not a value."""
    return [w for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", strip_spans(value))
            if w.lower() not in _MATH_NAMES]


def _same_value(a: str, b: str) -> bool:
    """Whether two answers are one value as written (``4``, ``4.0``, ``x = 4``, ``$4$``)."""
    keys = []
    for t in (a, b):
        t = clean_latex(strip_math_delims(t)).strip().rstrip(".")
        t = re.sub(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*", "", t)
        try:
            num = parse_number(t)
            keys.append(num.value if num is not None and not num.percent else eval_arith(t) or t)
        except (TooLarge, ValueError, ZeroDivisionError):
            keys.append(t)
    return keys[0] == keys[1] or compact(str(keys[0])) == compact(str(keys[1]))


_VALUE_RE = re.compile(CLOCK_RE.pattern + "|" + NUMBER_RE.pattern)
_PLEASANTRY_RE = re.compile(
    r"(?:\s*(?:I hope\b|Hope this helps|Let me know\b|希望)[^.!?。！\n]*[.!?。！]*)+\s*$", re.I)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\$(])|(?<=[。！？])|\n+")
_LAST_SENTENCE_CHARS = 600


def _without_pleasantries(text: str) -> str:
    """Drop closing courtesy sentences ("I hope it is correct.") after the last statement."""
    return _PLEASANTRY_RE.sub("", text.rstrip()).rstrip()


def from_conclusion(text: str) -> Extraction | None:
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
    if seg[sentence_end(seg):].strip(" .。!\n"):
        return None      # more sentences follow: not the closing statement
    ans = refine(seg)
    if ans:
        return Extraction(Status.wrong, ans, "phrase", reasoning=body[:m.start()])
    return None


def from_last_sentence(text: str) -> Extraction | None:
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
    if (len(pieces) == 1 and len(body) > len(tail) or looks_cut_off(last)
            or last.rstrip().endswith(("?", "？"))):
        return None
    values = {v.group(0).replace(" ", "")
              for v in _VALUE_RE.finditer(strip_spans(currency_decimal_comma(last)))}
    if len(values) + len(math_spans(last)) != 1 and not trailing_assignment(last):
        return None      # a reasoning step ("6 times 7 gives 42"), not a statement of the answer
    if _hedged(last) or _HEDGE_RE.search(last):
        return None
    ans = refine(last)
    if ans and re.search(r"\d|\\|[\u4e00-\u9fff]", ans):
        return Extraction(Status.wrong, ans, "last_sentence",
                          reasoning=body[:len(body) - len(last)])
    return None


_LEADING_OPTION_RE = re.compile(r"\(?([A-E])[.)]\s+(?=[A-Z])")


def from_bare(text: str) -> Extraction | None:
    """A short response (at most :data:`SHORT_CHARS` characters) that is only an answer: maths,
    one sentence stating a value, a leading option letter, "no solutions", "all real numbers";
    None for longer text, several sentences, a question, a cut-off sentence or prose without a
    value."""
    t = text.strip()
    if not t or len(t) > SHORT_CHARS:
        return None
    lead = _LEADING_OPTION_RE.match(t)
    if lead and is_prose(t[lead.end():]):
        return Extraction(Status.wrong, lead.group(1), "bare")    # "A. Because B is not valid"
    if is_prose(t) and (looks_cut_off(t) or t.endswith(("?", "？"))):
        return None      # cut off, or a question ("Is the answer 5?"): not an answer
    if _hedged(t):
        return Extraction(Status.multiple_answers, method="bare")
    if not is_prose(t):
        return Extraction(Status.wrong, t, "bare")
    if _without_pleasantries(t)[sentence_end(t):].strip(" .。!！\n"):
        return None      # several sentences: reasoning, not an answer-only response
    spans = math_spans(t)
    if len({compact(s[2]) for s in spans}) == 1 and not re.search(r"\d", strip_spans(t)):
        return Extraction(Status.wrong, spans[0][2], "bare")
    ans = refine(t)
    if ans:
        return Extraction(Status.wrong, ans, "bare")
    if _EMPTY_PHRASE_RE.search(t) and not re.search(r"\d", t):
        return Extraction(Status.wrong, r"\emptyset", "bare")
    if _REALS_PHRASE_RE.search(t) and not re.search(r"\d", t) and not _NEGATION_RE.search(t):
        return Extraction(Status.wrong, r"\mathbb{R}", "bare")     # "All real numbers."
    if len(spans) == 1:
        return Extraction(Status.wrong, spans[0][2], "bare")
    return None


def last_number(text: str) -> Extraction | None:
    """The last number in ``text`` (the ``allow_last_number`` fallback), or None."""
    nums = list(NUMBER_RE.finditer(text))
    if not nums:
        return None
    return Extraction(Status.wrong, nums[-1].group(0).strip(), "last_number")


def withdraws(tail: str) -> bool:
    """Whether ``tail``, the text after a final answer line, retracts or hedges it ("Wait,
    that's wrong.", "Actually ...", "... could also be ...", "Maybe ..."): the markers
    :func:`revised` looks for, without reading a value (a bare "wait" / "actually" opening a
    check of the answer, "Wait, let me double-check: ...", is none). For verifiers whose
    answers are not values (the logic tasks' expressions and assignments), where a withdrawn
    answer is no answer."""
    return any(_TAIL_HEDGE_RE.search(sent) or _REJECTION_RE.search(sent)
               or (_RETRACT_RE.search(sent) and not _CHECK_RE.search(sent))
               for sent in _first_sentences(_without_pleasantries(tail)))


# "Wait, let me double-check: ..." opens a check of the answer, not a retraction of it.
_CHECK_RE = re.compile(r"(?i)\b(?:let me|let's|let us|I'll|I will|to) (?:quickly )?"
                       r"(?:double[- ]?)?(?:check|verify|confirm|re-?check)\b|"
                       r"\b(?:checking|verifying|double[- ]checking)\b")

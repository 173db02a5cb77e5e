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

Boxes are found in :mod:`.boxes`, the answers stated in prose (5-8) in :mod:`.phrases`, which
reads a sentence's value with :mod:`.sentences`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from rlvr.rewards.types import Extraction, Status

from .boxes import find_boxes, from_boxes
from .normalize import clean_latex, compact
from .numbers import parse_number
from .phrases import (
    SHORT_CHARS,
    from_bare,
    from_conclusion,
    from_last_sentence,
    from_markers,
    last_number,
    revised,
)

# Chat-template special tokens of any model family: <|im_end|>, <|eot_id|>, <|end|>,
# <｜end▁of▁sentence｜> (full-width bars), </s>, <end_of_turn>, <eos>, [INST].
_RESIDUE_RE = re.compile(r"<\|[A-Za-z_][\w.\-]{0,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?s>|<eos>|<pad>|"
                         r"<(?:start|end)_of_turn>|\[/?INST\]|"
                         r"\n[ \t]*(?:#{1,3}[ \t]*)?(?:User|Human|USER|HUMAN)[ \t]*:")
_LEADING_RESIDUE_RE = re.compile(
    r"^(?:\s*(?:" + _RESIDUE_RE.pattern + r")\s*(?:assistant|model)?\b\s*)+", re.I)
_HASH_RE = re.compile(r"####\s*([^\n]*)")


def end_of_turn(text: str) -> str:
    """The completion's own turn: a leading ``<|im_start|>assistant`` echo dropped, and
    everything from the first chat-template special token (or a ``User:`` line) on cut off,
    since what follows is another turn. Used by the answer extractor and the format rules."""
    text = _LEADING_RESIDUE_RE.sub("", text)
    m = _RESIDUE_RE.search(text)
    return text[:m.start()] if m else text


def split_reasoning(text: str) -> tuple[str | None, str | None]:
    """``(answer part, reasoning)`` of the completion's own turn (:func:`end_of_turn`): the
    text after the last ``</think>`` and the text before it (``<think>`` tags dropped). The
    answer part is ``None`` when a ``<think>`` never closes (the output was cut off inside its
    reasoning, which is then the whole turn); the reasoning is ``None`` when there is no
    ``<think>`` block. Where the answer extractor, the format rules and the logic verifier
    look for an answer."""
    text = end_of_turn(text)
    if "</think>" in text:
        k = text.rfind("</think>")
        return text[k + len("</think>"):], text[:k].replace("<think>", "")
    if "<think>" in text:
        return None, text
    return text, None


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
    final, reasoning = split_reasoning(map_chars_safe(completion))
    if final is None or not final.strip():
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
        ex = _extract_final(inner, False) if (find_boxes(inner) or len(inner) > SHORT_CHARS) \
            else from_bare(inner)
        if ex is None or ex.status is Status.unparsed:
            ex = Extraction(Status.wrong, inner, "answer_tag") if ex is None else ex
        else:
            ex = Extraction(ex.status, ex.answer, "answer_tag", ex.approx, ex.reasoning,
                            ex.candidates)
        return revised(ex, final[close + len("</answer>"):])
    boxes = find_boxes(final)
    hashes = list(_HASH_RE.finditer(final))
    if hashes and (not boxes or hashes[-1].start() > boxes[-1].end):
        # a repeated marker ("#### #### 5") is a stutter before the value, like a repeated box
        ans = re.sub(r"^(?:#+\s*)+", "", hashes[-1].group(1)).strip()
        if ans and not _NO_VALUE_RE.fullmatch(ans):
            found = Extraction(Status.wrong, ans, "hash", reasoning=final[:hashes[-1].start()])
            # a retraction or hedge after the line counts as after any answer ("Wait, ... 20.")
            return revised(_unless_dangling(found), final[hashes[-1].end():])
        if ans or not final[hashes[-1].end():].strip():  # "####", "#### ???": no answer given
            return Extraction(Status.unparsed, method="hash", reasoning=final[:hashes[-1].start()])
    if boxes:
        ex = from_boxes(final, boxes)
        hedged = revised(ex, final[boxes[-1].end:])
        if hedged.status is Status.multiple_answers:
            return hedged
        later = from_markers(final[boxes[-1].end:]) if ex.status is Status.wrong else None
        if later is not None and later.answer and re.search(r"[\d\\]", later.answer):
            return later
        return revised(ex, final[boxes[-1].end:])
    for finder in (from_markers, from_conclusion, from_bare, from_last_sentence):
        ex = finder(final)
        if ex is not None:
            # (a bare "81 * 7 =" is read as its expression, like the question's arithmetic)
            return ex if finder is from_bare else _unless_dangling(ex)
    if allow_last_number:
        ex = last_number(final)
        if ex is not None:
            return ex
    return Extraction(Status.unparsed, method="none", reasoning=final)


# An answer of punctuation only ("???", "---") states no value.
_NO_VALUE_RE = re.compile(r"[\s!-/:-@\[-`{-~]*")


def states_no_value(answer: str) -> bool:
    """Whether ``answer`` is empty or ASCII punctuation only (``"???"``, ``"."``, ``"{}"``): a
    marked answer that states nothing (the extractor's and the format rules' test)."""
    return bool(_NO_VALUE_RE.fullmatch(answer))
# An answer after a marker ending in a relation or an operator with nothing after it ("The final
# answer is 20 + 3*2 = 20 + 6 =") was cut off mid-computation.
_DANGLING_RE = re.compile(r"(?:[=<>]|\\(?:cdot|times|div|le|ge|leq|geq))\s*$")


def _unless_dangling(ex: Extraction) -> Extraction:
    """``ex``, or ``unparsed`` when its answer stops on a dangling ``=`` (truncated)."""
    if ex.status is Status.wrong and ex.answer and _DANGLING_RE.search(ex.answer.rstrip(" .$")):
        return Extraction(Status.unparsed, method=ex.method, reasoning=ex.reasoning)
    return ex


_MIXED_LATEX_RE = re.compile(r"([+-]?)(\d+)\s*\\[dt]?frac\{(\d+)\}\{(\d+)\}")


def _exact_value(text: str) -> tuple[Fraction | None, bool]:
    """The numeric value of a boxed reference (a mixed number ``15\\frac{39}{40}`` included)
    and whether it is written exactly (not as a decimal); None when it is not a plain number."""
    t = clean_latex(text)
    m = _MIXED_LATEX_RE.fullmatch(t.strip())
    if m and int(m.group(4)) and int(m.group(3)) < int(m.group(4)):
        value = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
        return (-value if m.group(1) == "-" else value), True
    num = parse_number(t)
    if num is None or num.percent:
        return None, True
    return num.value, num.decimals is None


def _distinct_values(contents: list[str]) -> list[str]:
    """The boxes of a reference solution, one per value: the same value boxed twice in two
    spellings (``2\\frac{1}{2}`` and ``\\frac{5}{2}``) is one answer, kept in an exact
    spelling (a decimal would widen the rounding tolerance)."""
    kept: dict[object, tuple[str, bool]] = {}
    for c in contents:
        value, exact = _exact_value(c)
        key = value if value is not None else compact(clean_latex(c))
        if key not in kept or exact and not kept[key][1]:
            kept[key] = (c, exact)
    return [c for c, _ in kept.values()]


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
        after = t.rsplit("####", 1)[1].strip()
        return after.splitlines()[0].strip() if after else ""
    boxes = find_boxes(t)
    if boxes:
        contents = [b.content if b.content is not None else t[b.start:].split("{", 1)[-1]
                    for b in boxes]
        uniq = _distinct_values([c.strip() for c in contents if c and c.strip()])
        if uniq:
            return ", ".join(uniq)
    if len(t) > 200:
        ex = from_markers(t) or from_conclusion(t)
        if ex is not None and ex.answer:
            return ex.answer
    return t

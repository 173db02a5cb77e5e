"""Boxed answers: ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces, ``\\boxed 7``), found in
linear time. Boxes written next to each other (joined only by spaces, commas, "and"/"or") form
one list answer; a box followed by prose and a later box was abandoned, so the later one counts;
many different boxes (a "shotgun") are several answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.rewards.types import Extraction, Status

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_MAX_GROUP = 100          # boxes listed together beyond this are not read one by one
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


# A justification written inside the box after the value: "5 \\text{ (since } x > 0)".
_REMARK_RE = re.compile(r"\\text\{\s*\(?\s*(?:since|because)\b")
_SPACING = ("\\qquad", "\\quad", "\\,", "\\;", "\\:", "\\!", "~", "\\")


def _without_remark(content: str) -> str:
    m = _REMARK_RE.search(content)
    if not m:
        return content
    head = content[:m.start()].rstrip()
    while head.endswith(_SPACING):      # the spacing before the remark ("5 \\quad \\text{...")
        head = head[:-len(next(t for t in _SPACING if head.endswith(t)))].rstrip()
    return head or content


def from_boxes(text: str, boxes: list[_Box]) -> Extraction:
    """The answer of the last box of ``text`` (``boxes``: :func:`find_boxes` of it), with the
    boxes listed right before it as one list answer; ``unparsed`` for an empty or unclosed
    last box, ``multiple_answers`` for a shotgun of many different boxes."""
    last = boxes[-1]
    if last.content is None:
        return Extraction(Status.unparsed, method="boxed", reasoning=text[:last.start])
    group = [last]
    for prev in reversed(boxes[-_MAX_GROUP:-1]):
        if prev.content is None or not _is_joiner(text[prev.end:group[0].start]):
            break
        group.insert(0, prev)
    contents = [_without_remark(g.content.strip()) for g in group]
    if not any(contents) or any(not c for c in contents):
        return Extraction(Status.unparsed, method="boxed", reasoning=text[:last.start])
    distinct_all = {re.sub(r"\s+", "", b.content) for b in boxes if b.content}
    if len(distinct_all) >= _SHOTGUN and len(distinct_all) > 2 * len(group):
        return Extraction(Status.multiple_answers, method="boxed",
                          candidates=tuple(sorted(distinct_all))[:20])
    uniq = list(dict.fromkeys(contents))
    answer = uniq[0] if len(uniq) == 1 else ", ".join(uniq)
    cands = tuple(uniq) if len(uniq) > 1 else ()
    return Extraction(Status.wrong, answer, "boxed", reasoning=text[:group[0].start],
                      candidates=cands)

"""Format rules (R2): does the completion put its reasoning and final answer where required?

Each rule is a small pure function ``(completion, **options) -> float`` in [0, 1], registered by
name; the pipeline weighs it (default weight 0.1, see :class:`rlvr.rewards.config.RewardConfig`)
so that format can never outweigh a wrong answer.

Every rule reads what the answer extractor reads (:mod:`rlvr.rewards.math.extract`): the
completion's own turn (:func:`~rlvr.rewards.math.extract.end_of_turn`), and the answer marks
(``####``, ``\\boxed``, ``<answer>``) only after the last ``</think>``: a mark inside the
reasoning, or after a ``<think>`` that never closes, is no answer. A marked answer must state
something: empty or punctuation only (``#### ???``, ``\\boxed{}``, ``<answer>.</answer>``)
scores 0, and so does "reasoning" of punctuation only.
"""

from __future__ import annotations

import json
import re

from rlvr.rewards.math.boxes import find_boxes
from rlvr.rewards.math.extract import end_of_turn, split_reasoning, states_no_value
from rlvr.rewards.registry import register_format_rule

# A completion longer than this is judged on its tail only: every rule here looks at the end of
# the text (the final answer), and bounded input keeps the regexes fast on adversarial output.
_TAIL_CHARS = 20_000

_THINK_ANSWER = re.compile(
    r"^\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*$", re.DOTALL
)
_HASH_LINE = re.compile(r"(?:^|\n)[ \t]*####[ \t]*(?P<answer>[^\n]*\S)[ \t]*\s*$")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_TAG = re.compile(r"<answer>(?P<answer>.*?)</answer>", re.DOTALL)
_WORD = re.compile(r"\w")


def _parts(text: str) -> tuple[str, str]:
    """``(reasoning inside <think>, answer part after the last </think>)``, as the extractor
    splits them (:func:`~rlvr.rewards.math.extract.split_reasoning`); a ``<think>`` never
    closed leaves no answer part."""
    answer, reasoning = split_reasoning(text)
    return reasoning or "", answer or ""


def _tail(text: str) -> str:
    # the format is judged where the answer is read: the answer part, its bounded tail
    return _parts(text)[1][-_TAIL_CHARS:]


def _says_something(text: str) -> bool:
    return not states_no_value(text)


@register_format_rule("think_answer")
def think_answer(completion: str, **_: object) -> float:
    """1.0 iff the whole completion is ``<think>...</think><answer>...</answer>`` with both
    parts stating something (not empty or punctuation only) and each tag used exactly once
    (DeepSeek-R1 style)."""
    if len(completion) > _TAIL_CHARS * 10:
        return 0.0
    completion = end_of_turn(completion)
    m = _THINK_ANSWER.match(completion)
    if not m or not _says_something(m["think"]) or not _says_something(m["answer"]):
        return 0.0
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    return 1.0 if all(completion.count(t) == 1 for t in tags) else 0.0


@register_format_rule("hash_line")
def hash_line(completion: str, **_: object) -> float:
    """1.0 iff the answer part ends with a single final-answer line ``#### <answer>`` (GSM8K)
    whose answer states something, preceded by some reasoning (a letter or digit: in the
    ``<think>`` block or before the line)."""
    reasoning, answer_part = _parts(completion)
    tail = answer_part[-_TAIL_CHARS:]
    m = _HASH_LINE.search(tail)
    if not m or tail.count("####") != 1 or not _says_something(m["answer"]):
        return 0.0
    before = reasoning[-_TAIL_CHARS:] + tail[: m.start()]
    return 1.0 if _WORD.search(before) else 0.0


@register_format_rule("boxed")
def boxed(completion: str, **_: object) -> float:
    """1.0 iff the answer part contains exactly one ``\\boxed{...}`` (or ``\\fbox{...}``),
    closed and stating something."""
    tail = _tail(completion)
    if len(_BOXED.findall(tail)) != 1:
        return 0.0
    boxes = find_boxes(tail)
    ok = len(boxes) == 1 and boxes[0].content is not None and _says_something(boxes[0].content)
    return 1.0 if ok else 0.0


@register_format_rule("answer_tag")
def answer_tag(completion: str, **_: object) -> float:
    """1.0 iff the answer part contains exactly one ``<answer>...</answer>`` block (one tag of
    each kind: nested or repeated tags are not one block) stating something."""
    tail = _tail(completion)
    if tail.count("<answer>") != 1 or tail.count("</answer>") != 1:
        return 0.0
    found = _ANSWER_TAG.findall(tail)
    return 1.0 if len(found) == 1 and _says_something(found[0]) else 0.0


@register_format_rule("marked_answer")
def marked_answer(completion: str, **_: object) -> float:
    """1.0 iff the final answer is marked in exactly one recognised way: a ``#### N`` line, a
    single ``\\boxed{}`` or a single ``<answer>`` block, and no other kind of mark is used
    (``#### 5`` and a ``\\boxed{6}`` are two marked answers). The default rule for math."""
    tail = _tail(completion)
    kinds = [("####" in tail, hash_line), (bool(_BOXED.search(tail)), boxed),
             ("<answer>" in tail or "</answer>" in tail, answer_tag)]
    used = [rule for present, rule in kinds if present]
    return used[0](completion) if len(used) == 1 else 0.0


@register_format_rule("json")
def json_object(completion: str, *, required_keys: tuple[str, ...] = (), **_: object) -> float:
    """1.0 iff the completion's own turn (or its last fenced ```json block) is a JSON object
    holding every key in ``required_keys`` with a value (not ``null``, not a blank string)."""
    text = end_of_turn(completion).strip()
    fenced = re.findall(r"```(?:json)?\s*\n(.*?)```", _tail(text), re.DOTALL)
    if fenced:
        text = fenced[-1].strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return 0.0
    if not isinstance(value, dict):
        return 0.0
    return 1.0 if all(_has_value(value, k) for k in required_keys) else 0.0


def _has_value(obj: dict, key: str) -> bool:
    # {"answer": null} and {"answer": ""} name the key but state nothing
    value = obj.get(key)
    return value is not None and not (isinstance(value, str) and not value.strip())


@register_format_rule("regex")
def regex(completion: str, *, pattern: str = "", **_: object) -> float:
    """1.0 iff ``re.fullmatch(pattern, turn.strip(), re.DOTALL)`` matches, ``turn`` the
    completion's own turn (:func:`~rlvr.rewards.math.extract.end_of_turn`). The pattern is the
    config's: one that backtracks exponentially is slow on adversarial text (Python's ``re``
    has no time bound).

    Raises:
        ValueError: if ``pattern`` is empty (a rule that accepts everything is a config error).
    """
    if not pattern:
        raise ValueError("format rule 'regex' needs a non-empty 'pattern' option")
    return 1.0 if re.fullmatch(pattern, end_of_turn(completion).strip(), re.DOTALL) else 0.0


@register_format_rule("none")
def no_format(completion: str, **_: object) -> float:
    """Always 0.0: no format component (use with weight 0)."""
    return 0.0

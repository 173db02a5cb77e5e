"""Format rules (R2): does the completion put its reasoning and final answer where required?

Each rule is a small pure function ``(completion, **options) -> float`` in [0, 1], registered by
name; the pipeline weighs it (default weight 0.1, see :class:`rlvr.rewards.config.RewardConfig`)
so that format can never outweigh a wrong answer.
"""

from __future__ import annotations

import json
import re

from rlvr.rewards.math.extract import end_of_turn
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


def _tail(text: str) -> str:
    # the format is judged on the completion's own turn, as the answer is (end_of_turn)
    return end_of_turn(text)[-_TAIL_CHARS:]


@register_format_rule("think_answer")
def think_answer(completion: str, **_: object) -> float:
    """1.0 iff the whole completion is ``<think>...</think><answer>...</answer>`` with both
    parts non-empty and each tag used exactly once (DeepSeek-R1 style)."""
    if len(completion) > _TAIL_CHARS * 10:
        return 0.0
    completion = end_of_turn(completion)
    m = _THINK_ANSWER.match(completion)
    if not m or not m["think"].strip() or not m["answer"].strip():
        return 0.0
    tags = ("<think>", "</think>", "<answer>", "</answer>")
    return 1.0 if all(completion.count(t) == 1 for t in tags) else 0.0


@register_format_rule("hash_line")
def hash_line(completion: str, **_: object) -> float:
    """1.0 iff the completion ends with a single final-answer line ``#### <answer>`` (GSM8K),
    preceded by some reasoning."""
    tail = _tail(completion)
    m = _HASH_LINE.search(tail)
    if not m or tail.count("####") != 1:
        return 0.0
    return 1.0 if tail[: m.start()].strip() else 0.0


@register_format_rule("boxed")
def boxed(completion: str, **_: object) -> float:
    """1.0 iff the completion contains exactly one ``\\boxed{...}`` (or ``\\fbox{...}``)."""
    return 1.0 if len(_BOXED.findall(_tail(completion))) == 1 else 0.0


@register_format_rule("answer_tag")
def answer_tag(completion: str, **_: object) -> float:
    """1.0 iff the completion contains exactly one non-empty ``<answer>...</answer>`` block."""
    found = _ANSWER_TAG.findall(_tail(completion))
    return 1.0 if len(found) == 1 and found[0].strip() else 0.0


@register_format_rule("marked_answer")
def marked_answer(completion: str, **_: object) -> float:
    """1.0 iff the final answer is marked in exactly one recognised way: a ``#### N`` line, a
    single ``\\boxed{}`` or a single ``<answer>`` block. The default rule for math."""
    return max(hash_line(completion), boxed(completion), answer_tag(completion))


@register_format_rule("json")
def json_object(completion: str, *, required_keys: tuple[str, ...] = (), **_: object) -> float:
    """1.0 iff the completion (or its last fenced ```json block) is a JSON object holding every
    key in ``required_keys``."""
    text = completion.strip()
    fenced = re.findall(r"```(?:json)?\s*\n(.*?)```", _tail(text), re.DOTALL)
    if fenced:
        text = fenced[-1].strip()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return 0.0
    if not isinstance(value, dict):
        return 0.0
    return 1.0 if all(k in value for k in required_keys) else 0.0


@register_format_rule("regex")
def regex(completion: str, *, pattern: str = "", **_: object) -> float:
    """1.0 iff ``re.fullmatch(pattern, completion.strip(), re.DOTALL)`` matches.

    Raises:
        ValueError: if ``pattern`` is empty (a rule that accepts everything is a config error).
    """
    if not pattern:
        raise ValueError("format rule 'regex' needs a non-empty 'pattern' option")
    return 1.0 if re.fullmatch(pattern, completion.strip(), re.DOTALL) else 0.0


@register_format_rule("none")
def no_format(completion: str, **_: object) -> float:
    """Always 0.0: no format component (use with weight 0)."""
    return 0.0

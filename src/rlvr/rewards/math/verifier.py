"""Entry point of the math outcome verifier (R3, R6, R7, R8).

>>> verify_math("So the answer is \\\\boxed{\\\\frac{1}{2}}.", "0.5").status
<Status.correct: 'correct'>

:func:`verify_math` is pure and deterministic (no randomness at all; numeric checks use fixed
sample points), never raises, and guards every expensive step (input length, sympy inputs that
could explode), so it can run inside the training loop.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rlvr.rewards.types import Extraction, Status, Verdict

from .equivalence import compare
from .extract import extract_answer as _extract
from .extract import reference_answer
from .normalize import clean_latex
from .options import MathVerifyConfig
from .outcome import Outcome, Policy
from .structure import parse_answer

__all__ = ["MathVerifyConfig", "extract_answer", "reference_answer", "verify_math"]


_DEFAULT = MathVerifyConfig()


def extract_answer(completion: str, config: MathVerifyConfig = _DEFAULT) -> Extraction:
    """Find the final answer of ``completion`` (see :mod:`.extract` for the rules).

    Never raises; non-string input gives ``Status.unparsed``.
    """
    return _extract(completion, config.allow_last_number, config.max_input_chars)


_LETTER_RE = re.compile(r"(?<![A-Za-z\\])\(?([A-J])\)?(?![A-Za-z])")
# "A" and "I" before a lower-case word are the English article and pronoun ("A good choice",
# "I think"), not options; before "or" / "is" they are options ("A or B", "A is correct").
_ARTICLE_RE = re.compile(r"(?<![A-Za-z\\(])[AI] (?!(?:or|and|nor|is|was|are|and/or)\b)[a-z]")


def _choice_letter(ref: str) -> str | None:
    t = re.sub(r"\\text\{([^{}]*)\}", r"\1", clean_latex(ref)).strip().strip("().").strip()
    if re.fullmatch(r"[A-J]", t):
        return t
    labelled = _option_with_text(ref)
    return labelled[0] if labelled else None


# A choice reference that carries its option's text: "\text{(A) } 12", "\textbf{(C)}\ 18".
_OPTION_TEXT_RE = re.compile(r"\(([A-J])\)\s*(?:\\[ ,;!]|~|\s)*(\S.*)", re.S)


def _option_with_text(ref: str) -> tuple[str, str] | None:
    """``(letter, option text)`` of a reference written as a labelled option, else None."""
    t = re.sub(r"\\text(?:bf|rm|normal)?\{([^{}]*)\}", r"\1", ref).strip()
    m = _OPTION_TEXT_RE.fullmatch(t)
    if not m or re.search(r"\([A-J]\)", m.group(2)):
        return None      # "(A) and (C)": several options, not one labelled option
    return m.group(1), m.group(2).strip().rstrip(".").strip()


def _response_letters(answer: str) -> list[str]:
    t = re.sub(r"\\text(?:bf)?\{([^{}]*)\}", r"\1", clean_latex(answer)).strip()
    single = re.fullmatch(r"\(?([A-Ja-j])\)?", t.strip(". "))
    if single:
        return [single.group(1).upper()]
    t = re.sub(r"(?i)\b(?:option|choice)\s+", "", t)
    marked = _ARTICLE_RE.sub(lambda m: "_" + m.group(0)[1:], t)
    return list(dict.fromkeys(_LETTER_RE.findall(marked)))


def _compare_choice(letter: str, answer: str) -> Outcome:
    letters = _response_letters(answer)
    if len(letters) > 1:
        return Outcome(False, f"several choices: {', '.join(letters)}", True)
    if not letters:
        return Outcome(False, "no choice letter in the answer")
    return Outcome(letters[0] == letter, f"choice {letters[0]} vs {letter}")


@lru_cache(maxsize=16384)
def _judge(ref: str, answer: str, policy: Policy, max_chars: int) -> Outcome:
    if len(answer) > max_chars or len(ref) > max_chars:
        same = re.sub(r"\s+", "", answer) == re.sub(r"\s+", "", ref)
        return Outcome(same, "long answer: string comparison")
    letter = _choice_letter(ref)
    if letter is not None:
        out = _compare_choice(letter, answer)
        labelled = _option_with_text(ref)
        if labelled and not _response_letters(answer):
            # no letter given: the option's own text ("18" for "(C) 18") answers it
            return compare(parse_answer(labelled[1]), parse_answer(answer), policy)
        return out
    return compare(parse_answer(ref), parse_answer(answer), policy)


_NOT_AN_ANSWER = ("unparseable or unsafe expression", "number vs expression with variables")


def verify_math(completion: str, reference: str, config: MathVerifyConfig = _DEFAULT) -> Verdict:
    """Judge ``completion`` against ``reference``.

    ``reference`` may be a bare answer (``"1/2"``), a GSM8K solution (``"...#### 18"``) or a
    solution with a boxed answer; see :func:`reference_answer`.

    Returns a :class:`Verdict` with status ``correct``/``wrong``; ``unparsed`` when no final
    answer can be extracted (empty box, prose only, truncated) or the completion is longer than
    ``config.max_input_chars`` characters (not searched; ``detail`` names the limit);
    ``multiple_answers`` when several different answers are offered for a single-valued
    reference; ``error`` (with the
    exception in ``detail``) if something unexpected happens internally, or when the
    reference itself is empty. Never raises.
    """
    try:
        return _verify(completion, reference, config)
    except Exception as exc:  # the reward must never crash the trainer (R6)
        return Verdict(Status.error, None, "none",
                       f"internal error: {type(exc).__name__}: {exc}"[:200])


def _verify(completion: str, reference: str, config: MathVerifyConfig) -> Verdict:
    ref = reference_answer(reference if isinstance(reference, str) else str(reference))
    if not ref.strip():
        return Verdict(Status.error, None, "none", "empty reference")
    if isinstance(completion, str) and len(completion) > config.max_input_chars:
        return Verdict(Status.unparsed, None, "none", f"completion longer than "
                       f"{config.max_input_chars} characters: not searched")
    ex = extract_answer(completion if isinstance(completion, str) else "", config)
    if ex.status is Status.multiple_answers:
        shown = "; ".join(ex.candidates[:5])
        return Verdict(Status.multiple_answers, ex.answer, ex.method,
                       f"several candidate answers{': ' + shown if shown else ''}")
    if not ex.found:
        letter = _choice_letter(ref)
        named = _response_letters(completion) if letter and isinstance(completion, str) \
            and len(completion) <= 200 else []
        if len(named) == 1:   # "Because B is valid": a short reply naming exactly one option
            out = _compare_choice(letter, named[0])
            return Verdict(Status.correct if out.equal else Status.wrong, named[0], "choice",
                           out.detail)
        return Verdict(Status.unparsed, None, ex.method, "no final answer found")
    out = _judge(ref.strip(), ex.answer.strip(), config.policy, config.max_answer_chars)
    if ex.method == "bare" and not out.equal and out.detail in _NOT_AN_ANSWER:
        # the whole response taken as the answer is not a value at all ("7 4 3 P 3")
        return Verdict(Status.unparsed, None, ex.method, f"no final answer found ({out.detail})")
    if out.multiple:
        return Verdict(Status.multiple_answers, ex.answer, ex.method, out.detail)
    status = Status.correct if out.equal else Status.wrong
    return Verdict(status, ex.answer, ex.method, out.detail)

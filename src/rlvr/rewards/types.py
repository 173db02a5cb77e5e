"""Result records of the reward pipeline.

Every score the pipeline hands out carries its reason: a :class:`Status`, the extracted answer
and the per-component scores, so a wrong reward can be traced to the parser, the verifier or the
aggregator without re-running anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

#: the name of the format component (R2) among a result's components
FORMAT = "format"


class Status(str, Enum):
    """Why a completion got its outcome score.

    - ``correct``: an answer was extracted and the verifier accepted it (outcome 1.0).
    - ``wrong``: an answer was extracted and the verifier rejected it (outcome 0.0).
    - ``unparsed``: no final answer could be extracted stably (empty box, prose only,
      truncated output); scored 0, never a default pass (R6).
    - ``multiple_answers``: several different final answers were offered ("3 or 4", two boxes
      that disagree); scored 0 (R7).
    - ``timeout``: the verifier exceeded its time bound; scored 0 and counted.
    - ``error``: the verifier raised; scored 0 and counted.
    """

    correct = "correct"
    wrong = "wrong"
    unparsed = "unparsed"
    multiple_answers = "multiple_answers"
    timeout = "timeout"
    error = "error"

    def __str__(self) -> str:  # so f-strings and JSON show the bare name
        return self.value


@dataclass(frozen=True)
class Extraction:
    """What a parser found in a completion.

    Attributes:
        status: ``correct`` is never used here; ``wrong`` means "an answer was found" (the
            verifier decides correctness), otherwise ``unparsed`` or ``multiple_answers``.
        answer: the final answer as written (e.g. ``\\frac{1}{2}``), ``None`` if none was found.
        method: how it was found: ``boxed``, ``hash`` (``#### N``), ``answer_tag``, ``phrase``
            ("the answer is"), ``zh_marker`` (答案是 ...), ``bare`` (the whole response is the
            answer), ``last_number`` (only when configured), or ``none``.
        approx: the answer was marked as approximate ("≈ 3.14", "约为 3.14").
        reasoning: the text before the final answer (or inside ``<think>``), if separable.
        candidates: the distinct answers seen when ``status`` is ``multiple_answers``.
    """

    status: Status
    answer: str | None = None
    method: str = "none"
    approx: bool = False
    reasoning: str | None = None
    candidates: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.answer is not None and self.status not in (
            Status.unparsed,
            Status.multiple_answers,
        )


@dataclass(frozen=True)
class Verdict:
    """A verifier's judgement of one completion against one reference.

    Attributes:
        status: one of :class:`Status`.
        extracted: the extracted final answer (``None`` if none).
        method: the extraction method (see :class:`Extraction`).
        detail: a short human-readable reason (e.g. ``"numeric: 0.5 == 1/2"``).
        score: the outcome in [0, 1] when a verifier gives partial credit (e.g. the code
            verifier's passed fraction of the tests with ``partial_credit=True``); ``None``
            (the default) means 1.0 if correct else 0.0.
        components: extra named scores the verifier measured on the way (a ``verifiers``
            rubric's per-function rewards, ``rubric/<function>``); the pipeline logs them as
            reward components beside ``outcome`` and ``format``. They weigh nothing unless
            ``reward.weights`` names them (the outcome already counts them); one that does
            must lie in [0, 1], or the row is an ``error``.

    The pipeline checks what a verifier returns before it weighs anything
    (:func:`rlvr.rewards.pool.checked_verdict`): ``score`` and ``outcome`` (also when a
    subclass overrides the property) must be finite numbers in [0, 1], components finite
    numbers; otherwise the row is an ``error``: reward 0, counted.
    """

    status: Status
    extracted: str | None = None
    method: str = "none"
    detail: str = ""
    score: float | None = None
    components: dict[str, float] = field(default_factory=dict)

    @property
    def outcome(self) -> float:
        """Outcome reward (R3): ``score`` when set, else 1.0 if correct and 0.0 otherwise."""
        if self.score is not None:
            return float(self.score)
        return 1.0 if self.status is Status.correct else 0.0


@dataclass(frozen=True)
class RewardResult:
    """The pipeline's output for one completion.

    Attributes:
        reward: the aggregated scalar reward (weighted sum of ``components``).
        components: component name -> score before weighting, e.g.
            ``{"outcome": 1.0, "format": 1.0}``.
        status: the outcome verifier's status.
        extracted: the extracted final answer, or ``None``.
        method: how the answer was extracted.
        detail: the verifier's reason, for humans.
        seconds: wall time spent verifying (s).
    """

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    status: Status = Status.error
    extracted: str | None = None
    method: str = "none"
    detail: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d

"""The records that flow through rlvr.

- :class:`Task` (R23): one problem: a prompt, a program-checkable reference and the task type
  that picks its verifier, plus provenance and optional curation fields.
- :class:`Generated`: one completion as a sampler returns it (``rlvr eval``, ``rlvr data
  stratify``).

A frozen dataclass rather than a pydantic model, so the reward pipeline and the data tools can
use it without extra dependencies; ``to_dict`` / ``from_dict`` give the JSON form (one object
per line in a JSONL file) and validate every field with an error naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from rlvr.io import json_text, json_value

# A reference is anything a verifier can check and JSON can hold: an answer string ("42",
# "\\frac{1}{2}"), a number, a list of unit tests, or a dict of constraints.
_REFERENCE_TYPES = (str, int, float, list, dict)


class RecordError(ValueError):
    """A record could not be built from its data; the message names the offending field."""


def _type_name(value: Any) -> str:
    return type(value).__name__


@dataclass(frozen=True)
class Task:
    """One training or evaluation problem (R23).

    Attributes:
        id: unique id within its source, e.g. ``"arithmetic-train-000042"``.
        prompt: the question text shown to the model (before any chat template).
        reference: what the verifier checks against: the final answer (``"95"``), a number,
            unit tests (list) or constraints (dict). Never a bool or null.
        task_type: selects the verifier in the reward registry, e.g. ``"math"``, ``"code"``.
        source: where it came from, e.g. ``"arithmetic"``, ``"gsm8k"``, a file path.
        difficulty: optional difficulty label (a generator level such as ``"2d+-2d"``, or a
            measured tier ``"easy"`` / ``"medium"`` / ``"hard"``, R24).
        category: optional category for per-category reward monitoring (R10).
        solution: optional worked solution in the target output format, for SFT (R17).
        metadata: free-form JSON-serialisable extras (the generator's seed, the expression ...).
        pass_rate: optional measured share of a model's samples that solved it, in [0, 1]
            (``rlvr data stratify``, R24).

    Raises:
        RecordError: at construction, if a field is missing, empty or of the wrong type.
    """

    id: str
    prompt: str
    reference: Any
    task_type: str
    source: str
    difficulty: str | None = None
    category: str | None = None
    solution: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    pass_rate: float | None = None

    _REQUIRED_STR: ClassVar[tuple[str, ...]] = ("id", "prompt", "task_type", "source")
    _OPTIONAL_STR: ClassVar[tuple[str, ...]] = ("difficulty", "category", "solution")

    def __post_init__(self) -> None:
        for name in self._REQUIRED_STR:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise RecordError(
                    f"Task.{name} must be a string, got {_type_name(value)}: {value!r}"
                )
            if not value.strip():
                raise RecordError(f"Task.{name} must not be empty")
        for name in self._OPTIONAL_STR:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise RecordError(
                    f"Task.{name} must be a string or null, got {_type_name(value)}: {value!r}"
                )
        ref = self.reference
        if isinstance(ref, bool) or not isinstance(ref, _REFERENCE_TYPES):
            raise RecordError(
                "Task.reference must be a string, number, list or dict, "
                f"got {_type_name(ref)}: {ref!r}"
            )
        if isinstance(ref, str) and not ref.strip():
            raise RecordError("Task.reference must not be empty")
        if not isinstance(self.metadata, dict):
            raise RecordError(f"Task.metadata must be a dict, got {_type_name(self.metadata)}")
        rate = self.pass_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                 or not 0 <= rate <= 1):
            raise RecordError(f"Task.pass_rate must be a number in [0, 1] or null, got {rate!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of all fields (optional fields included, as null when unset)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        """Build a task from its dict form (the inverse of :meth:`to_dict`).

        Raises:
            RecordError: naming the missing, unknown or mistyped field.
        """
        if not isinstance(data, dict):
            raise RecordError(f"a Task must be a JSON object, got {_type_name(data)}")
        names = [f.name for f in fields(cls)]
        missing = [n for n in ("id", "prompt", "reference", "task_type", "source") if n not in data]
        if missing:
            raise RecordError(f"Task is missing required field(s): {', '.join(missing)}")
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise RecordError(
                f"Task has unknown field(s): {', '.join(unknown)} (known: {', '.join(names)}); "
                "put extras under 'metadata'"
            )
        kwargs = dict(data)
        if kwargs.get("metadata") is None:
            kwargs["metadata"] = {}
        return cls(**kwargs)

    def to_json(self) -> str:
        """One-line standard JSON (a JSONL row); non-ASCII text kept as is; a NaN / inf in
        ``metadata`` is written as null (a task record has no ``nonfinite`` field)."""
        return json_text(self.to_dict(), flag=False)

    @classmethod
    def from_json(cls, line: str) -> Task:
        """Parse one JSON line.

        Raises:
            RecordError: for invalid JSON or an invalid task.
        """
        try:
            data = json_value(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"Task line is not valid JSON: {exc}") from None
        except ValueError as exc:  # too deep, too long a number
            raise RecordError(f"Task line: {exc}") from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class Generated:
    """One completion as a sampler returns it.

    Attributes:
        text: the decoded completion.
        tokens: generated tokens (``None`` if unknown).
        seconds: generation wall time attributed to it (a batch's time / its rows), or None.
        finish_reason: ``"stop"`` / ``"length"`` (None if unknown).
        mean_logprob: mean log-prob per generated token under the sampling distribution
            (nats / token; None if unknown).
    """

    text: str
    tokens: int | None = None
    seconds: float | None = None
    finish_reason: str | None = None
    mean_logprob: float | None = None


# The records of a GRPO step live in rlvr.train.batch, not here: StepRollouts (one row per
# completion, N = B * G) and TrainBatch (one row per trained row) hold rlvr.rollout,
# rlvr.rewards and rlvr.models types, layers above this one; their tensors follow rlvr.algo's
# conventions (FloatTensor[N, T], BoolTensor[N, T]).

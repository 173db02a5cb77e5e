"""Reference checks (R27): every task's reference must verify against itself, and its worked
solution (when the source has one) against the reference, before the task is trusted for
training or evaluation. A reference the verifier cannot read would score every completion of
its task 0 and teach the policy that the right answer is wrong.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest


@dataclass(frozen=True)
class TaskCheck:
    """The checks of one task.

    Attributes:
        id, source: the task.
        reference_ok: the reference, written as an answer, verifies against itself; ``None``
            when the task type has no answer form of its reference (code: the tests are the
            reference, checked through the solution; logic: a constraint set).
        solution_ok: the worked solution verifies against the reference; ``None`` without one.
        detail: the verifier's status / reason for a failure.
    """

    id: str
    source: str
    reference_ok: bool | None
    solution_ok: bool | None
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.reference_ok is False or self.solution_ok is False


def reference_completion(task: Task) -> str | None:
    """The reference written as a model answer: math references that already carry a final
    answer marker (GSM8K's ``#### N``, a ``\\boxed{}``) as they are, other math references
    boxed; ``None`` for task types whose reference is not an answer (code, logic)."""
    if task.task_type != "math" or not isinstance(task.reference, (str, int, float)):
        return None
    ref = str(task.reference)
    if "####" in ref or "\\boxed" in ref:
        return ref
    return f"The final answer is $\\boxed{{{ref}}}$."


def check_tasks(tasks: list[Task], rewards: RewardPipeline, solutions: bool = True
                ) -> list[TaskCheck]:
    """Verify each task's reference against itself and (``solutions``) its solution against
    the reference, in one reward-pipeline batch. Returns one :class:`TaskCheck` per task."""
    requests, slots = [], []
    for i, task in enumerate(tasks):
        completion = reference_completion(task)
        if completion is not None:
            requests.append(ScoreRequest(completion, task.reference, task.task_type))
            slots.append((i, "reference"))
        if solutions and task.solution:
            requests.append(ScoreRequest(task.solution, task.reference, task.task_type))
            slots.append((i, "solution"))
    found: dict[int, dict[str, tuple[bool, str]]] = defaultdict(dict)
    for (i, kind), result in zip(slots, rewards.score_batch(requests) if requests else []):
        ok = result.status.value == "correct"
        found[i][kind] = (ok, "" if ok else f"{kind}: {result.status.value} {result.detail}")
    out = []
    for i, task in enumerate(tasks):
        ref, sol = found[i].get("reference"), found[i].get("solution")
        detail = "; ".join(d for d in (ref and ref[1], sol and sol[1]) if d)
        out.append(TaskCheck(task.id, task.source, ref and ref[0], sol and sol[0], detail))
    return out


@dataclass
class SourceSummary:
    """Counts of one source: tasks, references and solutions checked and failed, and the
    failing task ids with their reasons."""

    tasks: int = 0
    references_checked: int = 0
    references_failed: int = 0
    solutions_checked: int = 0
    solutions_failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def summarize_checks(checks: list[TaskCheck]) -> dict[str, SourceSummary]:
    """Per-source counts of :func:`check_tasks` results (R27: reported per source)."""
    out: dict[str, SourceSummary] = defaultdict(SourceSummary)
    for c in checks:
        s = out[c.source]
        s.tasks += 1
        s.references_checked += c.reference_ok is not None
        s.references_failed += c.reference_ok is False
        s.solutions_checked += c.solution_ok is not None
        s.solutions_failed += c.solution_ok is False
        if c.failed:
            s.failures.append((c.id, c.detail))
    return dict(out)


def drop_unverifiable(tasks: list[Task],
                      rewards: RewardPipeline) -> tuple[list[Task], list[TaskCheck]]:
    """The tasks whose reference verifies against itself (solutions are not required), and
    the checks of those dropped. What training does with file sources by default."""
    checks = check_tasks(tasks, rewards, solutions=False)
    kept = [t for t, c in zip(tasks, checks) if c.reference_ok is not False]
    return kept, [c for c in checks if c.reference_ok is False]

"""``rlvr verify --compare``: score the same math records with another verifier library and
list where it and rlvr disagree.

The one comparison so far is Hugging Face's Math-Verify (``--compare math-verify``, the
``compare`` extra). Its calls run in the verifier worker processes of ``rlvr verify``
(:class:`rlvr.rewards.pool.VerifierPool`), each with the same wall-time bound as rlvr's own
verifier calls, so no answer can hang the comparison. Two verdicts *agree* when both say
correct or both say not correct (any other status: wrong, unparsed, multiple_answers,
timeout, error).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.rewards.pool import VerifierPool, VerifyJob
from rlvr.rewards.records_io import VerifyRecord
from rlvr.rewards.types import RewardResult, Status, Verdict

COMPARE_TOOLS = ("math-verify",)
"""The values ``--compare`` accepts."""

INSTALL_HINT = "pip install 'rlvr[compare]'"
_PLUGIN = "rlvr.rewards.compare_math_verify"
_VERIFIER = "math-verify"  # compare_math_verify.VERIFIER_NAME (not imported here: see there)


class CompareError(ValueError):
    """A comparison that cannot run: an unknown tool, or its library is not installed.
    ``str(err)`` says what to do."""


def check_tool(tool: str) -> None:
    """Check that ``tool`` is a known comparison whose library can be imported.

    Raises:
        CompareError: ``tool`` is not one of :data:`COMPARE_TOOLS` (the message names them),
            or ``math_verify`` cannot be imported (the message says ``pip install
            'rlvr[compare]'``).
    """
    if tool not in COMPARE_TOOLS:
        raise CompareError(f"--compare: unknown value {tool!r}; allowed: "
                           f"{', '.join(COMPARE_TOOLS)}")
    try:
        # optional dependency: math_verify (extra `compare`)
        import math_verify  # noqa: F401
    except ImportError as exc:
        raise CompareError(f"--compare {tool} needs the math_verify package ({exc}): "
                           f"{INSTALL_HINT}") from None


def default_compare_out(input_path: Path, output: Path | None) -> Path:
    """Where the disagreements go when ``--compare-out`` is not given: beside ``-o``'s file
    when there is one, else beside the input; ``<stem>.disagreements.jsonl`` (``scored.jsonl``
    -> ``scored.disagreements.jsonl``)."""
    base = output if output is not None else input_path
    return base.with_suffix(".disagreements.jsonl")


def math_verify_verdicts(
    pool: VerifierPool,
    records: Sequence[VerifyRecord],
    timeout_s: float,
    on_result: Callable[[int], None] | None = None,
) -> list[Verdict | None]:
    """Math-Verify's verdict for every math record (``task_type == "math"``), in the pool's
    worker processes, each call bounded by ``timeout_s`` seconds of wall time (an overrun is a
    ``timeout`` verdict, its worker replaced).

    Args:
        pool: the verifier pool (``rlvr verify`` shares its own with the reward pipeline).
        records: the input records, any task types.
        timeout_s: wall-time bound per call, seconds (> 0).
        on_result: called with the number of calls finished so far, for progress bars.

    Returns:
        One entry per record, same order: a :class:`Verdict` for a math record, ``None`` for
        the others (skipped).
    """
    math_rows = [i for i, r in enumerate(records) if r.task_type == "math"]
    jobs = [VerifyJob(task_type="math", completion=records[i].completion,
                      reference=records[i].reference, options={"timeout_s": timeout_s},
                      timeout_s=timeout_s, plugins=(_PLUGIN,), verifier=_VERIFIER)
            for i in math_rows]
    verdicts: list[Verdict | None] = [None] * len(records)
    for i, (verdict, _seconds) in zip(math_rows, pool.verify_many(jobs, on_result)):
        verdicts[i] = verdict
    return verdicts


@dataclass
class Comparison:
    """rlvr's verdicts against another library's on the same records.

    Attributes:
        tool: the other library (``"math-verify"``).
        compared: math records judged by both.
        skipped: records of other task types (not compared).
        agreed: compared records where both say correct or both say not correct.
        rlvr_correct: compared records rlvr marks correct.
        other_correct: compared records the other library marks correct.
        other_timeouts: the other library's calls that overran the time bound.
        other_errors: the other library's calls that raised (``detail`` of the row says why).
        disagreed: compared records where the verdicts differ.
        rows: one dict per disagreement, input order (see :func:`compare_results`); empty in
            a total built with :meth:`add`.
    """

    tool: str
    compared: int = 0
    skipped: int = 0
    agreed: int = 0
    rlvr_correct: int = 0
    other_correct: int = 0
    other_timeouts: int = 0
    other_errors: int = 0
    disagreed: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, part: Comparison) -> None:
        """Add the counts of ``part`` (the comparison of a later chunk of records) to these;
        its ``rows`` are not kept (the caller has written them)."""
        for name in ("compared", "skipped", "agreed", "rlvr_correct", "other_correct",
                     "other_timeouts", "other_errors", "disagreed"):
            setattr(self, name, getattr(self, name) + getattr(part, name))

    @property
    def agreement(self) -> float | None:
        """Share of compared records whose verdicts agree, in [0, 1]; ``None`` if none."""
        return self.agreed / self.compared if self.compared else None

    def summary_line(self, out_path: str | Path) -> str:
        """One line: records compared (and skipped), agreement %, disagreements and where they
        were written, how many each side marks correct, the other side's timeouts / errors."""
        agreement = "-" if self.agreement is None else f"{self.agreement:.1%}"
        return (f"compare {self.tool}: {self.compared} math records compared ({self.skipped} "
                f"other skipped), agreement {agreement} ({self.agreed}/{self.compared}), "
                f"{self.disagreed} disagreements -> {out_path}; correct: rlvr "
                f"{self.rlvr_correct}, {self.tool} {self.other_correct}; {self.tool} "
                f"timeouts {self.other_timeouts}, errors {self.other_errors}")


def _parsed(verdict: Verdict, key: str) -> list[str] | None:
    try:
        return json.loads(verdict.detail)[key]
    except (ValueError, TypeError, KeyError):
        return None  # a timeout or an error: nothing was parsed


def compare_results(
    records: Sequence[VerifyRecord],
    results: Sequence[RewardResult],
    other: Sequence[Verdict | None],
    tool: str = "math-verify",
) -> Comparison:
    """Compare rlvr's results with another library's verdicts, record by record.

    Args:
        records: the input records.
        results: rlvr's result per record (same order).
        other: the other library's verdict per record, ``None`` for a record it skipped
            (same order; :func:`math_verify_verdicts`).
        tool: the other library's name, used in the row keys' prefix (``math_verify_``).

    Returns:
        A :class:`Comparison`. Each disagreement row holds ``id``, ``line`` (1-based input
        line), ``category``, ``reference``, ``rlvr_status`` and ``rlvr_extracted`` (rlvr's
        verdict and extracted answer), ``<tool>_status`` and ``<tool>_extracted`` (the parsed
        answer as a list of strings: sympy form, then the matched text; ``[]`` when nothing
        was parsed, ``null`` after a timeout or error), ``<tool>_gold`` (the parsed
        reference, same form) and ``<tool>_detail`` (empty unless a timeout or error).

    Raises:
        ValueError: the three sequences differ in length.
    """
    if not len(records) == len(results) == len(other):
        raise ValueError(f"compare_results: {len(records)} records, {len(results)} results, "
                         f"{len(other)} verdicts")
    prefix = tool.replace("-", "_")
    comparison = Comparison(tool)
    for record, result, verdict in zip(records, results, other):
        if verdict is None:
            comparison.skipped += 1
            continue
        comparison.compared += 1
        ours, theirs = result.status is Status.correct, verdict.status is Status.correct
        comparison.rlvr_correct += ours
        comparison.other_correct += theirs
        comparison.other_timeouts += verdict.status is Status.timeout
        comparison.other_errors += verdict.status is Status.error
        if ours == theirs:
            comparison.agreed += 1
            continue
        failed = verdict.status in (Status.timeout, Status.error)
        comparison.disagreed += 1
        comparison.rows.append({
            "id": record.id,
            "line": record.line,
            "category": record.category,
            "reference": record.reference,
            "rlvr_status": result.status.value,
            "rlvr_extracted": result.extracted,
            f"{prefix}_status": verdict.status.value,
            f"{prefix}_extracted": _parsed(verdict, "answer"),
            f"{prefix}_gold": _parsed(verdict, "gold"),
            f"{prefix}_detail": verdict.detail if failed else "",
        })
    return comparison

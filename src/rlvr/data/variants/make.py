"""Making variants (:mod:`rlvr.data.variants`, steps 4 and 5, and the entry points): draw new
values for a task's free numbers, re-run its annotation chain on them, and write the variant
(:func:`make_variant`); one or more per task over a list of tasks (:func:`make_variants`).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

from rlvr.data.variants.plan import PERCENT_FORMS, Plan, VariantSkip, make_plan
from rlvr.data.variants.rewrite import rewrite_answer, rewrite_question
from rlvr.data.variants.text_numbers import Numeral, evaluate, format_decimal
from rlvr.records import Task
from rlvr.tasks.sources import gsm8k_solution

# ----------------------------------------------------------------------------- new values


def _decimals_of(value: Fraction, numerals: list[Numeral]) -> int:
    return max((n.decimals for n in numerals if n.value == value), default=0)


def _draw(value: Fraction, decimals: int, percent: bool, rng: random.Random) -> Fraction:
    """A new value of similar magnitude: same decimals and trailing zeros, the leading part
    drawn from [m/2, 2m] (at least [1, 3])."""
    units = int(value * 10**decimals)
    zeros = 0
    while units >= 10 and units % 10 == 0:
        units //= 10
        zeros += 1
    low, high = max(1, math.ceil(units / 2)), max(3, 2 * units)
    scale = Fraction(10**zeros, 10**decimals)
    if percent and value <= 100:
        high = min(high, int(100 / scale))
    return rng.randint(low, max(low, high)) * scale


def _draw_all(plan: Plan, rng: random.Random) -> dict[Fraction, Fraction] | None:
    new: dict[Fraction, Fraction] = {}
    for value in plan.used:
        is_pct = any(n.percent for n in plan.numerals if n.value == value)
        candidate = _draw(value, _decimals_of(value, plan.numerals), is_pct, rng)
        if candidate == value or candidate <= 0 or candidate in plan.unchanged \
                or candidate in new.values():
            return None
        new[value] = candidate
    return new


def _run_chain(plan: Plan, new: dict[Fraction, Fraction]) -> tuple[list[list[Fraction]],
                                                                      list[Fraction]] | str:
    """New literal values and results per step, or the reason the draw is rejected."""
    results: list[Fraction] = []
    all_values: list[list[Fraction]] = []
    for step, sources in zip(plan.steps, plan.sources):
        values = []
        for (kind, ref), lit in zip(sources, step.literals):
            if kind == "r":
                values.append(results[ref])  # type: ignore[index]
            elif kind == "q":
                values.append(new[ref])  # type: ignore[index]
            elif kind in PERCENT_FORMS:
                values.append(PERCENT_FORMS[kind](new[ref]))  # type: ignore[index]
            else:
                values.append(lit.value)
        try:
            result = evaluate(step.expr, values)
        except ZeroDivisionError:
            return "zero_division"
        if step.result.denominator == 1 and result.denominator != 1:
            return "non_integer"
        if (result > 0) != (step.result > 0) or (result < 0) != (step.result < 0):
            return "sign_change"
        if format_decimal(result) is None:
            return "non_terminating"
        all_values.append(values)
        results.append(result)
    return all_values, results


# ----------------------------------------------------------------------------- public API


def make_variant(task: Task, k: int, rng: random.Random, max_attempts: int = 100,
                 exclude: Sequence[dict[str, str]] = ()) -> Task:
    """One numbers-changed variant of a GSM8K-format task (:mod:`rlvr.data.variants` gives the
    method).

    Args:
        task: a task whose ``reference`` is a GSM8K answer (annotations ``<<expr=result>>``,
            final ``#### N``) and whose ``prompt`` holds the question.
        k: the variant's number, used in its id ``<task.id>-var<k>``.
        rng: the random source for the new values (advanced by the call).
        max_attempts: draws of new values to try before giving up.
        exclude: substitution dicts of variants already made, not to be repeated.

    Returns:
        The new task: id ``<task.id>-var<k>``, the question with new numbers, the reference
        rewritten (new annotations, new ``#### N``), ``solution`` rewritten likewise (without
        annotations) when the task has one, and ``metadata`` = the task's metadata plus
        ``variant_of`` (the task id) and ``substitutions`` (old value -> new value, as
        decimal strings).

    Raises:
        VariantSkip: with ``reason`` one of: ``"not_gsm8k"`` (no ``####`` in a string
            reference), ``"no_final_answer"``, ``"bad_annotation"`` (outside the grammar),
            ``"chain_mismatch"`` (an annotation's expression does not give its result),
            ``"no_annotations"``, ``"final_not_last"`` (the last result is not ``N``),
            ``"decision"``, ``"unannotated_step"``, ``"unmapped"``, ``"ambiguous"``,
            ``"no_free_numbers"`` (nothing to change), ``"unused_number"``,
            ``"no_valid_values"`` (no draw passed the checks) or ``"ambiguous_text"``; see
            :mod:`rlvr.data.variants` for each.
    """
    if not isinstance(task.reference, str) or "####" not in task.reference:
        raise VariantSkip("not_gsm8k")
    plan = make_plan(task.prompt, task.reference)
    for _ in range(max_attempts):
        new = _draw_all(plan, rng)
        if new is None:
            continue
        run = _run_chain(plan, new)
        if isinstance(run, str):
            continue
        values, results = run
        subs = {format_decimal(old): format_decimal(value) for old, value in new.items()}
        if subs in exclude:
            continue
        reference = rewrite_answer(task.reference, plan, new, values, results)
        question = rewrite_question(task.prompt, plan, new)
        return _variant_task(task, k, question, reference, subs)
    raise VariantSkip("no_valid_values")


def _variant_task(task: Task, k: int, question: str, reference: str,
                  subs: dict) -> Task:
    solution = None
    if task.solution is not None:
        solution = gsm8k_solution(reference)
    return Task(id=f"{task.id}-var{k}", prompt=question, reference=reference,
                task_type=task.task_type, source=task.source, difficulty=task.difficulty,
                category=task.category, solution=solution,
                metadata={**task.metadata, "variant_of": task.id, "substitutions": subs})


def make_variants(tasks: Sequence[Task], per_task: int = 1, seed: int = 0,
                  max_attempts: int = 100) -> tuple[list[Task], dict]:
    """Numbers-changed variants of GSM8K-format word problems, with recomputed answers (R32).

    Args:
        tasks: tasks whose ``reference`` is a GSM8K answer (e.g. from
            :func:`rlvr.tasks.sources.load_gsm8k`); others are skipped as ``"not_gsm8k"``.
        per_task: variants wanted per task (>= 1), each with different substitutions.
        seed: the random seed. Task ``t`` draws from ``random.Random(f"{seed}:{t.id}")``, so
            its variants do not depend on the other tasks in the list.
        max_attempts: draws of new values tried per variant.

    Returns:
        ``(variants, report)``. ``variants`` holds the new tasks in input order, ids
        ``<id>-var1`` ... ``<id>-var<per_task>``. ``report`` holds ``tasks`` (the input count),
        ``made`` (variants produced), ``tasks_with_variant``, ``partial`` (tasks with some
        but fewer than ``per_task`` variants) and ``skipped``, a dict of reason to the number
        of tasks that gave no variant (reasons: see :func:`make_variant`).

    Raises:
        ValueError: if ``per_task`` < 1.
    """
    if per_task < 1:
        raise ValueError(f"per_task must be >= 1, got {per_task}")
    variants: list[Task] = []
    skipped: Counter[str] = Counter()
    with_variant = partial = 0
    for task in tasks:
        rng = random.Random(f"{seed}:{task.id}")
        made: list[Task] = []
        reason = ""
        for k in range(1, per_task + 1):
            try:
                made.append(make_variant(task, k, rng, max_attempts,
                                         [v.metadata["substitutions"] for v in made]))
            except VariantSkip as skip:
                reason = skip.reason
                break
        if made:
            with_variant += 1
            partial += len(made) < per_task
        else:
            skipped[reason] += 1
        variants.extend(made)
    report = {"tasks": len(tasks), "made": len(variants), "tasks_with_variant": with_variant,
              "partial": partial, "skipped": dict(sorted(skipped.items()))}
    return variants, report

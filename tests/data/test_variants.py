"""Numbers-changed variants of GSM8K problems with recomputed answers (R32)."""

from __future__ import annotations

import random
import re
from fractions import Fraction
from pathlib import Path

import pytest

from rlvr.data.variants import (
    ArithmeticSyntaxError,
    VariantSkip,
    evaluate,
    literals,
    make_variant,
    make_variants,
    problem_constants,
)
from rlvr.records import Task

GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"  # ../shared/data

NATALIA_Q = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many "
             "clips in May. How many clips did Natalia sell altogether in April and May?")
NATALIA_A = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
             "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


def _task(prompt: str, reference, id_: str = "t", solution: str | None = None) -> Task:
    return Task(id=id_, prompt=prompt, reference=reference, task_type="math", source="gsm8k",
                category="gsm8k", solution=solution, metadata={"origin": "test"})


def _skip_reason(task: Task) -> str:
    with pytest.raises(VariantSkip) as info:
        make_variant(task, 1, random.Random(0))
    return info.value.reason


# --- the evaluator -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "value"),
    [("48/2", 24), ("48+24", 72), ("2+3*4", 14), ("(2+3)*4", 20), ("10-4-3", 3),
     ("100/10/5", 2), ("-3+5", 2), ("2*-3", -6), ("80*1.5", 120), ("2-.5", Fraction(3, 2)),
     ("(20/100)*25", 5), ("10/3", Fraction(10, 3)), (" 7 ", 7), ("1.", 1)],
)
def test_evaluate(expr, value):
    assert evaluate(expr) == value


def test_evaluate_with_replacement_values():
    assert evaluate("48/2+48", [Fraction(36), Fraction(2), Fraction(36)]) == 54
    assert [lit.value for lit in literals("3*(1.5+.5)")] == [3, Fraction(3, 2), Fraction(1, 2)]
    with pytest.raises(ArithmeticSyntaxError, match="2 values for 3 literals"):
        evaluate("1+2+3", [Fraction(1), Fraction(2)])


@pytest.mark.parametrize("expr", ["", "2+", "(2+3", "2+3)", "2**3", "x+1", "__import__('os')",
                                  "2 3"])
def test_evaluate_rejects_bad_syntax(expr):
    with pytest.raises(ArithmeticSyntaxError):
        evaluate(expr)


def test_evaluate_division_by_zero():
    with pytest.raises(ZeroDivisionError):
        evaluate("5/(2-2)")


def test_problem_constants():
    consts = problem_constants("She eats three eggs and half a dozen muffins; 20% off.")
    assert {Fraction(3), Fraction(2), Fraction(1, 2), Fraction(12), Fraction(100),
            Fraction(1, 100), Fraction(1)} <= consts
    assert Fraction(60) in problem_constants("He drives 2 hours and 30 minutes.")
    assert Fraction(60) not in problem_constants("He drives 2 hours.")  # one unit: no factor
    assert Fraction(25) in problem_constants("Twenty-five apples")


# --- the hand-worked example -------------------------------------------------------------------


def test_natalia_variant_recomputed_by_hand():
    task = _task(NATALIA_Q, NATALIA_A, id_="gsm8k-train-1", solution="anything")
    variants, report = make_variants([task], seed=0)
    assert report == {"tasks": 1, "made": 1, "tasks_with_variant": 1, "partial": 0,
                      "skipped": {}}
    [v] = variants
    # Seed 0 draws 36 for 48 ("half" pins the 2). By hand: May = 36 / 2 = 18 clips,
    # April + May = 36 + 18 = 54 clips.
    assert v.metadata == {"origin": "test", "variant_of": "gsm8k-train-1",
                          "substitutions": {"48": "36"}}
    assert v.id == "gsm8k-train-1-var1"
    assert v.prompt == NATALIA_Q.replace("48", "36")
    assert v.reference == ("Natalia sold 36/2 = <<36/2=18>>18 clips in May.\n"
                           "Natalia sold 36+18 = <<36+18=54>>54 clips altogether in April and "
                           "May.\n#### 54")
    assert v.solution == ("Natalia sold 36/2 = 18 clips in May.\n"
                          "Natalia sold 36+18 = 54 clips altogether in April and May.\n#### 54")
    assert (v.task_type, v.source, v.category) == ("math", "gsm8k", "gsm8k")


@pytest.mark.parametrize("seed", range(10))
def test_natalia_answer_is_one_and_a_half_times_the_new_number(seed):
    [v], _ = make_variants([_task(NATALIA_Q, NATALIA_A)], seed=seed)
    n = int(v.metadata["substitutions"]["48"])
    assert n != 48 and n % 2 == 0 and 24 <= n <= 96  # drawn from [48/2, 2*48], integer half
    assert v.reference.endswith(f"#### {n + n // 2}")
    assert f"<<{n}/2={n // 2}>>" in v.reference


def test_per_task_variants_differ_and_skip_nothing_else():
    variants, report = make_variants([_task(NATALIA_Q, NATALIA_A)], per_task=3, seed=1)
    assert [v.id for v in variants] == ["t-var1", "t-var2", "t-var3"]
    subs = [v.metadata["substitutions"]["48"] for v in variants]
    assert len(set(subs)) == 3
    assert report["made"] == 3 and report["partial"] == 0
    with pytest.raises(ValueError, match="per_task"):
        make_variants([], per_task=0)


def test_percent_decimal_and_commas():
    q = ("Josh buys a house for $80,000 and then puts in $50,000 in repairs. This increased the "
         "value of the house by 150%. How much profit did he make?")
    a = ("The cost of the house and repairs came out to 80,000+50,000=$<<80000+50000=130000>>"
         "130,000\nHe increased the value of the house by 80,000*1.5=<<80000*1.5=120000>>"
         "120,000\nSo the new value of the house is 120,000+80,000=$<<120000+80000=200000>>"
         "200,000\nSo he made a profit of 200,000-130,000=$<<200000-130000=70000>>70,000\n"
         "#### 70000")
    [v], _ = make_variants([_task(q, a)], seed=0)
    subs = {int(k): int(x) for k, x in v.metadata["substitutions"].items()}
    house, repairs, pct = subs[80000], subs[50000], subs[150]
    assert house % 10000 == 0 and repairs % 10000 == 0  # trailing zeros kept
    profit = house + Fraction(house * pct, 100) - (house + repairs)
    assert _chain_check(v.reference) == profit
    assert f"${house:,}" in v.prompt and f"${repairs:,}" in v.prompt and f"{pct}%" in v.prompt
    assert f"{house:,}+{repairs:,}=$<<{house}+{repairs}=" in v.reference  # prose restated


# --- skip reasons ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        ("Tom has 5 apples.", "He has 5 apples.\n#### 5", "no_annotations"),
        ("Tom has 5 apples.", "He has <<5*2=11>>11.\n#### 11", "chain_mismatch"),
        ("Tom has 5 apples and 3 pears.", "<<5+3=8>>8 fruit, 2 more\n#### 10", "final_not_last"),
        ("Tom has 5 apples and 3 pears.", "<<5+3=8>>8 fruit, 8 = 2*4\n#### 8",
         "unannotated_step"),
        ("Plan A costs 5 and plan B 7. Which is cheaper?", "<<7-5=2>>2\n#### 2", "decision"),
        ("Tom has 5 apples.", "Since 5 > 3, <<5*2=10>>10\n#### 10", "decision"),
        ("Tom has 5 apples and 3 pears.", "<<5*7=35>>35\n#### 35", "unmapped"),  # 7 from where?
        ("Tom has 3 boxes of 1 apple.", "<<3*1=3>>3 apples, <<3+3=6>>6\n#### 6", "ambiguous"),
        ("Tom has 5 apples and 3 pears.", "<<5*2=10>>10 halves\n#### 10", "unmapped"),
        ("Tom has 5 apples, 3 pears, 9 plums.", "<<5+3=8>>8\n#### 8", "unused_number"),
        ("Tom has one apple and half a pear.", "<<1+.5=1.5>>1.5\n#### 1.5", "no_free_numbers"),
        ("Ann has 8 pens, half as many pencils and four erasers. How many pencils?",
         "She has 8/2=<<8/2=4>>4 pencils, as many as her 4 erasers.\n#### 4", "ambiguous_text"),
    ],
)
def test_skip_reasons(question, answer, reason):
    assert _skip_reason(_task(question, answer)) == reason


def test_non_gsm8k_reference_is_skipped():
    assert _skip_reason(_task("What is 2+2?", "4")) == "not_gsm8k"
    assert _skip_reason(_task("What is 2+2?", ["assert f() == 4"])) == "not_gsm8k"
    _, report = make_variants([_task("What is 2+2?", "4"), _task(NATALIA_Q, NATALIA_A)])
    assert report["skipped"] == {"not_gsm8k": 1} and report["made"] == 1


def test_draws_that_break_integrality_are_retried():
    # 21 / 7 must stay an integer: most draws (e.g. 25 / 6) fail and are redrawn.
    task = _task("Tom shares 21 apples among 7 friends equally.", "<<21/7=3>>3 each\n#### 3")
    [v], _ = make_variants([task], seed=0)
    a, b = (Fraction(v.metadata["substitutions"][k]) for k in ("21", "7"))
    assert (a / b).denominator == 1 and v.reference.endswith(f"#### {a / b}")


# --- real GSM8K --------------------------------------------------------------------------------

_ANNOTATION = re.compile(r"<<([^<>]*)=([^<>=]*)>>")
_SAFE = re.compile(r"[0-9.+\-*/() ]+")
_NUMBER = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)")


def _chain_check(reference: str) -> Fraction:
    """Independent check: every annotation's expression (digits and operators only, so eval is
    safe here) gives its written result; returns the last result, which must be ``####``."""
    last = None
    for expr, result in _ANNOTATION.findall(reference):
        assert _SAFE.fullmatch(expr), expr
        value = eval(expr)
        assert abs(value - float(result)) < 1e-9 * max(1.0, abs(value)), (expr, result)
        last = Fraction(result)
    final = Fraction(reference.rsplit("####", 1)[1].strip())
    assert last == final
    return final


def _numbers(text: str) -> list[Fraction]:
    return [Fraction(n.replace(",", "")) for n in _NUMBER.findall(text)]


@pytest.fixture(scope="module")
def gsm8k_test():
    if not (GSM8K / "test.jsonl").is_file():
        pytest.skip(f"GSM8K not found under {GSM8K}")
    from rlvr.tasks.sources import load_gsm8k

    return load_gsm8k(GSM8K, "test")


def test_first_200_gsm8k_test_variants_recompute(gsm8k_test):
    tasks = gsm8k_test[:200]
    variants, report = make_variants(tasks, seed=0)
    by_id = {t.id: t for t in tasks}
    assert variants and report["made"] == len(variants) == report["tasks_with_variant"]
    for v in variants:
        original = by_id[v.metadata["variant_of"]]
        assert v.prompt != original.prompt
        assert v.reference != original.reference
        _chain_check(v.reference)
        assert v.solution is not None and "<<" not in v.solution
        assert v.solution.endswith(v.reference.rsplit("\n", 1)[1])  # same "#### N"
        # The question's numerals are the original's with the substitutions applied.
        subs = {Fraction(k): Fraction(x) for k, x in v.metadata["substitutions"].items()}
        old, new = _numbers(original.prompt), _numbers(v.prompt)
        assert len(old) == len(new), v.id
        assert all(subs.get(o, o) == n or o == n for o, n in zip(old, new)), v.id
    print(f"\nfirst 200 GSM8K test items: {report}")


def test_deterministic_by_seed(gsm8k_test):
    tasks = gsm8k_test[:60]
    a, report_a = make_variants(tasks, seed=3)
    b, report_b = make_variants(tasks, seed=3)
    assert [v.to_dict() for v in a] == [v.to_dict() for v in b] and report_a == report_b
    c, _ = make_variants(tasks, seed=4)
    assert [v.prompt for v in a] != [v.prompt for v in c]
    # A task's variant does not depend on the other tasks in the list.
    [solo], _ = make_variants([by for by in tasks if by.id == a[0].metadata["variant_of"]], seed=3)
    assert solo.to_dict() == a[0].to_dict()


def test_gsm8k_test_coverage(gsm8k_test):
    variants, report = make_variants(gsm8k_test, seed=0)
    share = report["tasks_with_variant"] / report["tasks"]
    print(f"\nGSM8K test: variants for {report['tasks_with_variant']}/{report['tasks']} "
          f"({share:.1%}); skipped {report['skipped']}")
    assert report["tasks"] == len(gsm8k_test)
    assert report["tasks_with_variant"] + sum(report["skipped"].values()) == report["tasks"]
    assert share > 0.4
    for v in variants:
        _chain_check(v.reference)

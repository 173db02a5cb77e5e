"""Process reward (R4): calculation steps found, recomputed and judged; pipeline wiring."""

import dataclasses
import json
from fractions import Fraction
from pathlib import Path

import pytest

from rlvr.rewards import RewardConfig, RewardPipeline
from rlvr.rewards.process import (
    MAX_LINKS,
    MAX_SIDE_CHARS,
    MAX_STEPS,
    Step,
    calculation_steps,
    process_score,
)

NATALIA = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n"
    "#### 72"
)
GSM8K_TEST = Path("/work/shared/data/gsm8k/test.jsonl")


def judged(text):
    """(expression, claimed, correct) of every step."""
    return [(s.expression, s.claimed, s.correct) for s in calculation_steps(text)]


# ----------------------------------------------------------------------------- GSM8K / arithmetic


def test_gsm8k_reference_annotations_are_steps_counted_once():
    steps = calculation_steps(NATALIA)
    # The visible "48/2 = 24" restates the annotation <<48/2=24>>: one step, not two.
    assert [(s.expression, s.claimed, s.value, s.correct, s.source) for s in steps] == [
        ("48/2", "24", Fraction(24), True, "annotation"),
        ("48+24", "72", Fraction(72), True, "annotation"),
    ]
    assert process_score(NATALIA) == 1.0


def test_visible_result_that_contradicts_its_annotation_is_a_wrong_step():
    steps = calculation_steps("She sold 48/2 = <<48/2=24>>25 clips.")
    assert [(s.source, s.claimed, s.correct) for s in steps] == [
        ("equation", "25", False), ("annotation", "24", True)]
    assert process_score("She sold 48/2 = <<48/2=24>>25 clips.") == 0.5


def test_wrong_annotation_is_a_wrong_step():
    text = "He runs 9*60=<<9*60=520>>520 meters\n#### 520"
    assert judged(text) == [("9*60", "520", False)]
    assert process_score(text) == 0.0


def test_arithmetic_worked_solution():
    # The arithmetic task's format (long multiplication by place value), all right.
    text = "37 * 58 = 37 * 50 + 37 * 8\n37 * 50 = 1850\n37 * 8 = 296\n1850 + 296 = 2146\n#### 2146"
    assert judged(text) == [
        ("37 * 58", "37 * 50 + 37 * 8", True),  # 2146 = 1850 + 296
        ("37 * 50", "1850", True),
        ("37 * 8", "296", True),
        ("1850 + 296", "2146", True),
    ]
    assert process_score(text) == 1.0
    assert process_score("9 - 3 = 6\n7 - 6 = 1\n4 - (-5) = 9\n#### 9") == 1.0


def test_generated_arithmetic_solutions_all_score_one():
    from rlvr.tasks.arithmetic import PRESETS, generate

    for level in PRESETS:
        for task in generate(level, 20, seed=7, unique=False):
            assert process_score(task.solution) == 1.0, task.solution


def test_one_wrong_step_of_three():
    text = "2 + 3 = 5\n5 * 4 = 21\n21 - 1 = 20\n#### 20"
    steps = calculation_steps(text)
    assert [s.correct for s in steps] == [True, False, True]
    assert steps[1].value == 20 and steps[1].claimed_value == 21
    assert process_score(text) == pytest.approx(2 / 3)


# ----------------------------------------------------------------------------- number formats


@pytest.mark.parametrize("text, expression, claimed", [
    ("48/2 = 24", "48/2", "24"),
    ("3 * 4 = 12", "3 * 4", "12"),
    ("He paid $5 + $7 = $12 in all.", "$5 + $7", "$12"),
    ("12 x 3 = 36", "12 x 3", "36"),
    ("12x3=36", "12x3", "36"),
    ("12 × 3 = 36", "12 × 3", "36"),
    ("36 ÷ 3 = 12", "36 ÷ 3", "12"),
    ("7 − 2 = 5", "7 − 2", "5"),
    ("1,000 + 200 = 1,200", "1,000 + 200", "1,200"),
    ("600 x 30 = 18 000 watts", "600 x 30", "18 000"),
    ("0.5 * 8 = 4", "0.5 * 8", "4"),
    (".5 * 8 = 4.0", ".5 * 8", "4.0"),
    ("(4 + 7) * 3 = 33", "(4 + 7) * 3", "33"),
    ("4 - (-5) = 9", "4 - (-5)", "9"),
    ("5 - 8 = -3", "5 - 8", "-3"),
    ("So 5 + 3 = 8.", "5 + 3", "8"),
    ("- 2 + 3 = 5", "2 + 3", "5"),            # a list bullet, not a minus
    ("1) 2 + 3 = 5", "2 + 3", "5"),
    ("**2 + 3 = 5**", "2 + 3", "5"),          # markdown bold
    ("(so 2 + 3 = 5)", "2 + 3", "5"),
    ("\\(12 \\times 3 = 36\\)", "12 × 3", "36"),  # LaTeX operators are read
    ("3 1/2 - 2 = 1 1/2", "3 1/2 - 2", "1 1/2"),  # mixed numbers
    ("60 / 3/4 = 80", "60 / 3/4", "80"),       # a tight fraction is one operand
    ("4 / 3 = 1 and 1/3", "4 / 3", "1 and 1/3"),
    ("5 + 3 = 8cm", "5 + 3", "8"),             # a unit glued to the claim
])
def test_one_right_step(text, expression, claimed):
    assert judged(text) == [(expression, claimed, True)]
    assert process_score(text) == 1.0


def test_values_are_exact_fractions():
    (step,) = calculation_steps("1,000 + 200 = 1,200")
    assert step.value == Fraction(1200) and step.claimed_value == Fraction(1200)
    (step,) = calculation_steps("10/3 = 3.33")
    assert step.value == Fraction(10, 3) and step.claimed_value == Fraction(333, 100)


@pytest.mark.parametrize("text, correct", [
    ("10/3 = 3.33", True),     # rounded to the claim's two decimals
    ("2/3 = 0.667", True),
    ("2/3 = 0.67", True),
    ("2/3 = 0.66", False),     # truncated, not rounded
    ("10/3 = 3", False),       # an integer claim must be exact
    ("1/3 = 0.3333333", True),  # within 1e-6 relative
    ("1/4 = 25%", True),       # a percentage, read either way
    ("0.25 * 100 = 25%", True),
    ("1/4 = 30%", False),
    ("5/0 = 3", False),        # division by zero is a wrong step
])
def test_claim_tolerance(text, correct):
    assert [s.correct for s in calculation_steps(text)] == [correct]


def test_division_by_zero_has_no_value():
    (step,) = calculation_steps("5/0 = 3")
    assert step.value is None and not step.correct


# ----------------------------------------------------------------------------- chains


def test_chain_as_running_total():
    # Each '=' link left to right: 2 + 3 = 5 (the leading number of "5 + 1"), then 5 + 1 = 6.
    assert judged("2 + 3 = 5 + 1 = 6") == [("2 + 3", "5", True), ("5 + 1", "6", True)]
    assert process_score("2 + 3 = 5 + 1 = 6") == 1.0


def test_chain_with_a_wrong_link():
    assert judged("2 + 3 = 6 + 1 = 7") == [("2 + 3", "6 + 1", False), ("6 + 1", "7", True)]
    assert process_score("2 + 3 = 6 + 1 = 7") == 0.5


def test_chain_of_equal_expressions_and_bare_numbers():
    assert judged("2 * 6 = 3 * 4 = 12") == [("2 * 6", "3 * 4", True), ("3 * 4", "12", True)]
    # "12 = 12" has no operator: not a step.
    assert judged("3 * 4 = 12 = 12") == [("3 * 4", "12", True)]
    assert judged("y = 2 + 3 = 5") == [("2 + 3", "5", True)]


# ----------------------------------------------------------------------------- not steps


@pytest.mark.parametrize("text", [
    "",
    "Natalia sold clips in April and May.\n#### 72",
    "x = 5",
    "Let x = 5 and y = x + 2.",
    "2x + 3 = 7",
    "3x = 12, so x = 4",
    "100/5 = 5A/5 or 20 = A",       # algebra on the right
    "3*30 = 30 + M trees",           # the claim continues in prose
    "8/3 = 24/Y",
    "The ratio is 3:4 = 6:8.",
    "It starts at 10:30 + 2 = 12:30.",
    "0900-0130 = 0730 hours",        # times with leading zeros
    "The date 2024-01-05 = today",
    "20% of 50 = 10",                # "of" is prose; "50 = 10" has no operator
    "He had 3 apples + 4 = 7",       # "+ 4 = 7" is the tail of a longer expression
    "15 pages x 1/3 = 5 pages",
    "0,5 * 8 = 4",                   # decimal comma
    "12 = 12",
    "a == b",
    "The answer is 42.\n#### 42",
])
def test_no_calculation(text):
    assert calculation_steps(text) == []
    assert process_score(text) is None


def test_step_is_frozen():
    (step,) = calculation_steps("3 * 4 = 12")
    assert isinstance(step, Step)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.correct = False  # type: ignore[misc]


def test_steps_are_capped():
    text = "1 + 1 = 2\n" * 200
    assert len(calculation_steps(text)) == MAX_STEPS
    # past the bounds the later steps go unjudged, so the text scores 0 (reward probe, kind P)
    assert process_score(text) == 0.0
    assert process_score("1 + 1 = 2\n" * 20) == 1.0  # repeats count once, within the bounds


# ----------------------------------------------------------------------------- adversarial


@pytest.mark.parametrize("name, text", [
    ("100k-char line", "1 + " * 25_000 + "1 = 25001"),
    ("100k-char prose line", "word " * 20_000 + "2 + 2 = 4"),
    ("10,000 '='", "=" * 10_000),
    ("10,000 links", "1 + 1 = " * 10_000),
    ("10,000 annotations", "<<1+1=2>>" * 10_000),
    ("deep parentheses", "(" * 5_000 + "1" + ")" * 5_000 + " = 1"),
    ("nested in a short side", "(" * 90 + "1+1" + ")" * 90 + " = 2"),
    ("unary minus chain", "-" * 150 + "5 + 1 = 6"),
    ("huge literal", "9" * 5_000 + " * 2 = 5"),
    ("unclosed annotations", "<<" * 50_000 + "=" * 10),
    ("100k x", "x" * 100_000 + " = 1"),
    ("20k lines", "2+2=4\n" * 20_000),
    ("commas", "1," * 50_000 + "000 + 1 = 2"),
])
def test_adversarial_input_is_bounded_and_safe(name, text, monkeypatch):
    # The work is bounded by the module's limits, asserted here instead of a time: at most
    # MAX_LINKS "=" links examined per text, at most two exact evaluations per link (its
    # expression and its claim), sides of at most MAX_SIDE_CHARS characters, MAX_STEPS steps.
    from rlvr.rewards.process import steps as process

    budgets, evaluated = [], []

    class Budget(process._Budget):
        def __init__(self):
            super().__init__()
            budgets.append(self)

    evaluate = process.evaluate

    def counting(expression):
        evaluated.append(expression)
        return evaluate(expression)

    monkeypatch.setattr(process, "_Budget", Budget)
    monkeypatch.setattr(process, "evaluate", counting)
    steps = calculation_steps(text)
    assert len(budgets) == 1 and budgets[0].links <= MAX_LINKS, name
    assert len(evaluated) <= 2 * budgets[0].links, name
    assert len(steps) <= MAX_STEPS
    assert all(len(s.expression) <= MAX_SIDE_CHARS and len(s.claimed) <= MAX_SIDE_CHARS
               for s in steps), name
    score = process_score(text)
    assert score is None or 0.0 <= score <= 1.0


def test_random_arithmetic_noise_never_raises():
    import random

    alphabet = list("0123456789" * 3 + " .,$+-*/×÷·−–xX()=<>%:aA\n\\") + ["<<", ">>", "and "]
    rng = random.Random(0)
    for _ in range(3_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        score = process_score(text)
        assert score is None or 0.0 <= score <= 1.0


# ----------------------------------------------------------------------------- pipeline


ONE_WRONG_STEP = "2 + 3 = 5\n5 * 4 = 21\n21 - 1 = 20\n#### 20"


def test_pipeline_adds_weighted_process_component():
    config = RewardConfig(workers=0, weights={"outcome": 1.0, "format": 0.1, "process": 0.2})
    pipeline = RewardPipeline(config)
    result = pipeline.score(ONE_WRONG_STEP, "20", "math")
    assert result.components == {"outcome": 1.0, "format": 1.0,
                                 "process": pytest.approx(2 / 3)}
    # outcome 1 + 0.1 * format 1 + 0.2 * process 2/3
    assert result.reward == pytest.approx(1.0 + 0.1 * 1.0 + 0.2 * (2 / 3))

    # No written calculation scores process 0.0: leaving the work out is not free.
    bare = pipeline.score("Add them up.\n#### 20", "20", "math")
    assert bare.components == {"outcome": 1.0, "format": 1.0, "process": 0.0}
    assert bare.reward == pytest.approx(1.1)
    # A wrong answer with perfect steps still scores below a right answer without any.
    wrong = pipeline.score("2 + 3 = 5\n#### 5", "20", "math")
    assert wrong.components == {"outcome": 0.0, "format": 1.0, "process": 1.0}
    assert wrong.reward == pytest.approx(0.3) and wrong.reward < bare.reward


def test_pipeline_default_has_no_process_component():
    result = RewardPipeline(RewardConfig(workers=0)).score(ONE_WRONG_STEP, "20", "math")
    assert set(result.components) == {"outcome", "format"}
    assert result.reward == pytest.approx(1.1)
    zero = RewardConfig(workers=0, weights={"outcome": 1.0, "format": 0.1, "process": 0.0})
    assert "process" not in RewardPipeline(zero).score(ONE_WRONG_STEP, "20").components


def test_process_weight_is_held_to_outcome_dominance():
    with pytest.raises(ValueError, match="outcome"):
        RewardConfig(weights={"outcome": 1.0, "format": 0.1, "process": 0.9})


# ----------------------------------------------------------------------------- GSM8K references


@pytest.mark.skipif(not GSM8K_TEST.exists(), reason="GSM8K test set not available")
def test_gsm8k_test_references_score_one():
    answers = [json.loads(line)["answer"] for line in GSM8K_TEST.read_text().splitlines()
               if line.strip()]
    scores = [process_score(answer) for answer in answers]
    with_steps = [s for s in scores if s is not None]
    perfect = sum(s == 1.0 for s in with_steps)
    # Measured: 1,296 of 1,319 (98.3%) score 1.0; 22 write no calculation read here
    # (algebra, "27(1/3)=9"); 1 is a wrong reference ("$32 - $20 = $300").
    assert perfect / len(answers) >= 0.97
    assert perfect / len(with_steps) >= 0.995
    assert len(with_steps) / len(answers) >= 0.97

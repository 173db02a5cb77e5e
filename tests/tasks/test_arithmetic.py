"""Arithmetic task generator: determinism, leak-free splits, verified worked solutions."""

import re
from collections import Counter

import pytest

from rlvr.records import Task
from rlvr.tasks.arithmetic import (
    PRESETS,
    ExpressionError,
    Level,
    check_solution,
    evaluate,
    generate,
    make_task,
    parse_mixture,
    render,
    solution_steps,
    split_key,
    split_of,
    train_val_split,
)

MIX = "2d+-2d:1,2dx1d:1,2dx2d:1,3ops:1,3ops-paren:1,div:1"


# ------------------------------------------------------------------ evaluator


@pytest.mark.parametrize(
    "text,value",
    [
        ("37 + 58", 95),
        ("3 + 4 * 5", 23),
        ("(3 + 4) * 5", 35),
        ("5 - (-5)", 10),
        ("-5 * 2", -10),
        ("84 / 7", 12),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("37 * 50 + 37 * 8", 2146),
        (" 42 ", 42),
        ("6 × 7", 42),
        ("2 - 3 - 4", -5),
    ],
)
def test_evaluate(text, value):
    assert evaluate(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "7 / 2",
        "1 / 0",
        "2 ** 3",
        "__import__('os')",
        "a + 1",
        "1.5 + 1",
        "abs(-1)",
        "",
        "1 +",
        "9" * 31,
        "(1).real",
    ],
)
def test_evaluate_rejects(text):
    with pytest.raises(ExpressionError):
        evaluate(text)


# ------------------------------------------------------------------ rendering and solutions


def test_render_minimal_parentheses():
    assert render(("*", ("+", 4, 7), 3)) == "(4 + 7) * 3"
    assert render(("+", 3, ("*", 4, 5))) == "3 + 4 * 5"
    assert render(("-", 5, ("-", 2, 7))) == "5 - (2 - 7)"
    assert render(("-", ("-", 5, 2), 7)) == "5 - 2 - 7"
    assert render(("/", 8, ("*", 2, 2))) == "8 / (2 * 2)"
    assert render(("-", 4, -5)) == "4 - (-5)"


def test_solution_format_by_hand():
    task = make_task(("+", 37, 58), 95, PRESETS["2d+-2d"], split="train")
    assert task.prompt == "What is 37 + 58?"
    assert task.reference == "95"
    assert task.solution == "37 + 58 = 95\n#### 95"
    assert solution_steps(("+", 3, ("*", 4, 5))) == ["4 * 5 = 20", "3 + 20 = 23"]
    assert solution_steps(("-", 5, ("-", 2, 7))) == ["2 - 7 = -5", "5 - (-5) = 10"]
    assert solution_steps(("*", 37, 58)) == [
        "37 * 58 = 37 * 50 + 37 * 8",
        "37 * 50 = 1850",
        "37 * 8 = 296",
        "1850 + 296 = 2146",
    ]
    assert solution_steps(("*", 37, 58), long_multiplication=False) == ["37 * 58 = 2146"]
    assert solution_steps(("*", 37, 50)) == ["37 * 50 = 1850"]  # one nonzero digit: no split
    assert solution_steps(("*", 37, 8)) == ["37 * 8 = 296"]


def test_check_solution_catches_bad_solutions():
    assert check_solution("37 + 58 = 95\n#### 95", 95).ok
    cases = {
        "37 + 58 = 96\n#### 96": "false equation",
        "37 + 58 = 95\n#### 96": "expected",
        "37 + 58 = 95": "no final answer",
        "37 + 58 = 95\n#### 95\n#### 94": "several final answers",
        "37 + 58 = 95\n2 + 2 = 4\n#### 95": "last step",
        "37 / 5 = 7\n#### 95": "cannot evaluate",
    }
    for text, reason in cases.items():
        check = check_solution(text, 95)
        assert not check.ok and any(reason in e for e in check.errors), (text, check.errors)


def test_custom_output_format():
    tasks = generate(
        "3ops",
        20,
        seed=1,
        solution_template="<think>\n{steps}\n</think>\n<answer>{answer}</answer>",
        answer_pattern=r"^<answer>(-?\d+)</answer>$",
        prompt_template="Compute {expression}.",
    )
    for task in tasks:
        assert task.solution.endswith(f"<answer>{task.reference}</answer>")
        assert task.prompt.startswith("Compute ")
    # a template whose answer line the pattern cannot find is refused, never emitted unverified
    with pytest.raises(ValueError, match="does not verify"):
        generate("1d+1d", 1, solution_template="{steps}\nThe answer is {answer}")


# ------------------------------------------------------------------ generation


def test_every_preset_solution_verifies_and_matches_reference():
    for name, level in PRESETS.items():
        for task in generate(name, 40, seed=7, split="train"):
            assert isinstance(task, Task)
            expression = task.metadata["expression"]
            assert task.reference == str(evaluate(expression))
            assert task.prompt == f"What is {expression}?"
            assert check_solution(task.solution, int(task.reference)).ok
            assert task.task_type == "math" and task.source == "arithmetic"
            assert task.difficulty == name and task.category == name
            if not level.allow_negative:
                assert int(task.reference) >= 0
            if level.parentheses:
                assert "(" in expression


def test_levels_respect_digits_and_operators():
    for task in generate("2dx1d", 100, seed=0):
        a, b = map(int, task.metadata["expression"].split(" * "))
        assert 10 <= a <= 99 and 1 <= b <= 9
    for task in generate("div", 50, seed=0):
        a, b = map(int, task.metadata["expression"].split(" / "))
        assert 10 <= a <= 99 and 2 <= b <= 9 and a % b == 0
    ops = Counter(
        op for t in generate("1dop1d", 150, seed=0) for op in "+-*" if f" {op} " in t.prompt
    )
    assert set(ops) == {"+", "-", "*"}
    for task in generate("3ops", 50, seed=0):
        assert len(re.findall(r"\d+", task.metadata["expression"])) == 3


def test_sum_and_difference_levels_split_2d_plus_minus():
    """``2d+2d`` / ``2d-2d`` (the default preset's GRPO training mixture) draw the sums and the
    differences of ``2d+-2d``'s problem space, and their training problems never appear among
    ``2d+-2d``'s validation problems (the split is the problem's, not the level's)."""
    sums = generate("2d+2d", 200, seed=0, split="train")
    diffs = generate("2d-2d", 200, seed=0, split="train")
    for task in sums:
        a, b = map(int, task.metadata["expression"].split(" + "))
        assert 10 <= a <= 99 and 10 <= b <= 99 and int(task.reference) == a + b
    for task in diffs:
        a, b = map(int, task.metadata["expression"].split(" - "))
        assert 10 <= a <= 99 and 10 <= b <= 99 and int(task.reference) == a - b >= 0
    train = generate("2d+2d:1,2d-2d:2", 2000, seed=0, split="train")
    kinds = Counter(t.category for t in train)
    assert set(kinds) == {"2d+2d", "2d-2d"} and 0.6 < kinds["2d-2d"] / 2000 < 0.73
    val = generate("2d+-2d", 200, seed=0, split="validation")
    assert not {t.prompt for t in train} & {t.prompt for t in val}


def test_deterministic_by_seed():
    a = [t.to_dict() for t in generate(MIX, 300, seed=11)]
    b = [t.to_dict() for t in generate(MIX, 300, seed=11)]
    c = [t.to_dict() for t in generate(MIX, 300, seed=12)]
    assert a == b
    assert a != c
    assert len({t["id"] for t in a}) == 300  # unique within a set


def test_train_and_validation_never_overlap():
    big = "2d+-2d:1,2dx2d:1,3ops:1,3ops-paren:1"  # levels with room for thousands of problems
    train = generate(big, 3000, seed=0, split="train")
    # a different seed for validation must not matter: the split is a property of the problem
    val = generate(big, 500, seed=123, split="validation")
    train_keys = {split_key(_tree(t)) for t in train}
    val_keys = {split_key(_tree(t)) for t in val}
    assert not train_keys & val_keys
    assert not {t.prompt for t in train} & {t.prompt for t in val}
    assert all(t.metadata["split"] == "validation" for t in val)
    tr, va = train_val_split("2d+-2d", 500, 100, seed=5)
    assert not {t.prompt for t in tr} & {t.prompt for t in va}


def test_reordered_sums_share_a_split():
    assert split_key(("+", 37, 58)) == split_key(("+", 58, 37))
    assert split_key(("*", ("*", 2, 3), 4)) == split_key(("*", 4, ("*", 3, 2)))
    assert split_key(("-", 37, 58)) != split_key(("-", 58, 37))
    for a in range(10, 60):
        for b in range(10, 30):
            assert split_of(("+", a, b)) == split_of(("+", b, a))
    # the validation share is close to the requested fraction
    share = sum(
        split_of(("*", a, b), 0.2) == "validation" for a in range(100) for b in range(a, 100)
    )
    assert 0.17 < share / 5050 < 0.23


def test_mixture_spec():
    mix = parse_mixture("2d+-2d:3,2dx1d:1")
    assert [(lv.name, w) for lv, w in mix] == [("2d+-2d", 0.75), ("2dx1d", 0.25)]
    assert parse_mixture({"1d+1d": 1})[0][0] is PRESETS["1d+1d"]
    assert parse_mixture("3ops")[0][1] == 1.0
    counts = Counter(t.difficulty for t in generate("2d+-2d:0.6,3ops:0.4", 1000, seed=2))
    assert 540 <= counts["2d+-2d"] <= 660
    with pytest.raises(KeyError, match="presets"):
        parse_mixture("4d+4d")
    with pytest.raises(ValueError, match="weight"):
        parse_mixture("2d+-2d:x")
    with pytest.raises(ValueError):
        parse_mixture("2d+-2d:0")


def test_custom_level_and_errors():
    level = Level("3d-3d-neg", (3, 3), "-", allow_negative=True)
    refs = [int(t.reference) for t in generate(level, 100, seed=0)]
    assert min(refs) < 0
    with pytest.raises(ValueError, match="operators"):
        Level("bad", (1, 1), "^")
    with pytest.raises(ValueError, match="parentheses"):
        Level("bad", (1, 1), "+", parentheses=True)
    with pytest.raises(ValueError, match="split"):
        generate("1d+1d", 1, split="test")
    with pytest.raises(ValueError, match="ran out of distinct"):
        generate("1d+1d", 100, seed=0, split="validation")
    assert len(generate("1d+1d", 100, seed=0, split="validation", unique=False)) == 100


def test_ten_thousand_problems_take_a_bounded_number_of_draws(monkeypatch):
    # What keeps generation linear: each kept problem costs O(1) draws (split rejection keeps
    # ~80%, repeats are found in a set), never a scan of the problems kept so far.
    import rlvr.tasks.arithmetic.generator as arithmetic

    draws = 0
    sample = arithmetic.sample_expression

    def counting(*args, **kwargs):
        nonlocal draws
        draws += 1
        return sample(*args, **kwargs)

    monkeypatch.setattr(arithmetic, "sample_expression", counting)
    tasks = generate("3ops:1,2d+-2d:1", 10_000, seed=0)
    assert len(tasks) == 10_000
    assert len({t.metadata["expression"] for t in tasks}) == 10_000  # unique
    assert {t.metadata["split"] for t in tasks} == {"train"}
    assert [t.metadata["index"] for t in tasks] == list(range(10_000))
    assert 10_000 <= draws < 2 * 10_000, draws  # 14,847 with this seed


def test_solutions_pass_the_math_verifier():
    verifier = pytest.importorskip("rlvr.rewards.registry").VERIFIERS.get("math")
    for task in generate(MIX, 30, seed=4):
        assert str(verifier(task.solution, task.reference).status) == "correct", task.solution


def _tree(task):
    """Re-parse a task's expression into the generator's tree form (test helper)."""
    import ast

    ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}

    def conv(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp):
            return -conv(node.operand)
        return (ops[type(node.op)], conv(node.left), conv(node.right))

    return conv(ast.parse(task.metadata["expression"], mode="eval").body)

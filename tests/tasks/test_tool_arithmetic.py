"""The tool_arithmetic generator: reproducible by seed, references recomputed independently
(Python integers from the question's own numbers), leak-free splits, its mixture spec and its
registration as a task source."""

import re
from collections import Counter

import pytest

from rlvr.tasks.registry import task_source
from rlvr.tasks.tool_arithmetic import KINDS, WORD_TEMPLATES, generate, parse_mixture

MIX = "3dx3d:1,4dx2d:1,mixed3:1,words1:1,words2:1"


def _numbers(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def _independent_value(task) -> int:
    """The answer from the question alone: direct kinds by reading ``What is a op b op c?``
    left to right with * first; word problems by their template's formula."""
    kind = task.metadata["kind"]
    if not kind.startswith("words"):
        body = task.prompt.removeprefix("What is ").removesuffix("?")
        terms = re.split(r" ([+-]) ", body)  # products are single terms: a * b
        total, sign = 0, 1
        for item in terms:
            if item in "+-":
                sign = 1 if item == "+" else -1
                continue
            factors = [int(x) for x in item.split(" * ")]
            product = 1
            for f in factors:
                product *= f
            total += sign * product
        return total
    for template, shape, digits in WORD_TEMPLATES[kind]:
        pattern = re.escape(template).replace(r"\{a\}", r"(?P<a>\d+)").replace(
            r"\{b\}", r"(?P<b>\d+)").replace(r"\{c\}", r"(?P<c>\d+)")
        m = re.fullmatch(pattern, task.prompt)
        if m:
            a, b = int(m["a"]), int(m["b"])
            c = int(m["c"]) if "c" in shape else 0
            assert [len(str(x)) for x in (a, b, c)][: len(digits)] == list(digits)
            return {"a * b": a * b, "a * b + c": a * b + c, "c + a * b": c + a * b,
                    "a * b - c": a * b - c, "c - a * b": c - a * b}[shape]
    raise AssertionError(f"no template matches {task.prompt!r}")


def test_same_seed_same_tasks_other_seed_other_tasks():
    a = generate(MIX, 40, seed=3, split="train")
    b = generate(MIX, 40, seed=3, split="train")
    c = generate(MIX, 40, seed=4, split="train")
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.prompt for t in a] != [t.prompt for t in c]


def test_references_are_the_questions_values_and_the_expressions_use_its_numbers():
    tasks = generate(MIX, 200, seed=0, split="validation")
    assert set(Counter(t.metadata["kind"] for t in tasks)) == set(KINDS)
    for task in tasks:
        value = _independent_value(task)
        assert task.reference == str(value) and value >= 0
        expression = task.metadata["expression"]
        # the calculator call a demonstration makes uses exactly the question's numbers
        assert sorted(_numbers(expression)) == sorted(_numbers(task.prompt))
        assert task.solution.splitlines()[-1] == f"#### {value}"
        assert task.task_type == "math" and task.source == "tool_arithmetic"
        assert task.category == task.difficulty == task.metadata["kind"]
    products = [t for t in tasks if t.metadata["kind"] == "3dx3d"]
    assert all(len(s) == 3 for t in products for s in t.metadata["expression"].split(" * "))


def test_train_and_validation_share_no_problem_and_ids_are_unique():
    train = generate(MIX, 400, seed=0, split="train")
    val = generate(MIX, 200, seed=9, split="validation")
    assert not {t.metadata["expression"] for t in train} & {t.metadata["expression"]
                                                           for t in val}
    assert len({t.id for t in train}) == len(train)


def test_mixture_weights_and_unknown_kinds():
    assert parse_mixture("3dx3d:3,words2") == [("3dx3d", 0.75), ("words2", 0.25)]
    only = generate("words2", 30, seed=1)
    assert {t.metadata["kind"] for t in only} == {"words2"}
    # every words2 problem is two-step: a product and a sum or difference
    assert all(len(_numbers(t.prompt)) == 3 for t in only)
    with pytest.raises(KeyError, match="unknown tool_arithmetic kind '5dx5d'; kinds: 3dx3d"):
        parse_mixture("5dx5d")


def test_registered_source_generates_with_its_default_mixture():
    source = task_source("tool_arithmetic")
    assert source.generated and source.sft_mixture
    assert source.verifier_defaults == {"math": {"accept_unevaluated": False}}
    tasks = source.generate(source.default_mixture, 8, seed=0, split="train")
    assert [t.prompt for t in tasks] == [t.prompt for t in generate(MIX, 8, seed=0)]
    with pytest.raises(KeyError):
        source.check_mixture("nope")


def test_train_mixture_changes_training_problems_only():
    from rlvr.tasks.config import DataConfig
    from rlvr.tasks.sources import load_tasks

    base = {"source": "tool_arithmetic", "mixture": "3dx3d:1,words2:1", "train_size": 400,
            "val_size": 100}
    same_train, same_val = load_tasks(DataConfig.model_validate(base), seed=0)
    train, val = load_tasks(DataConfig.model_validate({**base, "train_mixture": "words2"}),
                            seed=0)
    assert [t.prompt for t in val] == [t.prompt for t in same_val]  # the yardstick is kept
    assert {t.metadata["kind"] for t in train} == {"words2"}
    assert Counter(t.metadata["kind"] for t in same_train)["3dx3d"] > 100
    assert not {t.prompt for t in train} & {t.prompt for t in val}  # still disjoint
    with pytest.raises(ValueError, match="(?s)train_mixture.*unknown tool_arithmetic kind"):
        DataConfig.model_validate({**base, "train_mixture": "5dx5d"})
    with pytest.raises(ValueError, match="(?s)train_mixture.*only for a generated source"):
        DataConfig.model_validate({"source": "gsm8k", "path": "x", "train_mixture": "a"})

"""Task record: validation and JSON round-trip (R23)."""

import dataclasses
import json

import pytest

from rlvr.records import RecordError, Task

FULL = {
    "id": "arith-1",
    "prompt": "What is 37 + 58?",
    "reference": "95",
    "task_type": "math",
    "source": "arithmetic",
    "difficulty": "2d+-2d",
    "category": "2d+-2d",
    "solution": "37 + 58 = 95\n#### 95",
    "metadata": {"seed": 0, "expression": "37 + 58"},
    "pass_rate": 0.625,
}


def test_round_trip_dict_and_json():
    task = Task.from_dict(FULL)
    assert task.to_dict() == FULL
    assert Task.from_json(task.to_json()) == task
    assert json.loads(task.to_json())["reference"] == "95"


def test_optional_fields_default():
    minimal = {k: FULL[k] for k in ("id", "prompt", "reference", "task_type", "source")}
    task = Task.from_dict(minimal)
    assert task.difficulty is None and task.solution is None and task.metadata == {}
    assert task.to_dict()["category"] is None
    assert Task.from_dict({**minimal, "metadata": None}).metadata == {}


@pytest.mark.parametrize("rate", [-0.1, 1.5, "high", True])
def test_pass_rate_must_be_a_share(rate):
    with pytest.raises(RecordError, match="pass_rate"):
        Task.from_dict({**FULL, "pass_rate": rate})


def test_structured_references():
    tests = ["assert f(1) == 2"]
    assert Task.from_dict({**FULL, "reference": tests}).reference == tests
    assert Task.from_dict({**FULL, "reference": 42}).reference == 42


@pytest.mark.parametrize("field", ["id", "prompt", "reference", "task_type", "source"])
def test_missing_field_is_named(field):
    data = {k: v for k, v in FULL.items() if k != field}
    with pytest.raises(RecordError, match=field):
        Task.from_dict(data)


@pytest.mark.parametrize(
    "field,value",
    [
        ("id", 7),
        ("prompt", None),
        ("reference", True),
        ("reference", None),
        ("difficulty", 3),
        ("metadata", []),
    ],
)
def test_mistyped_field_is_named(field, value):
    with pytest.raises(RecordError, match=f"Task.{field}"):
        Task.from_dict({**FULL, field: value})


def test_empty_and_unknown_fields():
    with pytest.raises(RecordError, match="Task.prompt must not be empty"):
        Task.from_dict({**FULL, "prompt": "  "})
    with pytest.raises(RecordError, match="unknown field.*answer"):
        Task.from_dict({**FULL, "answer": "95"})
    with pytest.raises(RecordError, match="not valid JSON"):
        Task.from_json("{")
    with pytest.raises(RecordError, match="JSON object"):
        Task.from_dict(["x"])


def test_is_frozen():
    task = Task.from_dict(FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.prompt = "x"

"""HumanEval / MBPP task loaders: counts per split, record fields, reference solutions that
verify through the ``code`` verifier, clear errors on bad input, and ``load_tasks`` wiring."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import ScoreRequest
from rlvr.rewards.types import Status
from rlvr.tasks.code import (
    load_humaneval,
    load_mbpp,
    mbpp_entry_point,
    mbpp_split,
)
from rlvr.tasks.sources import DataError, load_tasks

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
HUMANEVAL = DATA / "humaneval" / "HumanEval.jsonl"
MBPP = DATA / "mbpp" / "mbpp.jsonl"
MBPP_SANITIZED = DATA / "mbpp" / "sanitized-mbpp.json"

needs_data = pytest.mark.skipif(not (HUMANEVAL.exists() and MBPP.exists()
                                     and MBPP_SANITIZED.exists()),
                                reason="shared data (../shared/data) absent")


@pytest.fixture(scope="module")
def humaneval():
    return load_humaneval(HUMANEVAL)


@pytest.fixture(scope="module")
def mbpp():
    return load_mbpp(MBPP)


@pytest.fixture(scope="module")
def sanitized():
    return load_mbpp(MBPP_SANITIZED)


# ------------------------------------------------------------------------------ counts, fields


@needs_data
def test_counts_per_split(humaneval, mbpp, sanitized):
    assert len(humaneval) == 164
    assert Counter(t.metadata["split"] for t in mbpp) == {
        "test": 500, "train": 374, "validation": 90, "prompt": 10}
    assert Counter(t.metadata["split"] for t in sanitized) == {
        "test": 257, "train": 120, "validation": 43, "prompt": 7}
    assert len(load_mbpp(MBPP, "train")) == 374
    assert len(load_mbpp(MBPP.parent, "validation")) == 90  # a directory means the full set
    assert len(load_mbpp(MBPP_SANITIZED, "train")) == 120
    assert {t.metadata["task_id"] for t in load_mbpp(MBPP, "prompt")} == set(range(1, 11))


def test_mbpp_split_boundaries():
    assert [mbpp_split(i) for i in (1, 10, 11, 510, 511, 600, 601, 974)] == [
        "prompt", "prompt", "test", "test", "validation", "validation", "train", "train"]
    with pytest.raises(ValueError, match="975"):
        mbpp_split(975)


@needs_data
def test_mbpp_record_fields(mbpp):
    task = next(t for t in mbpp if t.id == "mbpp/2")
    assert task.task_type == "code" and task.source == "mbpp" and task.category == "mbpp"
    assert task.reference == {
        "entry_point": "similar_elements",
        "tests": ["assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
                  "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)",
                  "assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)"],
        "setup_code": ""}
    assert task.prompt.startswith("Write a function to find the similar elements from the "
                                  "given two tuple lists.\n")
    assert "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)" in task.prompt
    assert "(1, 2, 3, 4),(5, 4, 3, 7)" not in task.prompt  # only one test is shown
    assert "```python code block" in task.prompt
    assert task.solution == ("```python\ndef similar_elements(test_tup1, test_tup2):\n"
                             "  res = tuple(set(test_tup1) & set(test_tup2))\n"
                             "  return (res)\n```")
    assert "\r" not in task.solution
    assert task.metadata == {"task_id": 2, "split": "prompt"}
    assert next(t for t in mbpp if t.id == "mbpp/11").metadata["challenge_tests"][0].startswith(
        "assert remove_Occ(")
    assert next(t for t in mbpp if t.id == "mbpp/367").reference["setup_code"].startswith(
        "root = Node(1)")


@needs_data
def test_sanitized_record_fields(sanitized):
    task = next(t for t in sanitized if t.id == "mbpp-sanitized/82")
    assert task.source == "mbpp-sanitized" and task.task_type == "code"
    assert task.reference["setup_code"] == "import math"
    assert task.reference["entry_point"] == "volume_sphere"
    assert task.prompt.startswith("Write a function to find the volume of a sphere.")


@needs_data
def test_humaneval_record_fields(humaneval):
    task = humaneval[2]
    raw = json.loads(HUMANEVAL.read_text().splitlines()[2])
    assert task.id == "HumanEval/2" and task.source == "humaneval" and task.task_type == "code"
    assert task.reference == {"entry_point": "truncate_number", "test": raw["test"],
                              "prompt": raw["prompt"]}
    assert f"```python\n{raw['prompt'].rstrip()}\n```" in task.prompt  # signature + docstring
    assert "```python code block" in task.prompt
    assert task.solution == f"```python\n{raw['prompt']}    return number % 1.0\n```"


def test_mbpp_entry_point_prefers_defined_functions():
    code = "class Pair:\n    pass\ndef max_chain(arr, n):\n    return n\n"
    assert mbpp_entry_point(code, ["assert max_chain([Pair(5, 24)], 1) == 1"]) == "max_chain"
    # Wrapped in a builtin call: the defined function is still found (MBPP 912).
    assert mbpp_entry_point("def lobb_num(n, m):\n  return 1\n",
                            ["assert int(lobb_num(5, 3)) == 35"]) == "lobb_num"
    assert mbpp_entry_point("x = 1\n", ["assert set(f(1)) == {1}"]) == "f"
    assert mbpp_entry_point("def g(): pass\n", ["assert True"]) == "g"
    assert mbpp_entry_point("", ["assert True"]) is None


# ------------------------------------------------------------ reference solutions verify


HUMANEVAL_SAMPLE = [0, 10, 32, 38, 53, 80, 101, 129, 151, 163]
MBPP_SAMPLE = [2, 11, 367, 512, 599, 601, 700, 800, 912, 927]  # 367/927 need setup_code
SANITIZED_SAMPLE = [2, 82, 124, 300, 312, 554, 600, 602, 760, 809]  # 82..312: test_imports


def _verify(tasks):
    with RewardPipeline(RewardConfig(workers=2)) as pipeline:
        return pipeline.score_batch([ScoreRequest(t.solution, t.reference, t.task_type)
                                     for t in tasks])


@needs_data
def test_reference_solutions_verify_correct(humaneval, mbpp, sanitized):
    by_id = {t.metadata["task_id"]: t for t in mbpp}
    by_id_s = {t.metadata["task_id"]: t for t in sanitized}
    tasks = ([humaneval[i] for i in HUMANEVAL_SAMPLE] + [by_id[i] for i in MBPP_SAMPLE]
             + [by_id_s[i] for i in SANITIZED_SAMPLE])
    assert len(tasks) == 30
    results = _verify(tasks)
    bad = {t.id: r.detail for t, r in zip(tasks, results) if r.status is not Status.correct}
    assert not bad, bad
    assert all(r.reward == pytest.approx(1.1) for r in results)  # outcome 1 + format 0.1 * 1


@needs_data
def test_humaneval_stub_bodies_score_zero(humaneval):
    tasks = [humaneval[i] for i in HUMANEVAL_SAMPLE[:5]]
    with RewardPipeline(RewardConfig(workers=2)) as pipeline:
        results = pipeline.score_batch([ScoreRequest("```python\n    return None\n```",
                                                     t.reference, "code") for t in tasks])
    assert [r.status for r in results] == [Status.wrong] * 5
    assert all(r.components["outcome"] == 0.0 for r in results)


# ------------------------------------------------------------------------------- bad input


def _write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


GOOD_MBPP = {"task_id": 601, "text": "Add.", "code": "def add(a, b):\n    return a + b",
             "test_list": ["assert add(1, 2) == 3"], "test_setup_code": "",
             "challenge_test_list": []}
GOOD_HE = {"task_id": "HumanEval/0", "prompt": "def f(x):\n",
           "canonical_solution": "    return x\n",
           "test": "def check(candidate):\n    assert candidate(1) == 1\n", "entry_point": "f"}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{oops", "bad.jsonl:2: invalid JSON"),
        ({**GOOD_MBPP, "task_id": "7"}, "bad.jsonl:2: field 'task_id': expected an integer"),
        ({**GOOD_MBPP, "task_id": 0}, "bad.jsonl:2: field 'task_id': 0 is outside MBPP's 1-974"),
        ({k: v for k, v in GOOD_MBPP.items() if k != "code"},
         "bad.jsonl:2: field 'code': expected a string (missing)"),
        ({**GOOD_MBPP, "test_list": "assert add(1, 2) == 3"},
         "bad.jsonl:2: field 'test_list': expected a list of strings (got str)"),
        ({**GOOD_MBPP, "test_list": ["assert add(1, 2) == 3", 5]},
         "bad.jsonl:2: field 'test_list[1]': expected a non-empty string, got 5"),
        ({**GOOD_MBPP, "test_list": []}, "bad.jsonl:2: field 'test_list': expected at least one"),
        ({**GOOD_MBPP, "test_setup_code": 3}, "bad.jsonl:2: field 'test_setup_code': expected a "
                                              "string (got int)"),
        (GOOD_MBPP, "bad.jsonl:2: field 'task_id': 601 repeats line 1"),
        ({**GOOD_MBPP, "task_id": 602, "code": "x = 1", "test_list": ["assert True"]},
         "bad.jsonl:2: field 'test_list': no function call to test"),
    ],
)
def test_bad_mbpp_record_names_file_line_and_field(tmp_path, bad, message):
    path = _write(tmp_path / "bad.jsonl", [GOOD_MBPP, bad])
    with pytest.raises(DataError) as err:
        load_mbpp(path)
    assert message in str(err.value)


def test_bad_sanitized_file_names_record_and_field(tmp_path):
    good = {"task_id": 601, "prompt": "Add.", "code": "def add(a, b):\n    return a + b",
            "test_imports": [], "test_list": ["assert add(1, 2) == 3"]}
    path = tmp_path / "san.json"
    path.write_text(json.dumps([good, {**good, "task_id": 602, "prompt": ""}]))
    with pytest.raises(DataError, match=r"san.json: record \[1\]: field 'prompt': expected a "
                                        "non-empty string"):
        load_mbpp(path)
    path.write_text(json.dumps({"task_id": 1}))
    with pytest.raises(DataError, match="expected a JSON array"):
        load_mbpp(path)
    with pytest.raises(DataError, match="no such file"):
        load_mbpp(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="split 'dev' is unknown"):
        load_mbpp(path, "dev")


@pytest.mark.parametrize(
    "bad, message",
    [
        ({**GOOD_HE, "entry_point": "not a name"}, "he.jsonl:2: field 'entry_point': 'not a name'"),
        ({**GOOD_HE, "test": "assert f(1) == 1"}, "he.jsonl:2: field 'test': no 'def check"),
        ({**GOOD_HE, "prompt": None}, "he.jsonl:2: field 'prompt': expected a string"),
        ({**GOOD_HE}, "he.jsonl:2: field 'task_id': 'HumanEval/0' repeats line 1"),
    ],
)
def test_bad_humaneval_record_names_file_line_and_field(tmp_path, bad, message):
    path = _write(tmp_path / "he.jsonl", [GOOD_HE, bad])
    with pytest.raises(DataError) as err:
        load_humaneval(path)
    assert message in str(err.value)


# ------------------------------------------------------------------------------- load_tasks


def _data(**kw):
    from rlvr.train.config import DataConfig

    return DataConfig(**kw)


@needs_data
def test_load_tasks_mbpp_uses_the_readme_splits():
    train, val = load_tasks(_data(source="mbpp", path=str(MBPP.parent), train_size=1000,
                                  val_size=1000), seed=0)
    assert len(train) == 374 and len(val) == 90
    assert all(601 <= t.metadata["task_id"] <= 974 for t in train)
    assert all(511 <= t.metadata["task_id"] <= 600 for t in val)
    small, small_val = load_tasks(_data(source="mbpp", path=str(MBPP_SANITIZED), train_size=8,
                                        val_size=4), seed=3)
    again, again_val = load_tasks(_data(source="mbpp", path=str(MBPP_SANITIZED), train_size=8,
                                        val_size=4), seed=3)
    assert [t.id for t in small] == [t.id for t in again] and len(small_val) == 4
    assert all(t.source == "mbpp-sanitized" for t in small + small_val)


@needs_data
def test_load_tasks_humaneval_is_a_disjoint_seeded_hold_out():
    train, val = load_tasks(_data(source="humaneval", path=str(HUMANEVAL), train_size=500,
                                  val_size=40), seed=0)
    assert len(train) == 124 and len(val) == 40
    assert not {t.id for t in train} & {t.id for t in val}
    _, val2 = load_tasks(_data(source="humaneval", path=str(HUMANEVAL), val_size=40), seed=0)
    assert [t.id for t in val2] == [t.id for t in val]
    with pytest.raises(DataError, match="164 tasks, need more than data.val_size=200"):
        load_tasks(_data(source="humaneval", path=str(HUMANEVAL), val_size=200), seed=0)


def test_load_tasks_mbpp_without_a_train_split_is_a_clear_error(tmp_path):
    path = _write(tmp_path / "m.jsonl", [{**GOOD_MBPP, "task_id": 20}])
    with pytest.raises(DataError, match="no MBPP tasks in the train split"):
        load_tasks(_data(source="mbpp", path=str(path)), seed=0)

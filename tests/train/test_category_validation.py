"""Greedy validation split by task category (a reasoning-gym task's dataset): the shares in
the validation row and the per-category table of `rlvr train`."""

from types import SimpleNamespace

import pytest
from rich.console import Console

from rlvr.records import Task
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.train.run import category_table
from rlvr.train.validate import category_pass_at_1, validate


def _task(i, category, answer="7"):
    return Task(id=f"t{i}", prompt=f"q{i}", reference=answer, task_type="math",
                source="test", category=category)


def test_shares_per_category_sorted_by_name():
    tasks = [_task(0, "leg_counting"), _task(1, "chain_sum"), _task(2, "leg_counting"),
             _task(3, "chain_sum"), _task(4, "chain_sum"), _task(5, None)]
    got = category_pass_at_1(tasks, [True, False, False, True, True, True])
    assert list(got) == ["(none)", "chain_sum", "leg_counting"]
    assert got["chain_sum"] == {"n": 3, "pass_at_1": pytest.approx(2 / 3)}
    assert got["leg_counting"] == {"n": 2, "pass_at_1": 0.5}
    assert got["(none)"] == {"n": 1, "pass_at_1": 1.0}


def test_one_category_gives_no_split_and_lengths_must_match():
    assert category_pass_at_1([_task(0, "a"), _task(1, "a")], [True, False]) == {}
    assert category_pass_at_1([_task(0, None)], [True]) == {}
    with pytest.raises(ValueError, match="2 tasks but 1 verdicts"):
        category_pass_at_1([_task(0, "a"), _task(1, "b")], [True])


class _Scripted:
    """A rollout engine answering row i of each call with ``texts`` (by prompt id) and a
    tokenizer decoding that id back: validation's own scoring runs on known completions."""

    def __init__(self, texts):
        self.texts = texts

    def generate(self, prompts, params):
        ids = [p[0] for p in prompts]
        return SimpleNamespace(num_rows=len(ids), completion=lambda row: [ids[row]],
                               lengths=[3] * len(ids), finish_reason=["stop"] * len(ids))

    def decode(self, ids, skip_special_tokens=True):
        return self.texts[ids[0]]


def test_validation_row_carries_the_split():
    tasks = [_task(0, "b"), _task(1, "a"), _task(2, "b"), _task(3, "a", answer="5")]
    texts = ["#### 7", "#### 7", "#### 3", "#### 7"]  # b: 1 of 2, a: 1 of 2 (task 3 wants 5)
    scripted = _Scripted(texts)
    result, samples = validate(scripted, scripted, tasks, [[i] for i in range(4)],
                               RewardPipeline(RewardConfig(workers=0)), max_new_tokens=8,
                               stop_token_ids=(), batch_size=3)
    assert [s["status"] for s in samples] == ["correct", "correct", "wrong", "wrong"]
    assert result.pass_at_1 == 0.5
    assert result.by_category == {"a": {"n": 2, "pass_at_1": 0.5},
                                  "b": {"n": 2, "pass_at_1": 0.5}}


def _row(by_category):
    return {"pass_at_1": 0.0, "by_category": by_category}


def test_table_rows_per_category_with_gain_from_the_grpo_entry():
    split = lambda a, b: {"chain_sum": {"n": 4, "pass_at_1": a},  # noqa: E731
                          "leg_counting": {"n": 6, "pass_at_1": b}}
    results = {"base_model": _row(split(0.0, 0.0)), "baseline": _row(split(0.25, 0.5)),
               "trained": _row(split(0.75, 0.5))}
    console = Console(width=140, record=True)
    console.print(category_table(results))
    text = console.export_text()
    assert "base (no SFT)" in text and "baseline" in text
    chain = next(line for line in text.splitlines() if "chain_sum" in line)
    assert [c.strip() for c in chain.split("│")[1:-1]] == ["chain_sum", "4", "0.0%", "25.0%",
                                                           "75.0%", "+50.0"]
    legs = next(line for line in text.splitlines() if "leg_counting" in line)
    assert [c.strip() for c in legs.split("│")[1:-1]] == ["leg_counting", "6", "0.0%",
                                                          "50.0%", "50.0%", "+0.0"]


def test_no_table_without_categories_and_no_base_column_without_base():
    assert category_table({"trained": {"pass_at_1": 0.5, "by_category": {}}}) is None
    assert category_table({"trained": {"pass_at_1": 0.5}}) is None  # a row from before
    results = {"baseline": _row({"a": {"n": 1, "pass_at_1": 0.0}}),
               "trained": _row({"a": {"n": 1, "pass_at_1": 1.0}})}
    console = Console(width=140, record=True)
    console.print(category_table(results))
    text = console.export_text()
    assert "base (no SFT)" not in text
    row = next(line for line in text.splitlines() if line.startswith("│ a"))
    assert [c.strip() for c in row.split("│")[1:-1]] == ["a", "1", "0.0%", "100.0%", "+100.0"]

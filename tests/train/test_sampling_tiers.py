"""Which `difficulty` values become sampling tiers (`data.tiers`): by default
only tiers measured by `rlvr data stratify` (tasks with a `pass_rate`); a dataset's own easy /
medium / hard labels are ignored, and the run says so; `data.tiers: labels` uses them, `off`
none. Whenever tiers are used the run logs where they came from, the task counts and the draw
shares (src/rlvr/train/sampler.py run_sampler)."""

import pytest

pytest.importorskip("torch")

import rlvr.train.run as run_module
from rlvr.records import Task
from rlvr.train.config import RunConfig
from rlvr.train.run import Run
from rlvr.train.state import TrainingState
from rlvr.train.taskdata import RunData


def _run(monkeypatch, tasks, **data):
    """A Run holding only what ``sampler()`` reads; returns it and its log lines."""
    lines = []
    monkeypatch.setattr(run_module.console, "print", lambda text, *a, **k: lines.append(text))
    run = Run.__new__(Run)
    run.config = RunConfig(data=dict(source="jsonl", path="tasks.jsonl", **data))
    run.state = TrainingState(data=RunData(train_tasks=tasks, pool_of=[None] * len(tasks)))
    return run, lines


def _tasks(measured: bool) -> list[Task]:
    """10 easy, 20 medium, 10 hard (a dataset's labels, or measured with pass rates)."""
    labels = ["easy"] * 10 + ["medium"] * 20 + ["hard"] * 10
    rates = {"easy": 0.9, "medium": 0.5, "hard": 0.1}
    return [Task(f"t{i}", f"What is {i} + 1?", str(i + 1), "math", "own", difficulty=d,
                 pass_rate=rates[d] if measured else None) for i, d in enumerate(labels)]


def test_dataset_labels_are_not_sampling_tiers_by_default_and_the_run_says_so(monkeypatch):
    run, lines = _run(monkeypatch, _tasks(measured=False))
    sampler = run.sampler()
    assert sampler.names == ["all"]  # one pool: every task drawn alike
    assert lines == ["data.tiers: 40 training tasks carry a difficulty label (easy / medium / "
                     "hard) without a measured pass_rate: not used as sampling tiers (measure "
                     "them with `rlvr data stratify`, or set data.tiers: labels to draw by the "
                     "dataset's labels)"]


def test_labels_are_used_when_asked_and_the_shares_are_logged(monkeypatch):
    run, lines = _run(monkeypatch, _tasks(measured=False), tiers="labels")
    sampler = run.sampler()
    assert sampler.names == ["easy", "hard", "medium"]
    assert sampler.weights == pytest.approx([0.1, 0.1, 0.8])
    assert lines == ["data tiers (the dataset's difficulty labels, data.tiers: labels): easy 10 "
                     "tasks drawn 10%, medium 20 tasks drawn 80%, hard 10 tasks drawn 10% "
                     "(data.tier_weights)"]


def test_measured_tiers_are_used_and_logged_and_off_turns_them_off(monkeypatch):
    tasks = _tasks(measured=True)
    tasks[0] = Task("u", "What is 0 + 0?", "0", "math", "own")  # no tier: counts as medium
    run, lines = _run(monkeypatch, tasks, tier_weights={"easy": 0.2, "medium": 0.6, "hard": 0.2})
    sampler = run.sampler()
    assert sampler.names == ["easy", "hard", "medium"]
    assert sampler.weights == pytest.approx([0.2, 0.2, 0.6])
    assert lines == ["data tiers (measured by `rlvr data stratify`): easy 9 tasks drawn 20%, "
                     "medium 21 tasks drawn 60%, hard 10 tasks drawn 20% (data.tier_weights; 1 "
                     "tasks without a tier count as medium)"]
    run, lines = _run(monkeypatch, tasks, tiers="off")
    assert run.sampler().names == ["all"] and lines == []

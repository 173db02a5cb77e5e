"""Task sources come from a registry (rlvr.tasks.registry): a source registered in
a test is accepted by the config without a data path, loads its tasks and trains; unknown
names get the same error as before (a Literal's), now listing the registered sources."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.tasks.registry import (
    TaskSource,
    generated_names,
    needs_data_path,
    register_source,
    source_names,
    task_source,
    unregister_source,
)
from rlvr.tasks.sources import load_tasks
from rlvr.train.config import DEFAULT_INSTRUCTION, DataConfig, RunConfig

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
BUILTIN = ["arithmetic", "logic", "gsm8k", "math500", "jsonl", "humaneval", "mbpp",
           "reasoning_gym", "verifiers", "verifiers_episodes", "tool_arithmetic"]


class Doubles(TaskSource):
    """'What is 2 x N?' for N of one level (``small``: 1-9, ``big``: 10-99)."""

    name = "doubles"
    generated = True
    default_mixture = "small"

    def generate(self, mixture, n, *, seed, split, unique=True):
        low, high = {"small": (1, 9), "big": (10, 99)}[mixture]
        numbers = [k for k in range(low, high + 1) if (k % 2 == 0) == (split == "train")]
        out = []
        for i in range(n):
            k = numbers[(seed + i) % len(numbers)]
            out.append(Task(f"doubles-{split}-{i}", f"What is 2 x {k}?", str(2 * k), "math",
                            "doubles", category="doubles", solution=f"2 x {k} = {2 * k}\n"
                            f"#### {2 * k}"))
        return out

    def check_mixture(self, mixture):
        if mixture not in ("small", "big"):
            raise ValueError(f"unknown doubles level {mixture!r}; known: small, big")


@pytest.fixture
def doubles():
    register_source(Doubles)
    yield task_source("doubles")
    unregister_source("doubles")


def test_the_builtin_sources_are_registered_in_their_order():
    assert source_names()[:len(BUILTIN)] == BUILTIN
    assert generated_names()[:2] == ["arithmetic", "logic"]
    assert not needs_data_path("logic") and needs_data_path("gsm8k")
    with pytest.raises(KeyError, match="did you mean 'gsm8k'"):
        task_source("gsm9k")


def test_an_unknown_source_is_refused_with_the_registered_names(doubles):
    with pytest.raises(ValidationError) as err:
        DataConfig(source="nope")
    first = err.value.errors()[0]
    assert first["type"] == "literal_error"
    assert first["msg"] == ("Input should be 'arithmetic', 'logic', 'gsm8k', 'math500', "
                            "'jsonl', 'humaneval', 'mbpp', 'reasoning_gym', 'verifiers', "
                            "'verifiers_episodes', 'tool_arithmetic' or 'doubles'")


def test_a_registered_generated_source_needs_no_path_and_loads(doubles):
    data = DataConfig(source="doubles", train_size=6, val_size=3)
    assert data.mixture == "small" and data.instruction == DEFAULT_INSTRUCTION
    RunConfig(data=data.model_dump())  # no data.path needed: generated in-process
    train, val = load_tasks(data, seed=0)
    assert len(train) == 6 and len(val) == 3
    assert {t.source for t in train + val} == {"doubles"}
    assert not {t.prompt for t in train} & {t.prompt for t in val}
    with pytest.raises(ValidationError, match=r"unknown doubles level 'huge'.*data.source: "
                                              r"doubles"):
        DataConfig(source="doubles", mixture="huge")
    # a source in a mixture, with its own levels
    mix = RunConfig(data={"sources": [{"source": "arithmetic"}, {"source": "doubles",
                                                                  "mixture": "big"}]})
    assert mix.data.source_config(mix.data.sources[1]).mixture == "big"


@pytest.mark.timeout(300)
def test_a_run_trains_on_a_registered_source(doubles, tmp_path):
    pytest.importorskip("transformers")
    from rlvr.train.run import Run

    config = load_config(RunConfig, SMOKE, [
        "data.source=doubles", "data.mixture=small", "data.train_size=16", "data.val_size=4",
        "sft.enabled=false",
        "grpo.steps=1", "eval.every=0", "eval.pass_at_k_samples=0", "logging.tensorboard=false"])
    run = Run(config, tmp_path / "run")
    results = run.train()
    assert {t.source for t in run.state.data.train_tasks + run.state.data.val_tasks} == {"doubles"}
    assert results["trained"]["n"] == 4
    rows = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    assert rows and all(r["id"].startswith("doubles-train-") for r in rows)


def test_a_generated_source_is_one_decorated_function():
    def levels(mixture):
        if mixture not in ("small", "big"):
            raise ValueError(f"unknown triples level {mixture!r}; known: small, big")

    @register_source("triples", default_mixture="small", check_mixture=levels)
    def triples(mixture, n, *, seed, split, unique=True):
        base = {"small": 1, "big": 10}[mixture] + (0 if split == "train" else 100)
        return [Task(f"triples-{split}-{i}", f"What is 3 x {base + seed + i}?",
                     str(3 * (base + seed + i)), "math", "triples") for i in range(n)]

    try:
        register_source("triples", default_mixture="small", check_mixture=levels)(triples)
        assert "triples" in generated_names() and not needs_data_path("triples")
        data = DataConfig(source="triples", train_size=2, val_size=1)
        assert data.mixture == "small"
        train, val = load_tasks(data, seed=0)
        # train: seed 0, 3 x (1 + 0 + i); validation: seed 0 + 1, 3 x (101 + 1 + 0)
        assert [t.reference for t in train] + [t.reference for t in val] == ["3", "6", "306"]
        with pytest.raises(ValidationError, match="unknown triples level 'huge'"):
            DataConfig(source="triples", mixture="huge")
        with pytest.raises(ValueError, match="task source 'triples' is already registered"):
            register_source("triples")(lambda mixture, n, **kw: [])
    finally:
        unregister_source("triples")
    with pytest.raises(TypeError, match="a task source does not take default_mix"):
        register_source("quads", default_mix="small")

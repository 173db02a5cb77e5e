"""The CLI's source names come from the task source registry (rlvr.tasks.registry): a source
registered there is offered by `rlvr data convert` (and named in the help texts) without an
edit to the CLI; a run config's top-level `plugins` imports the module that registers it."""

import json

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.cli.data import convertible_names
from rlvr.cli.eval import _tasks_help
from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.tasks.registry import (
    TaskSource,
    generated_names,
    register_source,
    source_names,
    unregister_source,
)
from rlvr.train.config import RunConfig

runner = CliRunner()


@pytest.fixture
def lines_source():
    """A foreign format of one problem per line, ``question = answer``, registered for the test."""

    @register_source
    class Lines(TaskSource):
        name = "test-lines"
        convert_splits = ("test",)

        def read(self, path, split):
            return [Task(id=f"lines-{i}", prompt=q.strip(), reference=a.strip(),
                         task_type="math", source=self.name)
                    for i, (q, a) in enumerate(line.split("=") for line in
                                               path.read_text().splitlines())]

    yield Lines
    unregister_source("test-lines")


def test_convert_offers_exactly_the_registered_foreign_formats(lines_source):
    assert convertible_names() == ["gsm8k", "math500", "humaneval", "mbpp", "test-lines"]


def test_a_registered_source_converts_without_a_cli_edit(tmp_path, lines_source):
    src = tmp_path / "qa.txt"
    src.write_text("1 + 1 = 2\n2 * 3 = 6\n")
    out = tmp_path / "tasks.jsonl"
    result = runner.invoke(app, ["data", "convert", "test-lines", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["prompt"], r["reference"]) for r in rows] == [("1 + 1", "2"), ("2 * 3", "6")]
    result = runner.invoke(app, ["data", "convert", "test-lines", str(src), "--split", "train",
                                 "-o", str(out)])
    assert result.exit_code == 2
    assert "'train' is not a split of test-lines (test)" in result.output


def test_help_texts_name_the_registered_sources():
    assert generated_names() == ["arithmetic", "logic", "reasoning_gym", "verifiers",
                               "verifiers_episodes", "tool_arithmetic"]
    files = [n for n in source_names() if n not in generated_names()]
    assert f"{', '.join(files)} (read from --data-path)" in _tasks_help()


def test_run_config_plugins_register_a_source_before_data_is_validated(tmp_path, monkeypatch):
    (tmp_path / "my_sources_for_test.py").write_text(
        "from rlvr.tasks.registry import TaskSource, register_source\n"
        "@register_source\n"
        "class Primes(TaskSource):\n"
        "    name = 'test-primes'\n"
        "    generated = True\n"
        "    default_mixture = 'small'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "run.yaml"
    config.write_text("plugins: [my_sources_for_test]\ndata: {source: test-primes}\n")
    try:
        loaded = load_config(RunConfig, config, [])
        assert loaded.plugins == ["my_sources_for_test"]
        assert loaded.data.source == "test-primes" and loaded.data.mixture == "small"
    finally:
        unregister_source("test-primes")
        monkeypatch.delitem(__import__("sys").modules, "my_sources_for_test", raising=False)


def test_eval_help_names_every_sample_aggregator():
    # rlvr.eval is imported inside the eval command (it may import torch), so the help of
    # --aggregators lists the names itself: it must list exactly the registered ones
    from rlvr.eval.metrics import SAMPLE_AGGREGATORS

    result = runner.invoke(app, ["eval", "--help"], env={"COLUMNS": "400"})
    help_text = " ".join(result.output.split())
    assert f"names: {', '.join(SAMPLE_AGGREGATORS.names())}." in help_text

"""The three-row table of a tool run: the no-tool validation (plain prompts, one greedy turn,
saved once and read back), its place in results.json and in the console table."""

import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from rlvr.models import load_model_and_tokenizer
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rollout import create_engine
from rlvr.tasks.prompting import prompt_ids, stop_token_ids
from rlvr.tasks.tool_arithmetic import generate
from rlvr.train import tool_table
from rlvr.train.run import results_table
from rlvr.train.sections import EvalConfig
from rlvr.train.state import ModelState, TrainingState
from rlvr.train.taskdata import RunData


def _row(label, pass_at_1, n=4):
    return {"label": label, "step": 0, "pass_at_1": pass_at_1, "mean_reward": pass_at_1,
            "format_rate": 1.0, "truncation_rate": 0.0, "mean_length": 9.0, "n": n,
            "seconds": 1.0}


def _config(env_name, no_tool=True):
    env = None if env_name is None else SimpleNamespace(name=env_name)
    return SimpleNamespace(eval=EvalConfig(no_tool_baseline=no_tool, max_new_tokens=8,
                                           batch_size=3),
                           env=env, data=SimpleNamespace(one_shot=False))


def test_only_runs_with_a_multi_turn_environment_want_the_row():
    assert tool_table.wanted(_config("tool"))
    assert not tool_table.wanted(_config("tool", no_tool=False))
    assert not tool_table.wanted(_config("single_turn"))
    assert not tool_table.wanted(_config(None))


class _Recording:
    """A rollout engine that records the prompts it is given."""

    def __init__(self, engine):
        self.engine, self.prompts = engine, []

    def generate(self, prompts, params):
        self.prompts += [list(p) for p in prompts]
        return self.engine.generate(prompts, params)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def test_no_tool_validation_uses_plain_prompts_and_is_saved_once(tmp_path):
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    tasks = generate("3dx3d,words1", 4, seed=0, split="validation")
    policy = model.float()
    engine = _Recording(create_engine("torch", policy))
    state = TrainingState(data=RunData(val_tasks=tasks, default_instruction="Answer."),
                          models=ModelState(policy=policy, engine=engine, tokenizer=tokenizer),
                          stop_ids=stop_token_ids(tokenizer))
    config = _config("tool")
    with RewardPipeline(RewardConfig(workers=0)) as rewards:
        row = tool_table.validate_without_tools(state, config, tmp_path, rewards)
        # the plain prompts: the question and instruction, no tool system message
        assert state.models.engine.prompts == [prompt_ids(tokenizer, t, "Answer.", False)
                                        for t in tasks]
        assert row["label"] == "no_tool" and row["n"] == 4 and row["pass_at_1"] == 0.0
        saved = json.loads((tmp_path / tool_table.NO_TOOL_FILE).read_text())
        assert saved == row and len(saved["samples"]) == 4
        # a resumed run reads the row back instead of validating again
        (tmp_path / tool_table.NO_TOOL_FILE).write_text(json.dumps(_row("no_tool", 0.25)))
        again = tool_table.validate_without_tools(state, config, tmp_path, rewards)
    assert again["pass_at_1"] == 0.25 and len(state.models.engine.prompts) == 4


def test_results_hold_the_three_rows_and_the_table_prints_them(tmp_path):
    results = {"baseline": _row("before_grpo", 0.5), "trained": _row("trained", 0.75),
               "base_model": None}
    assert tool_table.add_no_tool(dict(results), tmp_path) == results  # none saved: unchanged
    (tmp_path / tool_table.NO_TOOL_FILE).write_text(json.dumps(
        {**_row("no_tool", 0.0), "samples": [{"id": "x"}]}))
    tool_table.add_no_tool(results, tmp_path)
    assert results["no_tool"] == _row("no_tool", 0.0)  # samples stay in the file
    assert results["gain_over_no_tool"] == pytest.approx(0.75)
    console = Console(width=200, record=True)
    console.print(results_table(results))
    lines = [line for line in console.export_text().splitlines() if "%" in line]
    assert [line.split("│")[1].strip() for line in lines] == [
        "no tool (before SFT, one turn)", "SFT tool model (entered GRPO)", "GRPO tool model"]
    assert [line.split("│")[2].strip() for line in lines] == ["0.0%", "50.0%", "75.0%"]


def test_a_run_without_the_row_keeps_its_table():
    results = {"baseline": _row("before_grpo", 0.5), "trained": _row("trained", 0.75)}
    console = Console(width=200, record=True)
    console.print(results_table(results))
    names = [line.split("│")[1].strip() for line in console.export_text().splitlines()
             if "%" in line]
    assert names == ["baseline (entered GRPO)", "trained (GRPO)"]

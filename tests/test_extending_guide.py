"""docs/guides/extending.md runs as written: its code blocks (those with a ``title``) are
extracted and executed, the per-kind decorators register what the page says, and the worked
example (a new advantage estimator: the module, its test, `rlvr train` selecting it on the
smoke preset) goes end to end."""

import json
import re
import runpy
import shlex
import sys
from pathlib import Path

import torch
import yaml
from typer.testing import CliRunner

from rlvr.algo import compute_advantages, kl_divergence
from rlvr.algo.registry import ADVANTAGE_ESTIMATORS, KL_ESTIMATORS, LOSS_AGGREGATIONS, POLICY_LOSSES
from rlvr.envs.registry import ENVIRONMENTS
from rlvr.rewards.registry import FORMAT_RULES, REWARD_AGGREGATORS, VERIFIERS
from rlvr.rewards.types import Status
from rlvr.tasks.registry import SOURCES
from rlvr.tools.registry import TOOLS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guides" / "extending.md"
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```$', re.DOTALL | re.MULTILINE)


def _blocks() -> dict[str, str]:
    return {title: body for _, title, body in BLOCK.findall(PAGE.read_text(encoding="utf-8"))}


def test_the_page_has_the_blocks_this_test_runs():
    assert sorted(_blocks()) == ["kinds.py", "my_advantages.py", "test_my_advantages.py",
                                 "train.sh"]


def test_each_kind_registers_with_its_decorator(tmp_path):
    added = [(ADVANTAGE_ESTIMATORS, "raw_reward"), (POLICY_LOSSES, "plain_pg"),
             (KL_ESTIMATORS, "abs_k1"), (LOSS_AGGREGATIONS, "row_sum"), (VERIFIERS, "yes_no"),
             (FORMAT_RULES, "one_line"), (REWARD_AGGREGATORS, "outcome_only"),
             (SOURCES, "doubles"), (TOOLS, "word_count"), (ENVIRONMENTS, "echo")]
    # another test's plugin may have registered one of these names (tests/envs registers its
    # own word_count tool): set those entries aside and put them back after
    kept = [(registry, entry) for registry, name in added for entry in registry.entries()
            if entry.name == name]
    for registry, name in added:
        registry.unregister(name)
    path = tmp_path / "kinds.py"
    path.write_text(_blocks()["kinds.py"])
    try:
        runpy.run_path(str(path), run_name="kinds")
        assert [name for registry, name in added if name not in registry] == []
        rewards, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
        assert compute_advantages("raw_reward", rewards, groups).tolist() == [1.0, 0.0]
        lp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
        assert kl_divergence("abs_k1", lp, ref).tolist() == [[0.5, 1.0]]
        assert POLICY_LOSSES.options("plain_pg", None) == {"scale": 1.0}
        assert str(VERIFIERS.get("yes_no")(" Yes ", "yes").status) == str(Status.correct)
        assert str(VERIFIERS.get("yes_no")("maybe", "yes").status) == str(Status.unparsed)
        assert VERIFIERS.meta("yes_no").format_rule == "none"
        assert FORMAT_RULES.get("one_line")("a\nb") == 0.0
        assert REWARD_AGGREGATORS.get("outcome_only")({"outcome": 1.0, "format": 0.0},
                                                      {"outcome": 1.0, "format": 0.1}) == 1.0
        source = SOURCES.get("doubles")
        assert source.generated and source.default_mixture == "small"
        tasks = source.generate("small", 2, seed=0, split="train")
        assert [(t.prompt, t.reference) for t in tasks] == [("What is 2 x 1?", "2"),
                                                            ("What is 2 x 3?", "6")]
        tool = TOOLS.get("word_count")
        assert tool.fn("three short words") == "3" and tool.argument == "text"
        assert ENVIRONMENTS.get("echo").__name__ == "Echo"
    finally:
        for registry, name in added:
            registry.unregister(name)
        for registry, entry in kept:
            registry.add(entry.name, entry.obj, entry.meta)


def test_the_worked_example_end_to_end(tmp_path, monkeypatch):
    blocks = _blocks()
    for name in ("my_advantages.py", "test_my_advantages.py"):
        (tmp_path / name).write_text(blocks[name])
    monkeypatch.chdir(tmp_path)  # where the user runs rlvr: plugins are found there
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        # 2. its test, as pytest would run it
        runpy.run_path(str(tmp_path / "test_my_advantages.py"))["test_group_median_by_hand"]()
        estimator = ADVANTAGE_ESTIMATORS.get("group_median")
        # 3. the command, on the smoke preset, made small (no SFT, one step)
        calls = []

        def counted(rewards, group_ids):
            calls.append(len(rewards))
            return estimator(rewards, group_ids)

        ADVANTAGE_ESTIMATORS.unregister("group_median")
        ADVANTAGE_ESTIMATORS.register("group_median")(counted)
        command = shlex.split(blocks["train.sh"])
        assert command[:2] == ["rlvr", "train"]
        args = [str(ROOT / a) if a == "configs/smoke.yaml" else a for a in command[1:]]
        args += ["--set", "sft.enabled=false", "--set", "grpo.steps=1", "--set", "eval.every=0"]
        from rlvr.cli import app

        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        run = tmp_path / "runs" / "median"
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert config["plugins"] == ["my_advantages"]
        assert config["algo"]["advantage"] == "group_median"
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [row["step"] for row in rows] == [1]
        assert calls == [16]  # one step of 4 prompts x 4 completions, scored by the estimator
        # a misspelt name stops before any work, naming the field and the closest estimator
        bad = CliRunner().invoke(app, ["train", "-c", str(ROOT / "configs" / "smoke.yaml"),
                                       "--set", "plugins=[my_advantages]",
                                       "--set", "algo.advantage=group_medain",
                                       "-o", str(tmp_path / "bad")])
        assert bad.exit_code == 2
        assert ("algo.advantage: unknown advantage estimator 'group_medain'; did you mean "
                "'group_median'?") in bad.output
    finally:
        ADVANTAGE_ESTIMATORS.unregister("group_median")
        sys.modules.pop("my_advantages", None)

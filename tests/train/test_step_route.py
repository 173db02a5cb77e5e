"""The route of one GRPO step through the code, from ``rlvr train`` (src/rlvr/cli/train.py)
to ``optimizer.step()``: the rlvr source files on the call stack at each phase boundary of a
step, recorded while a real step of the default preset (configs/arithmetic.yaml, on the tiny
random model) runs, are at most 12 and exactly the files docs/grpo-step.md lists.

The boundaries: the rollout engine's ``generate`` entry, the reward pipeline's
``score_batch`` entry, the advantage function's entry
(:func:`rlvr.algo.step_advantages.step_advantages`) and the update's ``optimizer.step``
call. At an entry the stack is the callers' files plus the called function's own file."""

from __future__ import annotations

import inspect
import re
import traceback
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.optim.optimizer import register_optimizer_step_pre_hook  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import rlvr.train.grpo as grpo  # noqa: E402
from rlvr.cli import app  # noqa: E402
from rlvr.rewards.pipeline import RewardPipeline  # noqa: E402
from rlvr.rollout.torch_engine import TorchEngine  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "rlvr"
PAGE = ROOT / "docs" / "grpo-step.md"
MAX_FILES = 12
# the untrained model's rewards are all 0: a length penalty gives the groups the reward
# variance that makes rows train (and the update run)
TINY = ["model.name=tiny-random", "model.precision=fp32", "sft.enabled=false",
        "grpo.steps=1", "grpo.prompts_per_step=2", "grpo.group_size=4",
        "grpo.max_new_tokens=24", "algo.length_penalty=0.5", "data.train_size=16",
        "data.val_size=2",
        "eval.max_new_tokens=4", "eval.pass_at_k_samples=0", "eval.every=0",
        "eval.base_model=false", "logging.tensorboard=false", "reward.workers=0"]


def _rlvr_files(extra: str | None = None) -> set[str]:
    """The rlvr source files on the current stack (as ``src/rlvr/...``), plus ``extra``."""
    files = {str(Path(f.filename).resolve()) for f in traceback.extract_stack()}
    if extra:
        files.add(str(Path(extra).resolve()))
    return {"src/rlvr/" + Path(f).relative_to(SRC).as_posix() for f in files
            if f.startswith(str(SRC) + "/")}


def documented_route() -> list[str]:
    """The files the page's "The route" section lists (backquoted ``src/rlvr/...`` paths)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## The route", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`(src/rlvr/[\w/]+\.py)`", section)


def test_one_step_crosses_the_documented_files_and_at_most_twelve(tmp_path, monkeypatch):
    stacks: dict[str, set[str]] = {}
    in_step = []

    def record(boundary: str, function=None) -> None:
        if in_step:
            own = (inspect.getsourcefile(inspect.unwrap(function)) if function is not None
                   else None)
            stacks.setdefault(boundary, set()).update(_rlvr_files(own))

    def wrap(owner, name, boundary):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            record(boundary, real)
            return real(*args, **kwargs)
        monkeypatch.setattr(owner, name, wrapper)

    real_run = grpo.GRPOStep.run

    def run(self, state, step):
        in_step.append(step)
        try:
            return real_run(self, state, step)
        finally:
            in_step.pop()

    monkeypatch.setattr(grpo.GRPOStep, "run", run)
    wrap(TorchEngine, "generate", "generate")
    wrap(RewardPipeline, "score_batch", "score_batch")
    wrap(grpo, "step_advantages", "advantages")
    hook = register_optimizer_step_pre_hook(
        lambda optimizer, args, kwargs: record("optimizer.step"))
    try:
        result = CliRunner().invoke(app, [
            "train", "--config", str(ROOT / "configs" / "arithmetic.yaml"),
            "-o", str(tmp_path / "run"), *[x for o in TINY for x in ("--set", o)]])
    finally:
        hook.remove()
    assert result.exit_code == 0, result.output
    assert set(stacks) == {"generate", "score_batch", "advantages", "optimizer.step"}, stacks
    route = set().union(*stacks.values())
    # every boundary starts at the command
    assert all("src/rlvr/cli/train.py" in files for files in stacks.values())
    assert "src/rlvr/algo/step_advantages.py" in stacks["advantages"]
    assert len(route) <= MAX_FILES, sorted(route)
    assert sorted(route) == sorted(documented_route()), (sorted(route), stacks)

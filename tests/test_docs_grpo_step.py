"""docs/grpo-step.md stays true: every ``module:function`` it names imports and resolves
(a renamed or moved function fails here)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "grpo-step.md"
REFERENCE = re.compile(r"`(rlvr(?:\.\w+)+):(\w+(?:\.\w+)*)`")


def references() -> list[tuple[str, str]]:
    return REFERENCE.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_names_the_steps_functions():
    refs = references()
    assert len(refs) >= 20
    named = {f"{m}:{q}" for m, q in refs}
    assert {"rlvr.train.grpo:GRPOStep.run", "rlvr.algo.step_advantages:step_advantages",
            "rlvr.update.loop:policy_update", "rlvr.train.rollouts:RolloutSource"} <= named


@pytest.mark.parametrize("module, qualname", sorted(set(references())))
def test_each_named_function_exists(module, qualname):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        assert hasattr(obj, part), f"docs/grpo-step.md: {module}:{qualname}: no {part!r}"
        obj = getattr(obj, part)

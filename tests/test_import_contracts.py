"""The import contracts of pyproject.toml (``[tool.importlinter]``): the layers (with their
independent ``|`` siblings), algo imports no model / engine / reward / sandbox code, rewards and
tasks import no torch, tasks register nothing into the reward registry, and no package's modules
import each other in a cycle. ``lint-imports`` (import-linter, the ``dev`` extra) checks them on
the source; these tests run it and fail when a contract breaks, or when import-linter is
missing (``make test`` installs the ``dev`` extra, so a missing linter is a broken setup, not a
reason to skip)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(*args: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("importlinter") is None or not LINT_IMPORTS.exists():
        pytest.fail(f"import-linter is not installed in {sys.prefix} (no {LINT_IMPORTS}): "
                    "install the dev extra, `pip install -e '.[dev]'` (scripts/setup.sh does)",
                    pytrace=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_every_contract_is_kept():
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_broken_contract_fails(tmp_path):
    # The check itself must be able to fail: cli imports tasks, so forbidding it breaks.
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter]\nroot_package = rlvr\n\n"
                      "[importlinter:contract:bad]\nname = cli must not import tasks\n"
                      "type = forbidden\nsource_modules = rlvr.cli\n"
                      "forbidden_modules = rlvr.tasks\n")
    result = _lint("--config", str(config))
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_siblings_of_a_layer_are_independent(tmp_path):
    # `|` means neither sibling imports the other: tasks import rewards, so declaring them
    # independent siblings must break, while the order "tasks above rewards" holds.
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter]\nroot_package = rlvr\n\n"
                      "[importlinter:contract:siblings]\nname = siblings\ntype = layers\n"
                      "layers =\n    rlvr.tasks | rlvr.rewards\n\n"
                      "[importlinter:contract:order]\nname = order\ntype = layers\n"
                      "layers =\n    rlvr.tasks\n    rlvr.rewards\n")
    result = _lint("--config", str(config))
    assert result.returncode != 0
    assert "siblings BROKEN" in result.stdout
    assert "order KEPT" in result.stdout


def test_importing_every_task_module_registers_no_reward():
    # What the forbidden contract stands for, at run time: a fresh interpreter imports every
    # rlvr.tasks module and has imported neither the reward registry (whose import registers
    # the built-in verifiers, format rules and aggregators) nor any module that registers one.
    modules = sorted(p.stem for p in (ROOT / "src" / "rlvr" / "tasks").glob("*.py"))
    registering = ["rlvr.rewards.registry", "rlvr.rewards.builtin", "rlvr.rewards.aggregate",
                   "rlvr.rewards.format", "rlvr.rewards.math_task", "rlvr.rewards.code"]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}:\n"
            "    importlib.import_module('rlvr.tasks' + ('' if m == '__init__' else '.' + m))\n"
            f"print([m for m in {registering!r} if m in sys.modules])\n"
            "import rlvr.rewards.registry as r\n"
            "print(len(r.VERIFIERS) > 0)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert result.returncode == 0, result.stderr
    # none imported; importing the registry afterwards fills it (so the check can fail)
    assert result.stdout.split() == ["[]", "True"]

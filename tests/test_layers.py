"""Layering: lower layers never import higher ones (checked on the source, nothing imported).

Bottom: ``rlvr.exact``, ``rlvr.io``, ``rlvr.length_cap`` (no rlvr imports outside
themselves). ``rewards`` sits below ``tasks`` and ``data``: tasks generate, rewards judge, and
the logic verifier lives in ``rewards`` so that no task module registers into the reward
registry when imported.

The layers themselves, and "tasks register nothing into the reward registry at import", are
import-linter contracts in pyproject.toml (tests/test_import_contracts.py runs them).
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rlvr"


def _imports(path: Path) -> set[str]:
    """The rlvr modules ``path`` imports, at any depth (function-local imports included)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}
    return {m for m in found if m == "rlvr" or m.startswith("rlvr.")}


@pytest.mark.parametrize("module", ["exact.py", "length_cap.py", "io/reading.py",
                                    "io/jsontext.py"])
def test_bottom_modules_import_no_rlvr_module(module):
    assert _imports(SRC / module) == set()


@pytest.mark.parametrize("path", sorted((SRC / "io").glob("*.py")), ids=lambda p: p.name)
def test_io_imports_nothing_but_itself(path):
    assert {m for m in _imports(path) if not m.startswith("rlvr.io")} == set()


@pytest.mark.parametrize("path", sorted((SRC / "rewards").rglob("*.py")),
                         ids=lambda p: p.relative_to(SRC).as_posix())
def test_rewards_import_no_higher_layer(path):
    higher = ("rlvr.tasks", "rlvr.data", "rlvr.train", "rlvr.eval", "rlvr.cli", "rlvr.serve")
    bad = sorted(m for m in _imports(path) if m.startswith(higher))
    assert not bad, f"{path.relative_to(SRC)} imports {bad}"


def test_tasks_register_nothing_into_rewards():
    for path in sorted((SRC / "tasks").glob("*.py")):
        registering = [m for m in _imports(path) if m.rsplit(".", 1)[-1].startswith("register_")]
        assert not registering, f"{path.name} imports {registering}"
        decorators = [ast.unparse(d) for node in ast.walk(ast.parse(path.read_text("utf-8")))
                      if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                      for d in node.decorator_list]
        # tasks' own source registry (@register_source) is theirs; anything else that
        # registers (a verifier, a reward) would write into rewards at import
        into_rewards = [d for d in decorators if "register" in d and "register_source" not in d]
        assert not into_rewards, path.name


def test_task_loaders_do_not_import_each_other_in_a_cycle():
    assert not any(m.startswith("rlvr.tasks.sources") for m in _imports(SRC / "tasks" / "code.py"))

"""The CLI's import policy (see :mod:`rlvr.cli`): building the app and printing its help imports
no torch, the modules that import torch are imported only inside the commands that use it (each
deferred import marked with a comment saying so), and every other rlvr module at the top."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "src" / "rlvr" / "cli"
# The modules that import torch / transformers (or may): deferred in the CLI...
DEFERRED = ("rlvr.models", "rlvr.rollout", "rlvr.algo", "rlvr.update", "rlvr.train",
            "rlvr.eval.engine_sampler", "rlvr.serve", "rlvr.distributed", "rlvr.monitor")
# ...but for these, which import without it (the first test proves it): at the module top.
LIGHT = ("rlvr.models.loader", "rlvr.distributed.errors")
MARKS = ("# deferred:", "# optional dependency:")


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _in_deferred(module: str) -> bool:
    return _within(module, DEFERRED) and not _within(module, LIGHT)


def _module(node: ast.Import | ast.ImportFrom) -> str:
    return node.module if isinstance(node, ast.ImportFrom) else node.names[0].name


def _function_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {n for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return sorted(found, key=lambda n: n.lineno)


def test_building_the_app_and_its_help_imports_no_torch():
    code = ("import sys\n"
            "from typer.testing import CliRunner\n"
            "import rlvr.cli\n"
            "runner = CliRunner()\n"
            "for args in (['--help'], ['data', '--help'], ['eval', '--help'], ['train', '--help'],"
            " ['serve', '--help'], ['verify', '--help']):\n"
            "    result = runner.invoke(rlvr.cli.app, args)\n"
            "    assert result.exit_code == 0, (args, result.output)\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_the_model_stack_is_imported_only_inside_commands(path):
    top = [_module(n) for n in ast.parse(path.read_text("utf-8")).body
           if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [m for m in top if _in_deferred(m)], f"{path.name}: move it into the command"


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_every_function_level_import_is_a_marked_deferral(path):
    lines = path.read_text("utf-8").splitlines()
    block_start = {}  # an import -> the first line of its run of consecutive imports
    previous = None
    for node in _function_imports(path):
        joined = previous is not None and previous.end_lineno + 1 == node.lineno
        block_start[node] = block_start[previous] if joined else node.lineno
        previous = node
    for node, start in block_start.items():
        module = _module(node)
        assert _in_deferred(module), (f"{path.name}:{node.lineno}: {module} imports without "
                                      "torch: import it at the module top")
        # the mark is on the import's line or on the line above its run of imports
        marked = any(m in lines[node.lineno - 1] or m in lines[start - 2] for m in MARKS)
        assert marked, f"{path.name}:{node.lineno}: a deferred import needs a `# deferred:` comment"

"""rlvr modules are imported at the top of a module, where the import contracts and a reader see
them. An import of rlvr inside a function is allowed for two reasons only (docs/development.md,
"The rules the code keeps"):

- ``start-up``: the module imports torch (or costs start-up time otherwise) and sits on the path
  of ``rlvr --help`` and the light commands, which must stay fast (tests/cli/test_startup.py);
- ``optional dependency``: the module imports a package an extra installs (``ray``), which a
  plain install lacks.

Every such import is listed below with its reason; a new one fails until it is listed, a listed
one that is gone fails until it is removed, and there are at most 25.
"""

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FUNCTION_IMPORTS = 25
REASONS = ("start-up", "optional dependency")

_TORCH = "start-up: imports torch, kept off `rlvr --help`"
# (file under src/rlvr, module imported, how many times) -> reason
ALLOWED: dict[tuple[str, str, int], str] = {
    ("cli/common.py", "rlvr.models.precision", 1): _TORCH,
    ("cli/common.py", "rlvr.train.config", 1): _TORCH,
    ("cli/data.py", "rlvr.eval.engine_sampler", 1): _TORCH,
    ("cli/data.py", "rlvr.train.config", 1): _TORCH,
    ("cli/eval.py", "rlvr.eval.engine_sampler", 1): _TORCH,
    ("cli/eval.py", "rlvr.train.config", 1): _TORCH,
    ("cli/serve.py", "rlvr.models.inference", 1): _TORCH,
    ("cli/serve.py", "rlvr.rollout", 1): _TORCH,
    ("cli/serve.py", "rlvr.serve", 2): _TORCH,
    ("cli/sweep.py", "rlvr.train.run", 1): _TORCH,
    ("cli/sweep.py", "rlvr.train.sweep.runner", 1): _TORCH,
    ("cli/sweep.py", "rlvr.train.sweep.spec", 1): _TORCH,
    ("cli/sweep.py", "rlvr.train.sweep.summary", 1): _TORCH,
    ("cli/train.py", "rlvr.train.config", 2): _TORCH,
    ("cli/train.py", "rlvr.train.run", 2): _TORCH,
    ("rewards/gym.py", "rlvr.rewards.gym_sandbox", 1):
        "start-up: the sandbox package (~30 ms) is not imported by `rlvr` until a "
        "reasoning-gym answer needs its scorer sandboxed",
    ("rewards/builtin.py", "rlvr.rewards.code", 1):
        "start-up: the code verifier imports the sandbox; a config naming it validates "
        "without it, the module loads on the first lookup of `code`",
    ("rewards/builtin.py", "rlvr.rewards.math_task", 1):
        "start-up: the math verifier imports sympy (about a second); it loads on the first "
        "lookup of `math`",
    ("tools/__init__.py", "rlvr.tools.python_tool", 1):
        "start-up: the python tool imports the sandbox and the code verifier; it loads on "
        "the first lookup of `python`",
    ("rewards/pool.py", "rlvr.sandbox.cgroups", 1):
        "start-up: the sandbox package (~30 ms), needed only when a worker is replaced or "
        "the pool closes",
    ("train/run.py", "rlvr.distributed.ray_workers", 1):
        "optional dependency: ray (the `ray` extra), only with rollout.ray_address",
    ("train/setup.py", "rlvr.distributed.ray_workers", 1):
        "optional dependency: ray (the `ray` extra), only with rollout.ray_address",
}


def _module_name(path: Path, src: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.Import | ast.ImportFrom, path: Path, src: Path) -> list[str]:
    """The rlvr modules ``node`` imports (``from rlvr.rewards import gym_sandbox`` names the
    submodule when it is one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "rlvr"]
    if node.level:
        package = _module_name(path, src)
        if path.name != "__init__.py":
            package = package.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            package = package.rsplit(".", 1)[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base.split(".")[0] != "rlvr":
        return []
    folder = src.joinpath(*base.split("."))
    submodules = [f"{base}.{a.name}" for a in node.names
                  if (folder / f"{a.name}.py").exists() or (folder / a.name).is_dir()]
    return submodules or [base]


def function_imports(src: Path = SRC) -> Counter:
    """``(file under src/rlvr/, module) -> count`` of rlvr imports inside function bodies."""
    root = src / "rlvr"
    found: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = {n for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef,
                                                               ast.AsyncFunctionDef))
                 for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in nodes:
            for module in _imported(node, path, src):
                found[(path.relative_to(root).as_posix(), module)] += 1
    return found


def test_the_scan_finds_function_level_imports(tmp_path):
    package = tmp_path / "rlvr" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("")
    (package / "a.py").write_text(
        "import json\nfrom rlvr.pkg import sub\n\n"
        "def f():\n    import json\n    from rlvr.io import atomic_write\n"
        "    from . import sub\n\n"
        "class C:\n    def m(self):\n        import rlvr.records\n"
        "        def inner():\n            from .sub import x\n")
    found = function_imports(tmp_path)
    assert found == Counter({("pkg/a.py", "rlvr.io"): 1, ("pkg/a.py", "rlvr.pkg.sub"): 2,
                             ("pkg/a.py", "rlvr.records"): 1})


def test_function_level_imports_of_rlvr_are_the_listed_ones():
    found = function_imports()
    allowed = {(path, module): count for path, module, count in ALLOWED}
    unlisted = {key: n for key, n in found.items() if allowed.get(key) != n}
    assert not unlisted, (f"function-level imports of rlvr not in ALLOWED (or another count): "
                          f"{unlisted}; import at the top, or list it with its reason")
    gone = {key: n for key, n in allowed.items() if found.get(key) != n}
    assert not gone, f"ALLOWED lists imports that are gone: {gone}"


def test_at_most_25_each_with_one_of_the_two_reasons():
    assert sum(count for _, _, count in ALLOWED) <= MAX_FUNCTION_IMPORTS
    for key, reason in ALLOWED.items():
        assert reason.startswith(tuple(f"{r}: " for r in REASONS)), key

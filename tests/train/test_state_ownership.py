"""The training state has one owner: only :mod:`rlvr.train.setup`, :mod:`rlvr.train.resume`
and a rollback (:meth:`rlvr.train.hooks.RollbackHook.rollback`) assign its fields
(:class:`~rlvr.train.state.TrainingState` and its groups :class:`~rlvr.train.state.ModelState`,
:class:`~rlvr.train.state.OptimState`, :class:`~rlvr.train.state.Progress`); the GRPO step
holds no training object of its own.

The check reads every module of ``src/rlvr`` with :mod:`ast`: an assignment, augmented
assignment, annotated assignment, ``setattr`` or ``delattr`` whose target is a field of the
state, reached through a name bound to the state or one of its groups (``state``,
``self.state``, ``s = self.state``, ``m, o = s.models, s.optim`` ...). Changing what a field
holds in place (appending a validation row to the history, loading weights into the policy)
is not an assignment of the field."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

from rlvr.train.grpo import GRPOStep
from rlvr.train.state import ModelState, OptimState, Progress, TrainingState

SRC = Path(__file__).resolve().parents[2] / "src" / "rlvr"
GROUPS = {"models", "optim", "progress"}
FIELDS = {f.name for cls in (TrainingState, ModelState, OptimState, Progress)
          for f in dataclasses.fields(cls)}
#: (module path under src/rlvr, qualified function name prefix or "" for the whole module)
WRITERS = {("train/setup.py", ""), ("train/resume.py", ""),
           ("train/hooks.py", "RollbackHook.rollback")}


def _is_state(node: ast.AST, aliases: set[str]) -> bool:
    """``node`` evaluates to the state or one of its groups."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    if isinstance(node, ast.Attribute):
        if node.attr == "state":
            return True
        return node.attr in GROUPS and _is_state(node.value, aliases)
    return False


def _bind(target: ast.AST, value: ast.AST, aliases: set[str]) -> None:
    """Record names bound to the state by ``target = value`` (tuples pairwise)."""
    if isinstance(target, ast.Name):
        if _is_state(value, aliases):
            aliases.add(target.id)
        else:
            aliases.discard(target.id)
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
            len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            _bind(t, v, aliases)


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        out = []
        for t in node.targets:
            out.extend(t.elts if isinstance(t, ast.Tuple) else [t])
        return out
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def state_writes(source: str) -> list[tuple[str, int, str]]:
    """``(function, line, field)`` of every assignment of a state field in ``source``."""
    found = []

    def visit(body: list[ast.stmt], qualname: str, aliases: set[str]) -> None:
        for stmt in body:
            for node in ast.walk(stmt) if not isinstance(
                    stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []:
                for target in _targets(node):
                    if (isinstance(target, ast.Attribute) and target.attr in FIELDS
                            and _is_state(target.value, aliases)):
                        found.append((qualname, node.lineno, target.attr))
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("setattr", "delattr") and node.args
                        and _is_state(node.args[0], aliases)):
                    name = node.args[1] if len(node.args) > 1 else None
                    field = (name.value if isinstance(name, ast.Constant) else "<any field>")
                    if field in FIELDS or field == "<any field>":
                        found.append((qualname, node.lineno, field))
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        _bind(target, node.value, aliases)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = {"state"} | {a.arg for a in stmt.args.args + stmt.args.kwonlyargs
                                     if a.arg == "state"}
                visit(stmt.body, f"{qualname}.{stmt.name}".lstrip("."), inner)
            elif isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{qualname}.{stmt.name}".lstrip("."), {"state"})

    visit(ast.parse(source).body, "", {"state"})
    return found


def _allowed(module: str, qualname: str) -> bool:
    return any(module == m and qualname.startswith(prefix) for m, prefix in WRITERS)


def test_only_setup_resume_and_rollback_assign_the_training_state():
    outside = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module == "train/state.py":  # the state's own methods (Progress.advance)
            continue
        for qualname, line, field in state_writes(path.read_text(encoding="utf-8")):
            if not _allowed(module, qualname):
                outside.append(f"src/rlvr/{module}:{line} {qualname or '<module>'} "
                               f"assigns {field}")
    assert outside == [], "\n".join(outside)


def test_the_writers_do_assign_it():
    """The allowed writers are where the fields are assigned (the check sees them)."""
    seen = {(module, q.split(".")[0]) for module in ("train/setup.py", "train/resume.py",
                                                     "train/hooks.py")
            for q, _, _ in state_writes((SRC / module).read_text(encoding="utf-8"))}
    assert {("train/setup.py", "load"), ("train/setup.py", "step_runner"),
            ("train/resume.py", "restore"), ("train/hooks.py", "RollbackHook")} <= seen


def test_the_check_catches_every_form_of_assignment():
    code = textwrap.dedent('''
        def plain(state):
            state.policy = 1
        def through_self(self):
            c, s = self.config, self.state
            s.step = 2
        def group_alias(state):
            m, o = state.models, state.optim
            o.scheduler = 3
            m.reference: object = 4
        def augmented(run):
            run.state.optim.lr_scale *= 0.5
        def by_name(self, name, value):
            setattr(self.state, name, value)
            setattr(self.state.models, "engine", value)
        def not_the_state(state, config):
            state.models.policy.load_state_dict({})
            state.progress.history["validation"].append(1)
            s = config.grpo
            s.step = 5
    ''')
    assert state_writes(code) == [
        ("plain", 3, "policy"), ("through_self", 6, "step"), ("group_alias", 9, "scheduler"),
        ("group_alias", 10, "reference"), ("augmented", 12, "lr_scale"),
        ("by_name", 14, "<any field>"), ("by_name", 15, "engine")]


def test_the_step_holds_no_training_object():
    """A step keeps its config, precision and reward-noise generator; it reads every model,
    the optimizer, the schedule and the KL controller from the state it runs on."""
    from rlvr.train.config import RunConfig

    step = GRPOStep(RunConfig())
    assert set(vars(step)) == {"config", "bf16", "noise"}

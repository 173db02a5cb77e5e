"""Code tasks: extract the program from a completion and grade it in the sandbox.

- Extraction (:func:`extract_code`): the last fenced python block (```` ```python ```` / ``py``
  / ``python3``, ``ipython``; a ``pycon`` transcript's typed lines when there is no python
  block) by default (``block="first"`` for the first one), else the last untagged
  fenced block, else the whole completion when it is plain Python code (or, with a HumanEval
  prompt, when prompt + completion is); otherwise nothing, which is scored ``unparsed``. With
  the tests' entry point known, the block taken is the last one that defines it (a later
  usage example is dropped), preceded by earlier blocks holding helpers it needs.
- Grading (:func:`grade_code`): tests are planned by :mod:`rlvr.sandbox.grading` (asserts
  become probes judged here on plain data; the rest runs in the sandbox's trusted supervisor)
  and the program runs in :mod:`rlvr.sandbox`. The untrusted code never runs in this process.
- The verifier ``code`` maps the sandbox status to a :class:`~rlvr.rewards.types.Verdict`:
  ``ok`` -> correct; ``wrong_answer`` / ``runtime_error`` / ``memory`` / ``output_limit`` ->
  wrong; ``timeout`` -> timeout; ``sandbox_error`` -> error (not the policy's fault). The
  detail reads ``sandbox=<status> tier=<tier> passed=<i>/<n> ...`` (see :func:`parse_detail`).
- Reward: all tests pass = 1.0 else 0.0 (default); with the option ``partial_credit=True``
  (``RewardConfig(verifier_options={"code": {"partial_credit": True}})``) the verdict's
  ``score`` is the passed fraction of the tests instead (0.0 when nothing ran or the run
  timed out / hit a limit before reporting).
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
import warnings
from dataclasses import dataclass, replace

from rlvr.rewards.code_reference import reference_problem
from rlvr.rewards.registry import register_format_rule, register_verifier
from rlvr.rewards.types import Status, Verdict
from rlvr.sandbox import SandboxLimits, SandboxPool, SandboxStatus, default_pool
from rlvr.sandbox.grading import (
    GradeResult,
    TestPlan,
    build_job,
    grade,
    plan_assert_tests,
    plan_check_function,
)

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
# IPython cells are Python (their ``%magic`` / ``!shell`` lines are dropped when the cell does
# not parse with them); a ``pycon`` block is an interactive transcript (``>>> `` / ``... ``
# prompts stripped, output lines dropped). Both are programs for extraction; the
# ``code_block`` format rule still asks for a python tag.
IPYTHON_TAGS = frozenset({"ipython", "ipython3"})
PYCON_TAGS = frozenset({"pycon", "python-repl", "pyrepl"})
_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.-]*)[^\n]*$")


@dataclass(frozen=True)
class FencedBlock:
    """A fenced block: its language tag (lower-case, may be empty), body, and whether closed."""

    lang: str
    code: str
    closed: bool


# A python (or untagged) block that does not parse is extended over at most this many further
# closing fences (a fence line inside a docstring or string closes the block too early).
_MAX_FENCE_EXTENSIONS = 8


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + ("\n" if lines else "")


def fenced_blocks(text: str) -> list[FencedBlock]:
    """All fenced blocks of ``text`` in order (an unterminated last block has ``closed=False``).

    A block closes at the first bare fence line of its kind (as in CommonMark), except that a
    python-tagged or untagged block whose body does not parse is extended to the next such line
    (up to ``_MAX_FENCE_EXTENSIONS`` times) when the longer body parses: a ```` ``` ```` line
    inside a docstring (a fenced usage example) is then part of the code, not its end.
    """
    blocks: list[FencedBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        start = i + 1

        def closes(line: str) -> bool:
            s = line.strip()
            return s.startswith(fence[0] * len(fence)) and set(s) == {fence[0]}

        ends = (k for k in range(start, len(lines)) if closes(lines[k]))
        end = next(ends, None)
        if end is None:
            blocks.append(FencedBlock(lang, _join(lines[start:]), False))
            break
        if (lang in PYTHON_TAGS or lang in IPYTHON_TAGS or not lang) and not _parses(
            _join(lines[start:end])
        ):
            for _, later in zip(range(_MAX_FENCE_EXTENSIONS), ends):
                if _parses(_join(lines[start:later])):
                    end = later
                    break
        blocks.append(FencedBlock(lang, _join(lines[start:end]), True))
        i = end + 1
    return blocks


def transcript_source(text: str) -> str:
    """The code typed in an interactive transcript (``pycon``): lines after a ``>>> `` or
    ``... `` prompt, prompts removed; every other line (the interpreter's output) dropped."""
    out = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith((">>> ", "... ")) or s in (">>>", "..."):
            out.append(s[4:])
    return _join(out)


def _without_magics(code: str) -> str:
    """An IPython cell without its ``%magic`` / ``%%cell magic`` / ``!shell`` lines."""
    return _join([ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))])


def _as_program(b: FencedBlock) -> FencedBlock:
    """``b`` with its code as the program it holds: a pycon transcript's typed code, an
    IPython cell without magics (when they keep it from parsing), a python block that is a
    transcript (starts with ``>>>`` and does not parse) as one."""
    code = b.code
    if b.lang in PYCON_TAGS:
        code = transcript_source(code)
    elif b.lang in IPYTHON_TAGS and not _parses(code):
        code = _without_magics(code)
    elif code.lstrip().startswith(">>>") and not _parses(code):
        code = transcript_source(code)
    return FencedBlock(b.lang, code, b.closed) if code is not b.code else b


def _parse(code: str) -> ast.Module:
    # Completions may hold invalid escapes etc.: their SyntaxWarnings are not ours to print.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def _parses(code: str) -> bool:
    try:
        _parse(code)
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False


def _looks_like_code(text: str) -> bool:
    """Plain Python with at least one real statement (not just a word or a number)."""
    src = text if _parses(text) else textwrap.dedent(text)
    try:
        tree = _parse(src)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return any(
        not (isinstance(s, ast.Expr) and isinstance(s.value, (ast.Name, ast.Constant)))
        for s in tree.body
    )


@dataclass(frozen=True)
class CodeExtraction:
    """Result of :func:`extract_code`.

    Attributes:
        code: the program text, or ``None`` when nothing usable was found.
        method: ``fenced`` (python-tagged block), ``fenced_untagged``, ``plain`` or ``none``.
        detail: why nothing was found (e.g. ``"unterminated code fence"``).
    """

    code: str | None
    method: str
    detail: str = ""


def _module_level(body: list[ast.stmt]):
    """The statements that run at module level (into if / try / with / loop bodies, not into
    functions or classes)."""
    for node in body:
        yield node
        for name in ("body", "orelse", "finalbody"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _module_level(getattr(node, name, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            yield from _module_level(handler.body)


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at module level: defs, classes, assignments, imports."""
    out: set[str] = set()
    for node in _module_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).partition(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _free_names(tree: ast.Module) -> set[str]:
    """Names a module reads but binds nowhere (not even locally) and that are not builtins."""
    loaded, bound = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).partition(".")[0] for a in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return loaded - bound - set(dir(builtins))


def _trees(blocks: list[FencedBlock]) -> list[ast.Module | None]:
    out = []
    for b in blocks:
        try:
            out.append(_parse(b.code))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            out.append(None)
    return out


def _pick_block(blocks: list[FencedBlock], block: str, entry_point: str | None) -> str:
    """The code of the block to grade among ``blocks`` (non-empty).

    Without an entry point: the last (or first) block. With one: the last (or first) block
    that defines it; a later block that only uses it (``print(f(2))``, asserts) is a usage
    example and is dropped. Earlier blocks that define names the chosen block uses but does
    not define (helpers, imports split into their own block) are put before it, in order.
    When no block defines the entry point, the last (or first) block as without one.
    """
    default = blocks[-1] if block == "last" else blocks[0]
    if not entry_point:
        return default.code
    trees = _trees(blocks)
    defining = [
        i for i, t in enumerate(trees) if t is not None and entry_point in _top_level_names(t)
    ]
    if not defining:
        return default.code
    chosen = defining[-1] if block == "last" else defining[0]
    missing = _free_names(trees[chosen])
    parts = []
    for t, b in zip(trees[:chosen], blocks[:chosen]):
        if missing and t is not None and missing & _top_level_names(t):
            parts.append(b.code)
    return "\n".join(parts + [blocks[chosen].code])


def _completes_prompt(prompt: str, completion: str) -> bool:
    """Whether ``prompt`` + ``completion`` is valid Python and the completion adds a real
    statement (a bare function body followed by top-level helpers does not parse alone)."""
    head = prompt + ("" if prompt.endswith("\n") else "\n")
    try:
        tree = _parse(head + completion)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    first = head.count("\n") + 1  # the completion's first line
    return any(
        isinstance(s, ast.stmt)
        and s.lineno >= first
        and not (isinstance(s, ast.Expr) and isinstance(s.value, (ast.Name, ast.Constant)))
        for s in ast.walk(tree)
    )


def extract_code(
    completion: str,
    block: str = "last",
    *,
    entry_point: str | None = None,
    prompt: str | None = None,
) -> CodeExtraction:
    """Find the program in a completion.

    Args:
        completion: the model's whole output.
        block: ``"last"`` (default) or ``"first"`` python block when there are several.
        entry_point: the function the tests call, if known: among several blocks, the last
            (first) one that defines it is taken, not a later usage example (see
            ``_pick_block``).
        prompt: the code the completion continues (HumanEval), if any: an unfenced completion
            is also code when ``prompt`` + completion parses (a bare body plus helpers).

    Raises:
        ValueError: ``block`` is neither ``"last"`` nor ``"first"``.
    """
    if block not in ("last", "first"):
        raise ValueError(f"block must be 'last' or 'first', not {block!r}")
    if not isinstance(entry_point, str):
        entry_point = None
    blocks = [_as_program(b) for b in fenced_blocks(completion)]
    py = [
        b
        for b in blocks
        if b.closed and (b.lang in PYTHON_TAGS or b.lang in IPYTHON_TAGS) and b.code.strip()
    ]
    if py:
        return CodeExtraction(_pick_block(py, block, entry_point), "fenced")
    # A transcript is a usage example when a python block exists: taken only without one.
    pycon = [b for b in blocks if b.closed and b.lang in PYCON_TAGS and b.code.strip()]
    if pycon:
        return CodeExtraction(_pick_block(pycon, block, entry_point), "fenced")
    untagged = [b for b in blocks if b.closed and not b.lang and b.code.strip()]
    if untagged:
        return CodeExtraction(_pick_block(untagged, block, entry_point), "fenced_untagged")
    if blocks:
        if any(not b.closed for b in blocks):
            return CodeExtraction(None, "none", "unterminated code fence")
        return CodeExtraction(None, "none", "no python code block")
    if completion.strip() and _looks_like_code(completion):
        return CodeExtraction(completion, "plain")
    if isinstance(prompt, str) and prompt and completion.strip():
        if _completes_prompt(prompt, completion):
            return CodeExtraction(completion, "plain")
    return CodeExtraction(None, "none", "no code found")


@register_format_rule("code_block")
def code_block_format(completion: str, **options) -> float:
    """1.0 if the completion holds a closed, non-empty, parsable ```` ```python ```` block."""
    for b in fenced_blocks(completion):
        if b.closed and b.lang in PYTHON_TAGS and b.code.strip() and _parses(b.code):
            return 1.0
    return 0.0


# ------------------------------------------------------------------------------------ grading


def _plan(reference: dict) -> TestPlan:
    entry = reference.get("entry_point")
    entry = entry if isinstance(entry, str) else None
    if reference.get("tests") is not None:
        tests = reference["tests"]
        if isinstance(tests, str):
            tests = [tests]
        return plan_assert_tests(list(tests), setup_code=reference.get("setup_code") or "",
                                 entry_point=entry)
    if reference.get("test") is not None:
        return plan_check_function(str(reference["test"]), prelude=reference.get("prompt") or "",
                                   entry_point=entry)
    raise ValueError("code reference needs 'tests' (list of asserts) or 'test' (check source)")


def _hoist_future(program: str) -> str:
    """``program`` with its ``from __future__`` imports moved to the top when some of them
    are not there (the prompt put before a completion that starts with one, or blocks joined):
    Python accepts them only before any other statement but the module docstring."""
    if "__future__" not in program:
        return program
    try:
        tree = _parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return program
    futures = [
        n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"
    ]
    head = tree.body
    if head and isinstance(head[0], ast.Expr) and isinstance(head[0].value, ast.Constant):
        if isinstance(head[0].value.value, str):
            head = head[1:]  # the module docstring may come first
    leading = 0
    while leading < len(head) and head[leading] in futures:
        leading += 1
    if len(futures) == leading:
        return program
    # Each import becomes ``pass`` where it was (the statement may share its line), and the
    # imports go first. Offsets are in UTF-8 bytes, as ast gives them.
    lines = [line.encode("utf-8") for line in program.splitlines(keepends=True)]
    for n in reversed(futures):
        a, b = n.lineno - 1, n.end_lineno - 1
        lines[a : b + 1] = [lines[a][: n.col_offset] + b"pass" + lines[b][n.end_col_offset :]]
    hoisted = "".join(ast.unparse(n) + "\n" for n in futures)
    return hoisted + b"".join(lines).decode("utf-8")


def _program(code: str, reference: dict) -> str:
    prompt = reference.get("prompt")
    if prompt:
        # The prompt's stubs and helpers come first; a full definition in the completion then
        # replaces the stub, and a bare body completes the prompt's last function.
        sep = "" if prompt.endswith("\n") else "\n"
        return _hoist_future(prompt + sep + code)
    if not _parses(code) and _parses(textwrap.dedent(code)):
        return _hoist_future(textwrap.dedent(code))
    return _hoist_future(code)


def _limits(options: dict) -> SandboxLimits:
    lim = options.get("limits")
    if lim is None:
        lim = SandboxLimits()
    kw = {}
    for key in ("timeout_s", "memory_bytes", "max_output_bytes", "wall_factor", "wall_timeout_s"):
        if key in options and options[key] is not None:
            kw[key] = options[key]
    if "timeout" in options and options["timeout"] is not None:
        kw["timeout_s"] = float(options["timeout"])
    if kw:
        lim = replace(lim, **kw)
    return lim


@dataclass(frozen=True)
class CodeGrade:
    """Outcome of :func:`grade_code`: the verdict plus the full grading record.

    Attributes:
        verdict: what the ``code`` verifier returns.
        grade: the :class:`~rlvr.sandbox.grading.GradeResult` (``None`` when no program was
            run: unparsed completion or unusable reference).
    """

    verdict: Verdict
    grade: GradeResult | None = None

    @property
    def fraction(self) -> float:
        """Passed fraction of the tests (the optional partial-credit reward)."""
        return self.grade.fraction if self.grade is not None else 0.0


_STATUS_MAP = {
    SandboxStatus.ok: Status.correct,
    SandboxStatus.wrong_answer: Status.wrong,
    SandboxStatus.runtime_error: Status.wrong,
    SandboxStatus.memory: Status.wrong,
    SandboxStatus.output_limit: Status.wrong,
    SandboxStatus.timeout: Status.timeout,
    SandboxStatus.sandbox_error: Status.error,
}


def grade_code(completion: str, reference: dict, **options) -> CodeGrade:
    """Extract, run and grade a completion.

    Args:
        completion: the model output.
        reference: ``{"entry_point", "tests": [...], "setup_code"?}`` (MBPP style) or
            ``{"entry_point", "test": "<check source>", "prompt"?}`` (HumanEval style).
        **options: ``partial_credit`` (bool, default False: when True the verdict's ``score``
            is the passed fraction of the tests), ``block`` ("last"/"first"),
            ``timeout`` / ``timeout_s`` (CPU seconds: the sandbox's CPU-time budget),
            ``wall_factor`` / ``wall_timeout_s`` (wall backstop of a program using no CPU:
            x budget, default 2, or seconds), ``memory_bytes``, ``max_output_bytes``, ``limits``
            (a :class:`~rlvr.sandbox.SandboxLimits`), ``env`` (extra environment variables for
            the program), ``pool`` (a :class:`~rlvr.sandbox.SandboxPool`, default: the process's).

    Never raises for anything the completion does; a malformed reference gives an ``error``
    verdict.
    """
    partial = bool(options.get("partial_credit", False))
    ref = reference if isinstance(reference, dict) else {}  # a bad reference is reported below
    ext = extract_code(completion, options.get("block", "last"),
                       entry_point=ref.get("entry_point"), prompt=ref.get("prompt"))
    if ext.code is None:
        return CodeGrade(Verdict(Status.unparsed, None, ext.method, ext.detail,
                                 score=0.0 if partial else None))
    problem = reference_problem(reference)
    if problem is not None:
        field, message = problem
        where = f"field '{field}': " if field else ""
        return CodeGrade(Verdict(Status.error, ext.code, ext.method,
                                 f"bad reference: {where}{message}"))
    try:
        plan = _plan(reference)
        if plan.total == 0:
            raise ValueError("code reference has no tests")
    except ValueError as e:
        return CodeGrade(Verdict(Status.error, ext.code, ext.method, f"bad reference: {e}"))
    job = build_job(
        _program(ext.code, reference),
        plan,
        entry_point=reference.get("entry_point"),
        setup_code=reference.get("setup_code") or "",
        limits=_limits(options),
        env=options.get("env"),
        check_prelude=reference.get("prompt") or "",
    )
    pool: SandboxPool = options.get("pool") or default_pool()
    try:
        g = grade(pool.run(job), plan)
    except Exception as e:  # pragma: no cover - a bug of ours: the sandbox layer never raises
        # Nothing the program sends may raise here (decoding and judging are total); should
        # something still escape, report it instead of crashing the caller's batch.
        return CodeGrade(Verdict(Status.error, ext.code, ext.method,
                                 f"grader error: {type(e).__name__}: {e}"[:300]))
    detail = (
        f"sandbox={g.status.value} tier={g.tier.value} passed={g.passed}/{g.total} "
        f"cpu={g.run.cpu_s:.2f}s wall={g.run.wall_s:.2f}s reason={g.run.detail if g.status is not SandboxStatus.wrong_answer else 'tests failed'}"
    )
    status = _STATUS_MAP[g.status]
    # Partial credit never applies to infrastructure failures (``error``): those samples are
    # excluded from the group statistics, so their score must not look like a policy outcome.
    score = g.fraction if partial and status is not Status.error else None
    return CodeGrade(Verdict(status, ext.code, ext.method, detail, score=score), g)


@register_verifier("code", format_rule="code_block")
def verify_code(completion: str, reference: dict, **options) -> Verdict:
    """The ``code`` verifier: see :func:`grade_code` for arguments. Thread- and fork-safe."""
    return grade_code(completion, reference, **options).verdict


def parse_detail(detail: str) -> dict[str, str]:
    """The ``key=value`` fields of a code verdict's detail (``sandbox``, ``tier``, ``passed``...)."""
    out = {}
    for part in detail.split(" "):
        key, eq, value = part.partition("=")
        if eq and key in ("sandbox", "tier", "passed", "wall"):
            out[key] = value
    return out

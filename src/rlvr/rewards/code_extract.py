"""Finding the program in a code task's completion (:func:`extract_code`).

The last fenced python block (```` ```python ```` / ``py`` / ``python3``, ``ipython``; a
``pycon`` transcript's typed lines when there is no python block) by default (``block="first"``
for the first one), else the last untagged fenced block, else the whole completion when it is
plain Python code (or, with a HumanEval prompt, when prompt + completion is); otherwise
nothing, which :mod:`rlvr.rewards.code` scores ``unparsed``. With the tests' entry point known,
the block taken is the last one that defines it (a later usage example is dropped), preceded by
earlier blocks holding helpers it needs.
"""

from __future__ import annotations

import ast
import builtins
import re
import textwrap
import warnings
from dataclasses import dataclass

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

        def closes(line: str, fence: str = fence) -> bool:
            s = line.strip()
            return s.startswith(fence[0] * len(fence)) and set(s) == {fence[0]}

        ends = (k for k in range(start, len(lines)) if closes(lines[k]))
        end = next(ends, None)
        if end is None:
            blocks.append(FencedBlock(lang, _join(lines[start:]), False))
            break
        if (lang in PYTHON_TAGS or lang in IPYTHON_TAGS or not lang) and not parses(
            _join(lines[start:end])
        ):
            for _, later in zip(range(_MAX_FENCE_EXTENSIONS), ends):
                if parses(_join(lines[start:later])):
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
    elif b.lang in IPYTHON_TAGS and not parses(code):
        code = _without_magics(code)
    elif code.lstrip().startswith(">>>") and not parses(code):
        code = transcript_source(code)
    return FencedBlock(b.lang, code, b.closed) if code is not b.code else b


def parse_python(code: str) -> ast.Module:
    """``ast.parse(code)`` without printing SyntaxWarnings (completions may hold invalid
    escapes etc.: their warnings are not ours to print).

    Raises:
        SyntaxError, ValueError, MemoryError, RecursionError: as ``ast.parse``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(code)


def parses(code: str) -> bool:
    """Whether ``code`` is Python that :func:`parse_python` reads."""
    try:
        parse_python(code)
        return True
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False


def _looks_like_code(text: str) -> bool:
    """Plain Python with at least one real statement (not just a word or a number)."""
    src = text if parses(text) else textwrap.dedent(text)
    try:
        tree = parse_python(src)
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
            out.append(parse_python(b.code))
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
        tree = parse_python(head + completion)
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

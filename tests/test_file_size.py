"""Every source file under src/ stays within 500 lines: a file that passes it holds more than
one concept and is split by concept (docs/development.md, "The rules the code keeps").

Exempt: the native C kernels (``src/rlvr/kernels/*.c``, ``*.h``).
A kernel is one SIMD loop nest whose helpers must sit in its translation unit to be inlined;
splitting it by line count would cost speed, and its size follows the instruction sets it
covers, not the number of concepts.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
MAX_LINES = 500
EXEMPT = ("rlvr/kernels/*.c", "rlvr/kernels/*.h")


def _sources() -> list[Path]:
    """The source files of the package (Python, C and C++), less the exempt ones."""
    files = [p for p in (SRC / "rlvr").rglob("*") if p.suffix in (".py", ".c", ".h", ".cpp")]
    return sorted(p for p in files if not any(p.relative_to(SRC).match(e) for e in EXEMPT))


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_the_sources_are_found():
    # the walk itself: the Python files are there, the C kernels are the ones left out
    found = {p.relative_to(SRC).as_posix() for p in _sources()}
    assert "rlvr/cli/__init__.py" in found and "rlvr/io/reading.py" in found
    assert "rlvr/kernels/block_cache.cpp" in found  # the C++ allocator is not a SIMD kernel
    assert not any(f.startswith("rlvr/kernels/") and f.endswith((".c", ".h"))
                   for f in found)
    assert list((SRC / "rlvr" / "kernels").glob("*.c"))


def test_line_count_counts_every_line(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("a = 1\n\nb = 2")  # the last line has no newline: still a line
    assert _lines(path) == 3


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_source_file_within_budget(path):
    lines = _lines(path)
    assert lines <= MAX_LINES, (f"{path.relative_to(ROOT)} has {lines} lines (at most "
                                f"{MAX_LINES}): split it by concept")

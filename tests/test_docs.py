"""The front door stays usable: the README fits its budget, every documentation page is in the
site's navigation (and every navigation entry is a page), the version has one value, and the
repository speaks of the product alone (no development-process references)."""

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README_BUDGET = 250

# Assembled from parts so that this file does not match its own patterns.
_HISTORY = re.compile("|".join([
    r"\bsess" + r"ion ?\d",        # a development session number
    r"\biss" + r"ue ?#?\d",        # a tracker issue number
    r"\btur" + r"n \d",            # a conversation turn number
    r"\b(?:cla" + r"ude|chat" + r"gpt|copi" + r"lot)\b",  # development tools
]), re.IGNORECASE)
_REQUIREMENT_ID = re.compile(r"\bR\d{1,2}\b")
_TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".json", ".jsonl", ".sh",
                  ".c", ".h", ".cfg", ".ini", ".css", ".html", ""}


def _nav_pages(nav) -> list[str]:
    """Every page path of a mkdocs ``nav`` tree."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def _mkdocs() -> dict:
    # mkdocs.yml may hold python tags in other projects; this one is plain YAML.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _repo_files() -> list[Path]:
    """The repository's text files: git's tracked and untracked-not-ignored files when git is
    there, else every file outside .git, virtual environments, build outputs and runs."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names = [ROOT / n for n in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "site", "build", "dist", "runs", "__pycache__"}
        names = [p for p in ROOT.rglob("*") if not skip & set(p.relative_to(ROOT).parts)]
    return [p for p in names if p.is_file() and p.suffix in _TEXT_SUFFIXES]


def test_readme_fits_its_budget():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_BUDGET, f"README.md has {len(lines)} lines (> {README_BUDGET})"


def test_every_docs_page_is_in_the_navigation_and_every_entry_exists():
    pages = set(_nav_pages(_mkdocs()["nav"]))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - pages == set(), f"pages missing from mkdocs.yml nav: {on_disk - pages}"
    assert pages - on_disk == set(), f"nav entries without a page: {pages - on_disk}"
    for required in ("index.md", "getting-started.md", "concepts.md", "troubleshooting.md",
                     "config.md", "reference/cli.md", "reference/metrics.md",
                     "reference/api.md", "results.md", "changelog.md"):
        assert required in pages


def test_the_navigation_helper_reads_nested_sections():
    nav = [{"Home": "index.md"}, {"Guides": [{"A": "guides/a.md"}, "guides/b.md"]}]
    assert _nav_pages(nav) == ["index.md", "guides/a.md", "guides/b.md"]


def test_one_version():
    import rlvr

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"', pyproject, re.MULTILINE).group(1)
    assert rlvr.__version__ == declared
    assert f"## [{declared}]" in (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("text, found", [
    ("measured in sess" + "ion 31", True),
    ("see iss" + "ue #8", True),
    ("after tur" + "n 1", True),
    ("return 0", False),              # a word ending in the pattern's letters is no match
    ("the session's cookie", False),
    ("multi-turn episodes", False),
    ("github.com/x/y/issues/56", False),
])
def test_history_pattern(text, found):
    assert bool(_HISTORY.search(text)) is found


def test_no_development_history_in_the_repository():
    hits = []
    for path in _repo_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _HISTORY.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "development-process references:\n" + "\n".join(hits[:50])


def test_no_requirement_ids_in_what_users_read():
    # docs/requirements.md defines them and docs/development.md names them for maintainers;
    # the config reference is generated from field descriptions that code comments share.
    user_facing = [ROOT / "README.md", ROOT / "docs" / "reference" / "cli.md",
                   *sorted((ROOT / "docs" / "guides").glob("*.md")),
                   *[ROOT / "docs" / n for n in ("index.md", "getting-started.md",
                                                  "concepts.md", "troubleshooting.md")]]
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in user_facing
            for m in _REQUIREMENT_ID.finditer(p.read_text(encoding="utf-8"))]
    assert not hits, hits


def _module_exists(dotted: str) -> bool:
    """``rlvr.a.b`` is a module or package under src/, or ``rlvr.a.b.Name[.attr]`` a class
    (and its attribute) in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT / "src" / Path(*parts[:cut])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            rest = parts[cut:]
            return not rest or rest[0][:1].isupper()
    return False


def test_the_step_diagrams_name_real_modules():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    step = readme[readme.index("## One training step"):readme.index("## How rlvr compares")]
    concepts = (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8")
    names = set(re.findall(r"\brlvr(?:\.[A-Za-z_]+)+", step + concepts))
    assert len(names) > 15
    missing = sorted(n for n in names if not _module_exists(n))
    assert not missing, missing
    assert not _module_exists("rlvr.train.no_such_module")
    assert _module_exists("rlvr.train.grpo.GRPOStep.run") and _module_exists("rlvr.rollout")

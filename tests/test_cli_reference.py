"""docs/reference/cli.md lists every command as the command line defines it today
(scripts/cli_reference.py writes it)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("cli_reference",
                                                  ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_md_is_up_to_date():
    current = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert current == _generator().render(), (
        "docs/reference/cli.md is out of date: run `python scripts/cli_reference.py`")


def test_every_command_has_a_section():
    text = _generator().render()
    for command in ("rlvr verify", "rlvr train", "rlvr sft", "rlvr sweep", "rlvr serve",
                    "rlvr eval", "rlvr lengths", "rlvr report", "rlvr data",
                    "rlvr data convert", "rlvr data generate", "rlvr data check",
                    "rlvr data stratify", "rlvr data dedup", "rlvr data variants"):
        assert f"## `{command}`" in text, command
    assert "| `--version` | option | Print the version and exit. |" in text


def test_angle_brackets_stay_visible_outside_code():
    gen = _generator()
    assert gen._text("default runs/<name>-<ts> (`<kept>`)") == (
        "default runs/&lt;name&gt;-&lt;ts&gt; (`<kept>`)")


def test_generator_check_mode(tmp_path, monkeypatch, capsys):
    gen = _generator()
    monkeypatch.setattr(gen, "OUTPUT", tmp_path / "cli.md")
    assert gen.main(["--check"]) == 1 and "out of date" in capsys.readouterr().err
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0

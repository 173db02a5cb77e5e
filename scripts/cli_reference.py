"""Write docs/reference/cli.md: every ``rlvr`` command with its arguments and options, read
from the typer app itself (:data:`rlvr.cli.app`), so the page cannot drift from ``--help``.

    python scripts/cli_reference.py           # (re)write docs/reference/cli.md
    python scripts/cli_reference.py --check   # exit 1 if docs/reference/cli.md is out of date

tests/test_cli_reference.py fails on a page that differs from what this script writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reference" / "cli.md"

HEADER = """\
# CLI reference

Every `rlvr` command, generated from the command line's own definitions by
`scripts/cli_reference.py` (do not edit by hand; a test checks the page is current). Run any
command with `--help` for the same text. Exit codes: 0 success, 1 a failure while running
(a write that failed, `rlvr data check` failures), 2 bad input (named in the message, nothing
written), 3 a training run stopped by a health check.
"""


def _cell(text: str) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def _text(text: str) -> str:
    """Plain text for a table cell or paragraph: ``<name>`` stays visible (escaped) outside
    code spans."""
    out = []
    for i, part in enumerate(_cell(text).split("`")):
        out.append(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;"))
    return "`".join(out)


def commands(group, prefix: str) -> Iterator[tuple[str, object]]:
    """``(full name, command)`` for every command under ``group``, depth first, in the
    order ``--help`` lists them."""
    import typer

    ctx = typer.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        full = f"{prefix} {name}"
        yield full, cmd
        if hasattr(cmd, "list_commands"):
            yield from commands(cmd, full)


def _param_row(param, ctx) -> str:
    """One table row: the parameter's names (and metavar), kind, and help with its default,
    as ``--help`` prints them."""
    if param.param_type_name == "option":
        record = param.get_help_record(ctx)
        names, help_text = record if record else (", ".join(param.opts), "")
        return f"| `{_cell(names)}` | option | {_text(help_text)} |"
    metavar = (param.metavar or param.name or "").upper()
    need = "required" if param.required else "optional"
    many = ", repeatable" if param.nargs == -1 else ""
    return f"| `{metavar}` | argument ({need}{many}) | {_text(getattr(param, 'help', ''))} |"


def render() -> str:
    """The whole page: one section per command (usage, help text, parameter table)."""
    import typer
    import typer.main

    from rlvr.cli import app

    root = typer.main.get_command(app)
    lines = [HEADER]
    for name, cmd in [("rlvr", root), *commands(root, "rlvr")]:
        ctx = typer.Context(cmd, info_name=name)
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        lines += ["", f"## `{name}`", "", "```text", f"{name} {usage}".rstrip(), "```", ""]
        help_text = (cmd.help or "").strip()
        if help_text:
            paragraphs = help_text.replace("\b\n", "").split("\n\n")
            lines += [x for p in paragraphs for x in (_text(p), "")]
        params = [p for p in cmd.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| parameter | kind | description |", "|---|---|---|"]
            lines += [_param_row(p, ctx) for p in params]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 (writing nothing) if the page is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python scripts/cli_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

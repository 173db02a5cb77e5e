"""Write docs/config.md: every field of a run config (rlvr.train.config.RunConfig and the
models nested in it), with its path, type, default and description.

    python scripts/config_reference.py           # (re)write docs/config.md
    python scripts/config_reference.py --check   # exit 1 if docs/config.md is out of date

The descriptions are the pydantic ``Field(description=...)`` texts, so the page is only as good
as they are; tests/train/test_config_reference.py fails on a field without one and on a
docs/config.md that differs from what this script writes (regenerate after changing a field).
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "config.md"

HEADER = """\
# Run config reference

Every field of a run config (`rlvr train --config FILE`, `--set section.key=value`), generated
from the field descriptions in `src/rlvr/train/config.py` and the models it nests
(`rlvr.rewards.config.RewardConfig`, `rlvr.monitor.config.HealthConfig`,
`rlvr.monitor.sinks.LoggingConfig`) by `scripts/config_reference.py`; do not edit by hand
(`python scripts/config_reference.py` rewrites it, a test checks it is current).
`data.sources[]` is one entry of the `data.sources` list. Defaults are shown as JSON; `range` is
the interval a number must lie in (`[` includes the bound, `(` excludes it; the upper bounds are
`rlvr.limits`): a value outside it is refused before the run starts, naming the field and the
bound.
"""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X``, ``X | None``, ``list[X]`` ...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def type_name(annotation: Any) -> str:
    """A short, stable spelling of a field's type: ``str | None``, ``"a" | "b"``,
    ``list[DataSource]``, ``dict[str, float]``."""
    if annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: FieldInfo) -> str:
    """The default as JSON; ``required`` when there is none; a nested section is ``{...}``."""
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "{...}"
    return json.dumps(value, ensure_ascii=False, default=str)


def walk(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, type[BaseModel],
                                                                     str, FieldInfo]]:
    """``(path, model, name, field)`` for every field of ``model`` and, depth first, of the
    models nested in it; a list of models is ``path[]``."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        yield path, model, name, field
        nested = _models_in(field.annotation)
        if nested:
            origin = typing.get_origin(field.annotation)
            inner = f"{path}[]." if origin is list else f"{path}."
            for sub in nested:
                yield from walk(sub, inner)


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        value = int(value)
    return str(value)


def range_text(field: FieldInfo) -> str:
    """The bounds of a number field as an interval: ``[0, 1024]``, ``(0, 86400]``, ``[1, 1]``;
    ``""`` for a field without ``ge`` / ``gt`` / ``le`` / ``lt`` (not a number)."""
    low = high = None
    for item in field.metadata:
        for name in ("ge", "gt"):
            if getattr(item, name, None) is not None:
                low = ("[" if name == "ge" else "(") + _number(getattr(item, name))
        for name in ("le", "lt"):
            if getattr(item, name, None) is not None:
                high = _number(getattr(item, name)) + ("]" if name == "le" else ")")
    if low is None and high is None:
        return ""
    return f"{low or '(-inf'}, {high or 'inf)'}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _text(text: str) -> str:
    """A table cell of plain text: ``<name>`` stays visible (escaped) outside code spans."""
    out = []
    for i, part in enumerate(_cell(text).split("`")):
        out.append(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;"))
    return "`".join(out)


def _row(path: str, field: FieldInfo) -> str:
    bounds = range_text(field)
    return (f"| `{path}` | {_text(type_name(field.annotation))} | "
            f"`{_cell(default_text(field))}` | {f'`{bounds}`' if bounds else ''} | "
            f"{_text(field.description or '')} |")


_TABLE = ["| field | type | default | range | description |", "|---|---|---|---|---|"]


def render() -> str:
    """The whole docs/config.md text: the top-level fields, then one table per section."""
    from rlvr.train.config import RunConfig

    rows = list(walk(RunConfig))
    sections = [(path, field) for path, _m, _n, field in rows
                if "." not in path and _models_in(field.annotation)]
    lines = [HEADER, "## top level", "", *_TABLE]
    lines += [_row(path, field) for path, _m, _n, field in rows
              if "." not in path and not _models_in(field.annotation)]
    for name, field in sections:
        lines += ["", f"## `{name}`", "", _cell(field.description or ""), "", *_TABLE]
        lines += [_row(path, f) for path, _m, _n, f in rows
                  if path.startswith((f"{name}.", f"{name}[]."))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 (writing nothing) if docs/config.md is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.is_file() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python scripts/config_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

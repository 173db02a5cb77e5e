"""Loading configs: YAML file + ``--set key=value`` overrides -> a validated pydantic model,
with errors that name the file, the field, and the closest valid name for a typo (R41)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config could not be loaded or validated; the message names the source and field."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"algo.kl_coef=0.01"`` -> ``(["algo", "kl_coef"], 0.01)``; the value is parsed as YAML
    (numbers, booleans, lists, ``null``), so ``--set reward.weights={outcome: 1}`` works too.

    Raises:
        ConfigError: no ``=``, or an empty key.
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted KEY, e.g. "
                          "grpo.learning_rate=1e-6")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip().split("."), parsed


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``KEY=VALUE`` overrides to ``data`` in place (creating missing sections); a
    numeric part indexes a list, e.g. ``data.sources.1.weight=0.3``.

    Raises:
        ConfigError: a malformed override, or a list index out of range.
    """
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for i, part in enumerate(path):
            last = i == len(path) - 1
            if isinstance(node, list):
                if not part.isdigit() or int(part) >= len(node):
                    raise ConfigError(f"--set {text!r}: {'.'.join(path[:i])} is a list of "
                                      f"{len(node)}; {part!r} is not an index of it")
                if last:
                    node[int(part)] = value
                else:
                    node = node[int(part)]
                continue
            if last:
                node[part] = value
            else:
                if not isinstance(node.get(part), (dict, list)):
                    node[part] = {}
                node = node[part]
    return data


def _known_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    # Walk the model along the error location to find the fields valid at that level.
    current: Any = model
    for part in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        current = fields[part].annotation
    return list(getattr(current, "model_fields", {}))


def _blame(loc: tuple, source: str, overrides: list[str]) -> str:
    # A problem at or under (or a section-level check above) a ``--set`` key is that
    # override's, not the file's: the file may not even mention the key.
    path = tuple(str(p) for p in loc)
    for text in reversed(overrides):  # the last override of a key is the one that counts
        key = tuple(parse_override(text)[0])  # already validated by apply_overrides
        if key[:len(path)] == path or path[:len(key)] == key:
            return f"--set {text!r}"
    return source


_FIELD_PREFIX = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*): ")


def _section_check(model: type[BaseModel], loc: tuple, message: str) -> tuple[str, str]:
    """``(where, message)`` of a section-level check's error at ``loc``: a message that starts
    with a field of that section (``"kl_controller: ..."``, ``"data.path: ..."``) is put under
    that field, else under the section."""
    named = _FIELD_PREFIX.match(message)
    if named and named.group(1).split(".")[0] in _known_fields(model, (*loc, "")):
        return ".".join([*(str(p) for p in loc), named.group(1)]), message[named.end():]
    return ".".join(str(p) for p in loc) or "(top level)", message


def format_validation_error(exc: ValidationError, model: type[BaseModel], source: str,
                            overrides: list[str] | None = None) -> str:
    """One line per problem: ``source: field.path: message (did you mean 'x'?)``, where
    ``source`` is the ``--set`` override behind the problem when there is one, else the file."""
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        origin = _blame(loc, source, overrides or [])
        where = ".".join(str(p) for p in loc) or "(top level)"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(loc[-1]), _known_fields(model, loc), n=1)
            message = "unknown key" + (f"; did you mean '{close[0]}'?" if close else "")
        elif error["type"] == "value_error" and isinstance(error.get("input"), dict):
            # a check of a whole section (or config): its input is the section's dict, not
            # worth printing; the message names the field it is about ("data.path: ...")
            where, message = _section_check(model, loc, message.removeprefix("Value error, "))
        elif "input" in error and error["type"] != "missing":
            message += f" (got {error['input']!r})"
        lines.append(f"{origin}: {where}: {message}")
    return "\n".join(lines)


def load_config(model: type[M], path: str | Path | None = None,
                overrides: list[str] | None = None, section: str | None = None) -> M:
    """Build ``model`` from an optional YAML file and ``--set`` overrides.

    Args:
        model: the pydantic model class (``extra="forbid"`` so typos are caught).
        path: YAML file; ``None`` starts from the model's defaults.
        overrides: ``KEY=VALUE`` strings applied after the file.
        section: if given and present in the file, only that top-level key is used.

    Raises:
        ConfigError: unreadable file, invalid YAML, or validation errors (all listed).
    """
    data: dict = {}
    source = str(path) if path is not None else "config"
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        data = loaded or {}
        if section is not None and isinstance(data.get(section), dict):
            data = data[section]
    apply_overrides(data, overrides or [])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, model, source, overrides)) from None

"""Loading configs: YAML file + ``--set key=value`` overrides -> a validated pydantic model,
with errors that name the file, the field, and the closest valid name for a typo (R41)."""

from __future__ import annotations

import difflib
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

M = TypeVar("M", bound=BaseModel)


def _takes_bool(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` is meant to hold a boolean (``bool``, ``Any``,
    a union with ``bool`` in it, a ``Literal`` of booleans): only those keep pydantic's lax
    reading of ``true`` / ``false``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _takes_bool(typing.get_args(annotation)[0])
    if annotation is bool or annotation is Any:
        return True
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return any(_takes_bool(a) for a in typing.get_args(annotation))
    return False


def _numeric(annotation: Any) -> bool:
    """Whether ``annotation`` is a number (``int``, ``float``, optional or annotated ones)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _numeric(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_numeric(a) for a in typing.get_args(annotation))
    return annotation in (int, float)


def _bool_for_number(value: Any, annotation: Any) -> str | None:
    """Where in ``value`` a boolean stands for a number of ``annotation`` (``""`` for the
    value itself, ``"[format]"`` for a dict's entry, ``"[2]"`` for a list's item), else None."""
    if isinstance(value, bool):
        return "" if _numeric(annotation) and not _takes_bool(annotation) else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _bool_for_number(value, args[0])
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if typing.get_origin(arg) in (dict, list) or arg in (int, float):
                where = _bool_for_number(value, arg)
                if where is not None:
                    return where
        return None
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            where = _bool_for_number(item, args[1])
            if where is not None:
                return f"[{key}]{where}"
    if origin is list and isinstance(value, list) and args:
        for i, item in enumerate(value):
            where = _bool_for_number(item, args[0])
            if where is not None:
                return f"[{i}]{where}"
    return None


class ConfigModel(BaseModel):
    """Base of every config model (the run config's sections, the reward, env, health and
    logging configs): numbers are numbers.

    Pydantic's lax mode reads ``true`` as 1 for an ``int`` or ``float`` field, so
    ``--set grpo.steps=true`` silently ran one step; here a boolean given for a number (also
    inside a ``dict[str, float]`` or a list) is refused, naming the field and the value. A
    number written as a string (``"5"``, ``"1e-6"``) is still read, and fractional values for
    an ``int`` field or words for a ``float`` stay refused as pydantic refuses them. ``inf``
    and ``nan`` are refused for every float field (``allow_inf_nan``): no setting has a
    meaning for them, and ``.inf`` passes a ``gt=0`` bound."""

    model_config = ConfigDict(allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        where = None if field is None else _bool_for_number(value, field.annotation)
        if where is not None:  # the error's "(got ...)" shows the value
            inside = where.strip("[]").replace("][", ".")
            raise PydanticCustomError("bool_for_number",
                                      "{inside}expected a number, not a boolean",
                                      {"inside": f"{inside}: " if inside else ""})
        return value


class ConfigError(ValueError):
    """A config could not be loaded or validated; the message names the source and field."""


#: Deepest nesting of mappings and lists a YAML config may have (a run config needs 4).
MAX_YAML_DEPTH = 100


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that an integer of more digits than Python converts
    (``sys.get_int_max_str_digits()``, 4300 by default) and nesting deeper than
    :data:`MAX_YAML_DEPTH` are YAML errors naming their line and column, instead of a bare
    ``ValueError`` or a ``RecursionError`` (after a scan whose time grows with the square of
    the depth)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)  # a scalar or an alias: no new level
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested too deeply (more than {MAX_YAML_DEPTH} levels)",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.Node) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(str(node.value))} characters: more digits "
                f"than any setting takes (at most {sys.get_int_max_str_digits()})",
                node.start_mark) from None


class _TooDeep(yaml.YAMLError):
    """YAML nested deeper than the parser's recursion can follow."""


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def yaml_text(text: str) -> Any:
    """``yaml.safe_load(text)``, except that a too-long integer raises ``yaml.YAMLError``
    naming its place, and so does nesting deeper than Python's recursion limit.

    Raises:
        yaml.YAMLError: invalid YAML, an integer past Python's digit limit, or nesting too
            deep (the message names the line where the error is known).
    """
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise _TooDeep("nested too deeply (more levels than Python's recursion limit, "
                       f"{sys.getrecursionlimit()})") from None


def read_config_text(path: str | Path) -> str:
    """The text of a UTF-8 config file (a UTF-8 byte-order mark is dropped).

    Raises:
        ConfigError: the file cannot be read, or is not UTF-8 (naming the line and the byte,
            e.g. a Latin-1 file).
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
    body = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        column = exc.start - (body.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte 0x{body[exc.start]:02x} at "
                          f"column {column}); save the file as UTF-8 (e.g. iconv -f LATIN1 -t "
                          f"UTF-8)") from None


def shown(text: str, most: int = 80) -> str:
    """``repr(text)``, cut to about ``most`` characters (a 5000-digit ``--set`` value is
    named by its start and length, not printed whole)."""
    if len(text) <= most:
        return repr(text)
    return f"{text[:most]!r}... ({len(text)} characters)"


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"algo.kl_coef=0.01"`` -> ``(["algo", "kl_coef"], 0.01)``; the value is parsed as YAML
    (numbers, booleans, lists, ``null``), so ``--set reward.weights={outcome: 1}`` works too.

    Raises:
        ConfigError: no ``=``, an empty key, or a value YAML reads but no setting can hold (an
            integer past Python's digit limit, nesting deeper than its recursion limit).
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
        raise ConfigError(f"--set {shown(text)}: expected KEY=VALUE with a dotted KEY, e.g. "
                          "grpo.learning_rate=1e-6")
    try:
        parsed = yaml_text(value) if value.strip() else ""
    except yaml.YAMLError as exc:
        if isinstance(exc, (yaml.constructor.ConstructorError, yaml.composer.ComposerError,
                            _TooDeep)):
            problem = getattr(exc, "problem", None) or str(exc)
            mark = getattr(exc, "problem_mark", None)
            where = f" (at column {mark.column + 1} of the value)" if mark is not None else ""
            raise ConfigError(f"--set {shown(text)}: {problem}{where}") from None
        parsed = value
    if isinstance(parsed, str) and re.search(r"\s#", value) and parsed != value.strip() \
            and not value.strip().startswith(("'", "\"")):
        # YAML read " #..." as a comment ("Reply with #### N" became "Reply with"): a value
        # on the command line has no comments, so the text is taken as written
        parsed = value.strip()
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
                    raise ConfigError(f"--set {shown(text)}: {'.'.join(path[:i])} is a list of "
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


def _parent(data: dict, dotted: str) -> tuple[dict | None, str]:
    """The mapping that holds ``dotted``'s last part in ``data`` (None where a section on the
    way is missing or not a mapping), and that part."""
    *sections, name = dotted.split(".")
    node = data
    for part in sections:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), name


def drop_bound_keys(data: dict, overrides: list[str], bound: dict[str, tuple[str, ...]]) -> dict:
    """Remove from ``data`` (a config file's contents, before ``overrides`` are applied) the
    keys bound to a key that an override changes: for ``bound = {"data.source":
    ("data.mixture",)}``, ``--set data.source=logic`` on a file with ``data.source:
    arithmetic`` drops the file's arithmetic ``data.mixture`` (the new source's default
    applies) unless an override sets ``data.mixture`` too. An override that repeats the
    file's value changes nothing. Returns ``data``, changed in place."""
    parsed = {".".join(path): value for path, value in map(parse_override, overrides)}
    for key, dependents in bound.items():
        node, name = _parent(data, key)
        if key not in parsed or (node is not None and node.get(name) == parsed[key]):
            continue
        for dependent in dependents:
            dep_node, dep_name = _parent(data, dependent)
            if dependent not in parsed and dep_node is not None:
                dep_node.pop(dep_name, None)
    return data


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The section model a field's annotation holds: ``X`` or an optional section ``X | None``
    (e.g. ``env``); None for anything else."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return _model_in(args[0])
    return None


def _section_model(model: type[BaseModel], path: tuple) -> type[BaseModel] | None:
    """The section model at ``path`` under ``model`` (``()`` is ``model`` itself), or None
    when ``path`` does not lead to a section (a plain field, a list item, a dict key)."""
    current: Any = model
    for part in path:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return None
        current = _model_in(fields[part].annotation)
    return current


def _known_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    # The fields valid at the level of the error location.
    section = _section_model(model, tuple(str(p) for p in loc[:-1]))
    return list(section.model_fields) if section is not None else []


def field_paths(model: type[BaseModel]) -> dict[str, list[str]]:
    """Every field of ``model`` and of its sections (nested models, walked recursively; not
    list items): leaf name -> the dotted paths where it is a field, e.g. ``"kl_coef" ->
    ["algo.kl_coef"]``, ``"learning_rate" -> ["sft.learning_rate", "grpo.learning_rate"]``."""
    out: dict[str, list[str]] = {}

    def walk(section: type[BaseModel], prefix: str) -> None:
        for name, field in section.model_fields.items():
            out.setdefault(name, []).append(prefix + name)
            sub = _model_in(field.annotation)
            if sub is not None:
                walk(sub, f"{prefix}{name}.")

    walk(model, "")
    return out


def _unknown_key(model: type[BaseModel], loc: tuple) -> str:
    """The message of an unknown key at ``loc``: where the name is a field in another section
    (``kl_coef`` at the top level -> ``algo.kl_coef``), what another trainer's name is called
    here (the model's ``foreign_keys``, e.g. TRL's ``beta``), else the closest valid name."""
    name, parent = str(loc[-1]), tuple(str(p) for p in loc[:-1])
    here = "at the top level" if not parent else f"in {'.'.join(parent)}"
    elsewhere = [p for p in field_paths(model).get(name, []) if p != ".".join((*parent, name))]
    if elsewhere:
        return f"unknown key {here}; did you mean {_alternatives(elsewhere)}?"
    foreign = getattr(model, "foreign_keys", {})
    if name in foreign:
        return f"unknown key; {foreign[name]}"
    close = difflib.get_close_matches(name, _known_fields(model, loc), n=1)
    if close:
        return f"unknown key; did you mean '{close[0]}'?"
    paths = field_paths(model)
    close = difflib.get_close_matches(name, list(paths), n=1, cutoff=0.8)
    if close:
        return f"unknown key {here}; did you mean {_alternatives(paths[close[0]])}?"
    return "unknown key"


def _alternatives(paths: list[str], most: int = 3) -> str:
    more = f" (or one of {len(paths) - most} more)" if len(paths) > most else ""
    return " or ".join(paths[:most]) + more


def override_for(path: tuple[str, ...], overrides: list[str]) -> str | None:
    """The last ``--set`` override (its text) that set the field at ``path``: its key is the
    field, a section or dict above it, or a value inside it. None when no override did."""
    for text in reversed(overrides):
        key = tuple(parse_override(text)[0])
        if path[:len(key)] == key or key[:len(path)] == path:
            return text
    return None


def _mentioned(name: str, message: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message) is not None


def _blame(model: type[BaseModel], loc: tuple, message: str, source: str,
           overrides: list[str]) -> str:
    """Who made the problem at ``loc``: the last ``--set`` override that set the field, a
    section or dict above it or a value inside it, else the file (``source``).

    A check of a whole section (a model validator: ``loc`` is the section, the message names
    the fields) blames an override of that section only when the message names the
    override's key; a check of the whole config that names its field first
    (``algo.loss_agg: ...``) is blamed like an error at that field. An override of an
    unrelated key is never blamed: the problem is then the file's."""
    path = tuple(str(p) for p in loc)
    if _section_model(model, path) is model:  # a whole-config check: "field.path: message"
        head = re.match(r"(?:Value error, )?([A-Za-z_][\w.]*):", message)
        if head:
            path = tuple(head.group(1).split("."))
    section = _section_model(model, path) is not None
    for text in reversed(overrides):  # the last override of a key is the one that counts
        key = tuple(parse_override(text)[0])  # already validated by apply_overrides
        if path[:len(key)] == key:  # the override set this field or a section / dict above it
            return f"--set {shown(text)}"
        if key[:len(path)] == path and (not section or _mentioned(key[-1], message)):
            return f"--set {shown(text)}"
        if _mentioned(".".join(key), message):
            return f"--set {shown(text)}"
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
    ``source`` is the ``--set`` override behind the problem when there is one, else the file.
    An unknown key names the right place for it when it is a field elsewhere (``kl_coef`` ->
    ``algo.kl_coef``) or another trainer's name for an rlvr field (``model.foreign_keys``)."""
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        message = error["msg"]
        origin = _blame(model, loc, message, source, overrides or [])
        where = ".".join(str(p) for p in loc) or "(top level)"
        if error["type"] == "extra_forbidden":
            message = _unknown_key(model, loc)
        elif error["type"] == "value_error" and isinstance(error.get("input"), dict):
            # a check of a whole section (or config): its input is the section's dict, not
            # worth printing; the message names the field it is about ("data.path: ...")
            where, message = _section_check(model, loc, message.removeprefix("Value error, "))
        elif "input" in error and error["type"] != "missing":
            got = repr(error["input"])  # a 4000-digit number is named by its start and size
            got = got if len(got) <= 200 else f"{got[:80]}... ({len(got)} characters)"
            message += f" (got {got})"
        lines.append(f"{origin}: {where}: {message}")
    return "\n".join(lines)


def load_config(model: type[M], path: str | Path | None = None,
                overrides: list[str] | None = None, section: str | None = None) -> M:
    """Build ``model`` from an optional YAML file and ``--set`` overrides.

    Args:
        model: the pydantic model class (``extra="forbid"`` so typos are caught).
        path: YAML file; ``None`` starts from the model's defaults.
        overrides: ``KEY=VALUE`` strings applied after the file; one that changes a key of
            ``model.bound_keys`` first drops the file's keys bound to it
            (:func:`drop_bound_keys`).
        section: if given and present in the file, only that top-level key is used.

    Raises:
        ConfigError: unreadable file, invalid YAML, or validation errors (all listed).
    """
    data: dict = {}
    source = str(path) if path is not None else "config"
    if path is not None:
        try:
            loaded = yaml_text(read_config_text(path))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from None
        if loaded is None or loaded == {}:
            # an empty (or truncated) file would silently run the built-in defaults, which
            # are not the default preset a user expects
            raise ConfigError(f"{path}: holds no settings (an empty or all-comment file); "
                              f"leave --config out for the default preset, or give settings")
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level")
        data = loaded or {}
        if section is not None and isinstance(data.get(section), dict):
            data = data[section]
    drop_bound_keys(data, overrides or [], getattr(model, "bound_keys", {}))
    apply_overrides(data, overrides or [])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, model, source, overrides)) from None

"""Name -> function registries of the reward pipeline (R1).

A task type is served by three pluggable parts, each registered under a name so that a new task
never touches the training loop (open-r1 style: one small function, one decorator):

- a **verifier** ``(completion: str, reference: Any, **options) -> Verdict`` that extracts the
  final answer (its parser) and judges it against the reference;
- a **format rule** ``(completion: str, **options) -> float`` in [0, 1];
- an **aggregator** ``(components: dict[str, float], weights: dict[str, float]) -> float``.

Example::

    @register_verifier("math")
    def math_outcome(completion: str, reference: str, **options) -> Verdict: ...
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Callable, Protocol

from rlvr.rewards.types import Verdict


class Verifier(Protocol):
    def __call__(self, completion: str, reference: Any, **options: Any) -> Verdict: ...


FormatRule = Callable[..., float]
Aggregator = Callable[[dict[str, float], dict[str, float]], float]

VERIFIERS: dict[str, Verifier] = {}
FORMAT_RULES: dict[str, FormatRule] = {}
AGGREGATORS: dict[str, Aggregator] = {}
# task type -> name of its default format rule
DEFAULT_FORMAT_RULE: dict[str, str] = {}
# task type -> its verifier's wall-time bound in seconds, when not RewardConfig.timeout_s
DEFAULT_TIMEOUT_S: dict[str, float] = {}
# task type -> the dataclass of its verifier's keyword options (checked when a config loads)
VERIFIER_OPTIONS: dict[str, type] = {}
# verifier name -> its batch form (see register_batch_verifier)
BATCH_VERIFIERS: dict[str, Callable[[list[tuple[str, Any, dict]]], list]] = {}


def _register(table: dict, kind: str, name: str) -> Callable:
    def decorator(fn):
        if name in table and table[name] is not fn:
            raise ValueError(f"{kind} {name!r} is already registered ({table[name]!r})")
        table[name] = fn
        return fn

    return decorator


def register_verifier(task_type: str, *, format_rule: str | None = None,
                      timeout_s: float | None = None, options: type | None = None) -> Callable:
    """Register ``fn`` as the outcome verifier of ``task_type``.

    Args:
        task_type: the value of a record's ``task_type`` field, e.g. ``"math"``.
        format_rule: name of the format rule used for this task type unless the config picks
            another one.
        timeout_s: the wall-time bound of one call in seconds unless
            ``reward.timeout_overrides_s`` names the task type (default:
            ``reward.timeout_s``); for verifiers whose first call in a worker imports a
            library.
        options: the dataclass whose fields are the verifier's keyword options: a config's
            ``reward.verifier_options.<task_type>`` is then checked against its field names and
            their defaults' types when it loads, instead of failing every call.

    Raises:
        ValueError: if another function is already registered under ``task_type``.
    """
    if options is not None:
        VERIFIER_OPTIONS[task_type] = options
    if format_rule is not None:
        DEFAULT_FORMAT_RULE[task_type] = format_rule
    if timeout_s is not None:
        DEFAULT_TIMEOUT_S[task_type] = timeout_s
    return _register(VERIFIERS, "verifier", task_type)


def register_batch_verifier(name: str) -> Callable:
    """Register ``fn(items) -> list[Verdict | None]`` as the batch form of verifier ``name``.

    The reward pipeline calls it, in its own process, with every ``(completion, reference,
    options)`` of a batch that ``name`` verifies, before it starts the verifier pool; an item
    it answers ``None`` for goes to the pool as usual. It is for verifiers that send work
    elsewhere in batches (reasoning-gym's untrusted scorers go to the sandbox) and must bound
    its own time.

    Raises:
        ValueError: if another function is already registered under ``name``.
    """
    return _register(BATCH_VERIFIERS, "batch verifier", name)


def register_format_rule(name: str) -> Callable:
    """Register a format rule ``(completion, **options) -> float in [0, 1]`` under ``name``."""
    return _register(FORMAT_RULES, "format rule", name)


def register_aggregator(name: str) -> Callable:
    """Register an aggregator ``(components, weights) -> float`` under ``name``."""
    return _register(AGGREGATORS, "aggregator", name)


def _lookup(table: dict, kind: str, name: str):
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table)) or "none"
        raise KeyError(f"unknown {kind} {name!r}; registered: {known}") from None


def get_verifier(task_type: str) -> Verifier:
    """The verifier registered for ``task_type``. Raises ``KeyError`` naming the known types."""
    _load_builtins()
    return _lookup(VERIFIERS, "task_type", task_type)


def get_format_rule(name: str) -> FormatRule:
    """The format rule called ``name``. Raises ``KeyError`` naming the known rules."""
    _load_builtins()
    return _lookup(FORMAT_RULES, "format rule", name)


def get_aggregator(name: str) -> Aggregator:
    """The aggregator called ``name``. Raises ``KeyError`` naming the known aggregators."""
    _load_builtins()
    return _lookup(AGGREGATORS, "aggregator", name)


def task_types() -> list[str]:
    """Names of all registered task types."""
    _load_builtins()
    return sorted(VERIFIERS)


_BUILTINS = ("rlvr.rewards.builtin",)


def _load_builtins() -> None:
    # Importing the built-in modules runs their decorators; imported by name at the first
    # lookup, so that importing the registry alone stays cheap, free of cycles and registers
    # nothing (a task module registers nothing into the reward registry at import).
    for module in _BUILTINS:
        importlib.import_module(module)


def load_plugins(modules: tuple[str, ...] | list[str]) -> None:
    """Import user modules whose ``@register_*`` decorators add task types, format rules or
    aggregators. Imports are cached, so calling this per job is cheap.

    Raises:
        ImportError: a module cannot be imported (its name is in the message).
    """
    if modules:
        add_working_directory()
    for module in modules:
        importlib.import_module(module)


def add_working_directory() -> str:
    """Put the working directory at the end of ``sys.path`` (once) and return it: a module
    next to the user's config (reward plugins, ``verifiers`` environment modules), in the
    directory ``rlvr`` runs from, must import from the ``rlvr`` console script too, whose
    ``sys.path`` lacks the working directory."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    return cwd

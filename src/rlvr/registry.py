"""One registry type: named entries of one kind, each with the typed metadata of its kind.

Every pluggable part of rlvr is selected by name from a :class:`Registry`: advantage estimators,
policy losses, KL estimators and loss aggregations (:mod:`rlvr.algo.registry`), verifiers,
format rules and reward aggregators (:mod:`rlvr.rewards.registry`), task sources
(:mod:`rlvr.tasks.registry`), rollout engines (:mod:`rlvr.rollout.engine`), environments
(:mod:`rlvr.envs.registry`), tools (:mod:`rlvr.tools.registry`) and the test-time aggregators of
``rlvr eval`` (:mod:`rlvr.eval.metrics`). A kind declares what an entry records beside the
registered object as a frozen dataclass (its *metadata*); :meth:`Registry.register` builds it
from the decorator's keywords, so a misspelt or missing keyword fails at registration::

    @dataclass(frozen=True)
    class EngineMeta:
        device: str = "cpu"

    ENGINES: Registry[Callable, EngineMeta] = Registry("rollout engine", EngineMeta,
                                                      field="rollout.engine")

    @ENGINES.register("torch")
    def torch_engine(model, **options): ...

    ENGINES.get("torch")             # the function
    ENGINES.entry("torch").meta      # EngineMeta(device='cpu')
    ENGINES.get("trch")              # KeyError: rollout.engine: unknown rollout engine 'trch';
                                     # did you mean 'torch'? registered: torch

Built-in entries are registered by plain imports of their modules (the package ``__init__`` or
the registry's owning module imports them at top level), so the import contracts see every
edge. An entry whose implementation imports something heavy (sympy, the sandbox) or optional
is declared with :meth:`Registry.lazy`: its name and metadata are registered at once (a config
naming it validates, descriptions list it), and its module is imported by a loader function
(a plain ``import`` inside it, which the import contracts see too) on the first
:meth:`Registry.get`. User entries register when their module is imported: :func:`load_plugins`
imports the modules a config's ``plugins`` list names.

This module imports nothing from rlvr, so every layer may use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
M = TypeVar("M")


@dataclass(frozen=True)
class NoMeta:
    """The metadata of a kind whose entries record nothing beside the registered object."""


class _Pending:
    """The object of a :meth:`Registry.lazy` entry until its loader has run."""

    __slots__ = ("loader",)

    def __init__(self, loader: Callable[[], object]) -> None:
        self.loader = loader

    def __repr__(self) -> str:
        return f"<not loaded yet: {getattr(self.loader, '__qualname__', self.loader)}>"


@dataclass(frozen=True)
class Entry(Generic[T, M]):
    """One registered object.

    Attributes:
        name: the registry key, what a config selects.
        obj: the registered object (a function, a class or an instance, per kind).
        meta: what the kind records beside it (the registry's metadata dataclass).
    """

    name: str
    obj: T
    meta: M


def did_you_mean(name: object, known: Iterator[str] | list[str], cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the registered name closest to ``name`` (difflib's ratio
    at least ``cutoff``), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


class Registry(Generic[T, M]):
    """A named table of objects of one kind (e.g. ``"advantage estimator"``).

    Args:
        kind: what is registered, in words; error messages use it.
        meta: the frozen dataclass of what an entry records beside the object; its fields
            with no default are required keywords of :meth:`register`. Default
            :class:`NoMeta`: nothing.
        field: the config field that selects from this registry (``"algo.advantage"``);
            unknown-name errors start with it. None: the registry is not a config field.
        error: the exception class of an unknown name (a ``KeyError`` by default).
        ordered: :meth:`names` lists names in registration order (the built-ins first)
            instead of sorted.
        identity: what makes two registrations the same one (re-registering it is allowed,
            e.g. a module imported twice): default the object itself; a task source's class
            (its instance is registered), a tool's function.
    """

    def __init__(self, kind: str, meta: type[M] = NoMeta, *, field: str | None = None,
                 error: type[Exception] = KeyError, ordered: bool = False,
                 identity: Callable[[T], object] | None = None) -> None:
        if not (isinstance(meta, type) and dataclasses.is_dataclass(meta)):
            raise TypeError(f"{kind} registry: meta must be a dataclass, got {meta!r}")
        self.kind, self.meta_type, self.field = kind, meta, field
        self.error, self.ordered = error, ordered
        self._identity = identity or (lambda obj: obj)
        self._table: dict[str, Entry[T, M]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[T], T]:
        """Decorator registering its argument under ``name`` with metadata ``meta`` (the
        keywords of the kind's metadata dataclass); returns the argument unchanged.

        Raises:
            TypeError: a keyword the kind does not record, a required one missing, or a
                ``name`` that is not a string.
            ValueError: ``name`` is blank, or another object is already registered under it.
        """
        record = self.make_meta(name, **meta)

        def decorator(obj: T) -> T:
            self.add(name, obj, record)
            return obj

        return decorator

    def make_meta(self, name: str, **meta: Any) -> M:
        """The kind's metadata for entry ``name`` built from ``meta``.

        Raises:
            TypeError: a keyword the kind does not record, or a required one missing (the
                message names the entry, the keyword and what the kind takes).
        """
        fields = dataclasses.fields(self.meta_type)
        names = [f.name for f in fields]
        unknown = sorted(set(meta) - set(names))
        missing = [f.name for f in fields if f.name not in meta
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if unknown or missing:
            takes = ", ".join(names) or "nothing but the object"
            problem = (f"does not take {', '.join(unknown)}" if unknown
                       else f"needs {', '.join(missing)}")
            raise TypeError(f"{self.kind} {name!r}: a {self.kind} entry {problem} "
                            f"(it takes: {takes})")
        return self.meta_type(**meta)

    def add(self, name: str, obj: T, meta: M | None = None) -> T:
        """Register ``obj`` under ``name`` with ``meta`` (default: the kind's metadata with
        every default); returns ``obj``. Registering the same object again replaces its
        metadata (a module imported twice); registering the object of a :meth:`lazy` entry
        (its loader imported the module) fills the entry in.

        Raises:
            TypeError: ``meta`` is not the kind's metadata dataclass.
            TypeError: ``name`` is not a string.
            ValueError: ``name`` is blank, another object is already
                registered under it, or ``name`` was declared :meth:`lazy` with other
                metadata.
        """
        self._check_name(name)
        if meta is None:
            meta = self.make_meta(name)
        if not isinstance(meta, self.meta_type):
            raise TypeError(f"{self.kind} {name!r}: metadata must be a "
                            f"{self.meta_type.__name__}, got {type(meta).__name__}")
        existing = self._table.get(name)
        if existing is not None and isinstance(existing.obj, _Pending):
            if existing.meta != meta:
                raise ValueError(f"{self.kind} {name!r} registers {meta!r}, but was declared "
                                 f"with {existing.meta!r}")
        elif existing is not None and self._identity(existing.obj) is not self._identity(obj):
            raise ValueError(f"{self.kind} {name!r} is already registered ({existing.obj!r})")
        self._table[name] = Entry(name, obj, meta)
        return obj

    def lazy(self, name: str, loader: Callable[[], object], **meta: Any) -> None:
        """Declare ``name`` with its metadata now and its object later: the first
        :meth:`get` / :meth:`entry` calls ``loader()``, which imports the module whose
        decorator registers the object (with the same metadata). For built-ins whose module
        imports something heavy or optional: names and metadata are known (configs validate,
        descriptions list them) without importing it.

        Raises:
            TypeError: as :meth:`make_meta`, or ``name`` is not a string.
            ValueError: ``name`` is blank or already registered.
        """
        self._check_name(name)
        record = self.make_meta(name, **meta)
        if name in self._table:
            raise ValueError(f"{self.kind} {name!r} is already registered "
                             f"({self._table[name].obj!r})")
        self._table[name] = Entry(name, _Pending(loader), record)

    def _check_name(self, name: object) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{self.kind} name {name!r}: expected a non-empty string")
        if not name.strip():
            raise ValueError(f"{self.kind} name {name!r}: expected a non-empty string")

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a test's or a plugin's entry); unknown names are ignored."""
        self._table.pop(name, None)

    def entry(self, name: str, field: str | None = None) -> Entry[T, M]:
        """The :class:`Entry` registered under ``name``.

        Args:
            field: the config field that named it, for the message (default: the registry's).

        Raises:
            KeyError: (or the registry's ``error`` class) an unknown name; the message is
                :meth:`unknown_message`.
            RuntimeError: a :meth:`lazy` entry whose loader registered nothing.
        """
        try:
            entry = self._table[name]
        except (KeyError, TypeError):
            raise self.error(self.unknown_message(name, field)) from None
        if isinstance(entry.obj, _Pending):
            entry.obj.loader()
            entry = self._table.get(name, entry)
            if isinstance(entry.obj, _Pending):  # a broken loader, not a bad argument
                raise RuntimeError(f"{self.kind} {name!r}: its loader "
                                   f"{entry.obj.loader!r} registered nothing")
        return entry

    def get(self, name: str, field: str | None = None) -> T:
        """The object registered under ``name``.

        Raises:
            KeyError: as :meth:`entry`.
        """
        return self.entry(name, field).obj

    def meta(self, name: str) -> M:
        """The metadata of ``name`` (a :meth:`lazy` entry's without loading it).

        Raises:
            KeyError: as :meth:`entry`.
        """
        try:
            return self._table[name].meta
        except (KeyError, TypeError):
            raise self.error(self.unknown_message(name)) from None

    def unknown_message(self, name: object, field: str | None = None) -> str:
        """The message for an unregistered ``name``: the config field (``field``, else the
        registry's), the closest registered name and all of them, e.g. ``"algo.loss_agg:
        unknown loss aggregation 'dapo2'; did you mean 'dapo'? registered: bnpo, dapo,
        dr_grpo, grpo"``."""
        where = field if field is not None else self.field
        known = self.names()
        hint = did_you_mean(name, known) or ";"
        return (f"{where + ': ' if where else ''}unknown {self.kind} {name!r}{hint} "
                f"registered: {', '.join(known) or 'none'}")

    def check(self, name: object, field: str | None = None) -> None:
        """Raise ``ValueError`` with :meth:`unknown_message` unless ``name`` is registered
        (what a config validator calls)."""
        if name not in self:
            raise ValueError(self.unknown_message(name, field))

    def names(self) -> list[str]:
        """The registered names: sorted, or in registration order for an ``ordered``
        registry."""
        return list(self._table) if self.ordered else sorted(self._table)

    def one_of(self) -> str:
        """``"one of: a, b, c"`` (the registered names, as :meth:`names`): the generated part
        of a config field's description."""
        return "one of: " + ", ".join(f"`{n}`" for n in self.names())

    def entries(self) -> list[Entry[T, M]]:
        """Every entry, in :meth:`names` order (:meth:`lazy` ones loaded)."""
        return [self.entry(n) for n in self.names()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._table)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def load_plugins(modules: tuple[str, ...] | list[str]) -> None:
    """Import user modules whose decorators register entries (verifiers, format rules,
    aggregators, task sources, environments, tools, algorithm variants). Imports are cached,
    so calling this per job is cheap.

    Raises:
        ImportError: a module cannot be imported (its name is in the message).
    """
    if modules:
        add_working_directory()
    for module in modules:
        importlib.import_module(module)


def add_working_directory() -> str:
    """Put the working directory at the end of ``sys.path`` (once) and return it: a module
    next to the user's config (plugins, ``verifiers`` environment modules), in the directory
    ``rlvr`` runs from, must import from the ``rlvr`` console script too, whose ``sys.path``
    lacks the working directory."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    return cwd

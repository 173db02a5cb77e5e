"""Task sources by name: what ``data.source`` of a run config (and ``rlvr eval --tasks``)
accepts.

A source is one :class:`TaskSource` subclass registered with :func:`register_source`. It
declares what the rest of the code would otherwise check by name: whether it is generated
in-process (and so needs no data path), how it reads a file of its format, whether a file has
its own train / validation splits, its default instruction and generator levels. The config,
the run and the CLI ask the registry (:data:`SOURCES`, a :class:`rlvr.registry.Registry`).
Adding a generated source is one decorated generator function (its keywords are the
:class:`TaskSource` attributes)::

    from rlvr.tasks.registry import register_source

    @register_source("primes", default_mixture="small")
    def primes(mixture, n, *, seed, split, unique=True):
        return [...]  # rlvr.records.Task list

and a source that reads files one decorated class::

    @register_source
    class Lines(TaskSource):
        name = "lines"

        def read(self, path, split):
            return [...]

The built-in sources are registered by :mod:`rlvr.tasks.builtin_sources`, which the package
:mod:`rlvr.tasks` imports, so every lookup sees them. This module imports no source, so
:mod:`rlvr.tasks.sources` (which looks sources up) can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rlvr.records import Task
from rlvr.registry import Registry
from rlvr.tasks.files import DataError


class TaskSource:
    """One task source. Subclasses set ``name`` and override what applies to them.

    Attributes:
        name: the ``data.source`` value.
        generated: tasks are made in-process by :meth:`generate` from ``data.mixture`` (no
            ``data.path`` needed; with one, :meth:`read` reads a task file instead).
        own_splits: a data path holds the source's own train and validation splits
            (:meth:`read` with ``split="train"`` / ``"validation"``); otherwise validation is
            a seeded hold-out of the file.
        splits_in_one_file: a single file holds every split (MBPP), so a file given to
            ``rlvr eval`` is evaluated by its validation split, not whole.
        empty_split: message (``{split}``: train / validation) when one of the own splits
            holds no task; ``None``: no such check.
        default_mixture: ``data.mixture`` when the config leaves it out (generated sources).
        instruction: the default instruction; ``None`` stands for the general one
            (:data:`rlvr.train.config.DEFAULT_INSTRUCTION`); ``""`` for none (prompts that
            state their own answer format).
        sft_mixture: ``sft.mixture`` draws the SFT examples from this source's generator.
        verifier_defaults: task type -> verifier options this source's tasks need unless the
            config sets them (``reward.verifier_options``).
        convert_splits: the ``--split`` values ``rlvr data convert`` accepts for a file of
            this (foreign) format, read by :meth:`read`; empty: nothing to convert (generated
            sources, the task record format itself).
    """

    name: ClassVar[str]
    generated: ClassVar[bool] = False
    own_splits: ClassVar[bool] = False
    splits_in_one_file: ClassVar[bool] = False
    empty_split: ClassVar[str | None] = None
    default_mixture: ClassVar[str | None] = None
    instruction: ClassVar[str | None] = None
    sft_mixture: ClassVar[bool] = False
    verifier_defaults: ClassVar[dict[str, dict]] = {}
    convert_splits: ClassVar[tuple[str, ...]] = ()

    def read(self, path: Path, split: str | None) -> list[Task]:
        """Every task of ``path`` (a file or directory) in this source's format, in file
        order. ``split``: ``"train"`` / ``"validation"`` for :attr:`own_splits` sources;
        ``None``: the whole file (a directory: its held-out part).

        Raises:
            rlvr.tasks.sources.DataError: missing file or malformed record (naming them).
        """
        raise DataError(f"data.source {self.name!r} reads no data files")

    def generate(self, mixture: str, n: int, *, seed: int, split: str,
                 unique: bool = True) -> list[Task]:
        """``n`` tasks of ``split`` (train / validation: disjoint) from the generator levels
        ``mixture``, deterministically from ``seed`` (``unique=False``: repeats allowed).
        Only for :attr:`generated` sources."""
        raise NotImplementedError(f"data.source {self.name!r} is not generated")

    def check_mixture(self, mixture: str) -> None:
        """Raise ``ValueError`` / ``KeyError`` (naming the known levels) unless ``mixture``
        names this source's generator levels. Nothing to check by default."""


#: The registered sources (an instance of each class), in registration order.
SOURCES: Registry[TaskSource, Any] = Registry(
    "task source", field="data.source", ordered=True,
    # one source: the same class, or the same generator function (a module imported twice)
    identity=lambda source: getattr(source, "_generator", None) or type(source))

_ATTRIBUTES = ("generated", "own_splits", "splits_in_one_file", "empty_split",
               "default_mixture", "instruction", "sft_mixture", "verifier_defaults",
               "convert_splits")


def register_source(cls: type[TaskSource] | str, /, **attributes: Any) -> Any:
    """Register a task source; two forms.

    - ``@register_source`` on a :class:`TaskSource` subclass: an instance of it under
      ``cls.name``; returns the class.
    - ``@register_source(name, **attributes)`` on a generator function ``fn(mixture, n, *,
      seed, split, unique=True) -> list[Task]``: a generated source (``generated=True``)
      whose :meth:`TaskSource.generate` is ``fn``; ``attributes`` are :class:`TaskSource`
      attributes (``default_mixture``, ``instruction``, ...) and ``check_mixture``, a
      function ``(mixture) -> None`` that raises for unknown levels. Returns ``fn``.

    Raises:
        TypeError: an attribute :class:`TaskSource` does not have.
        ValueError: another class is already registered under that name.
    """
    if isinstance(cls, type):
        if attributes:
            raise TypeError("register_source on a class takes no keywords (set them as class "
                            "attributes)")
        SOURCES.add(cls.name, cls())
        return cls
    name = cls
    unknown = sorted(set(attributes) - set(_ATTRIBUTES) - {"check_mixture"})
    if unknown:
        raise TypeError(f"task source {name!r}: a task source does not take "
                        f"{', '.join(unknown)} (it takes: {', '.join(_ATTRIBUTES)}, "
                        f"check_mixture)")

    def decorator(fn: Callable[..., list[Task]]) -> Callable[..., list[Task]]:
        body: dict[str, Any] = {"generated": True, **attributes, "name": name,
                                "__doc__": fn.__doc__, "__module__": fn.__module__,
                                "_generator": staticmethod(fn),
                                "generate": lambda self, mixture, n, **kw: fn(mixture, n, **kw)}
        check = attributes.get("check_mixture")
        if check is not None:
            body["check_mixture"] = lambda self, mixture: check(mixture)
        register_source(type(f"{fn.__name__}_source", (TaskSource,), body))
        return fn

    return decorator


def unregister_source(name: str) -> None:
    """Remove a registered source (tests, plugins that replace one); unknown names pass."""
    SOURCES.unregister(name)


def source_names() -> list[str]:
    """The registered names, in registration order (the built-ins first)."""
    return SOURCES.names()


def generated_names() -> list[str]:
    """The registered sources made in-process (:attr:`TaskSource.generated`)."""
    return [entry.name for entry in SOURCES.entries() if entry.obj.generated]


def is_source(name: object) -> bool:
    """``name`` is a registered source name (any value: config input not yet validated)."""
    return name in SOURCES


def task_source(name: str) -> TaskSource:
    """The source registered under ``name``.

    Raises:
        KeyError: unknown name; the message lists the registered ones and the closest match.
    """
    return SOURCES.get(name)


def needs_data_path(name: str) -> bool:
    """Whether ``data.source: name`` must be given a ``data.path`` (every source that is not
    generated in-process). Unknown names need one (they are refused elsewhere)."""
    return not (is_source(name) and SOURCES.get(name).generated)


def in_process(data) -> bool:
    """Whether a single-source ``data`` section (``source``, ``path``) is generated here: a
    generated source without a task file."""
    return not needs_data_path(data.source) and not data.path


def splits_in_one_file(name: object) -> bool:
    """:attr:`TaskSource.splits_in_one_file` of ``name``; False for unknown names."""
    return is_source(name) and SOURCES.get(name).splits_in_one_file

"""Task sources by name: what ``data.source`` of a run config (and ``rlvr eval --tasks``)
accepts.

A source is one :class:`TaskSource` subclass registered with :func:`register_source`. It
declares what the rest of the code would otherwise check by name: whether it is generated
in-process (and so needs no data path), how it reads a file of its format, whether a file has
its own train / validation splits, its default instruction and generator levels. The config,
the run and the CLI ask the registry; adding a source is one decorated class::

    from rlvr.tasks.registry import TaskSource, register_source

    @register_source
    class Primes(TaskSource):
        name = "primes"
        generated = True
        default_mixture = "small"

        def generate(self, mixture, n, *, seed, split, unique=True):
            return [...]  # rlvr.records.Task list

The built-in sources are registered by :mod:`rlvr.tasks.builtin_sources`, which the package
:mod:`rlvr.tasks` imports, so every lookup sees them. This module imports no source, so
:mod:`rlvr.tasks.sources` (which looks sources up) can import it.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import ClassVar

from rlvr.records import Task
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


_SOURCES: dict[str, TaskSource] = {}


def register_source(cls: type[TaskSource]) -> type[TaskSource]:
    """Class decorator: register an instance of ``cls`` under ``cls.name``; returns ``cls``.

    Raises:
        ValueError: another class is already registered under that name.
    """
    existing = _SOURCES.get(cls.name)
    if existing is not None and type(existing) is not cls:
        raise ValueError(f"task source {cls.name!r} is already registered "
                         f"({type(existing).__name__})")
    _SOURCES[cls.name] = cls()
    return cls


def unregister_source(name: str) -> None:
    """Remove a registered source (tests, plugins that replace one); unknown names pass."""
    _SOURCES.pop(name, None)


def source_names() -> list[str]:
    """The registered names, in registration order (the built-ins first)."""
    return list(_SOURCES)


def generated_names() -> list[str]:
    """The registered sources made in-process (:attr:`TaskSource.generated`)."""
    return [name for name, source in _SOURCES.items() if source.generated]


def is_source(name: object) -> bool:
    """``name`` is a registered source name (any value: config input not yet validated)."""
    return isinstance(name, str) and name in _SOURCES


def task_source(name: str) -> TaskSource:
    """The source registered under ``name``.

    Raises:
        KeyError: unknown name; the message lists the registered ones and the closest match.
    """
    try:
        return _SOURCES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_SOURCES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"unknown task source {name!r}{hint} registered: "
                       f"{', '.join(_SOURCES)}") from None


def needs_data_path(name: str) -> bool:
    """Whether ``data.source: name`` must be given a ``data.path`` (every source that is not
    generated in-process). Unknown names need one (they are refused elsewhere)."""
    return not (is_source(name) and _SOURCES[name].generated)


def in_process(data) -> bool:
    """Whether a single-source ``data`` section (``source``, ``path``) is generated here: a
    generated source without a task file."""
    return not needs_data_path(data.source) and not data.path


def splits_in_one_file(name: object) -> bool:
    """:attr:`TaskSource.splits_in_one_file` of ``name``; False for unknown names."""
    return is_source(name) and _SOURCES[name].splits_in_one_file

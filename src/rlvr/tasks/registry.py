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

The built-in sources are registered at the end of this module, so every lookup sees them.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import ClassVar

from rlvr.records import Task


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
        from rlvr.tasks.sources import DataError

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


# -- the built-in sources (registration order is the order error messages list them) --------


def _task_file(path: Path, task_type: str | None = None) -> list[Task]:
    from rlvr.tasks.sources import load_task_file

    if task_type is not None:
        return load_task_file(path, task_type)
    from rlvr.rewards.registry import task_types

    return load_task_file(path, known_types=set(task_types()))


@register_source
class ArithmeticSource(TaskSource):
    """Integer arithmetic (:mod:`rlvr.tasks.arithmetic`, levels ``PRESETS``); a path is a
    file of generated math tasks (``rlvr data generate``)."""

    name = "arithmetic"
    generated = True
    default_mixture = "2d+-2d"
    sft_mixture = True
    # the questions *are* arithmetic: repeating "81 * 7" must not earn the reward
    verifier_defaults = {"math": {"accept_unevaluated": False}}

    def read(self, path, split):
        return _task_file(path, "math")

    def generate(self, mixture, n, *, seed, split, unique=True):
        from rlvr.tasks.arithmetic import generate

        return generate(mixture, n, seed=seed, split=split, unique=unique)

    def check_mixture(self, mixture):
        from rlvr.tasks.arithmetic import parse_mixture

        parse_mixture(mixture)


@register_source
class LogicSource(TaskSource):
    """Countdown and knights-and-knaves puzzles (:mod:`rlvr.tasks.logic`, levels
    ``LEVELS``). Their questions state their own answer format: no instruction by default
    (the math instruction after a knights-and-knaves puzzle would contradict it)."""

    name = "logic"
    generated = True
    default_mixture = "countdown-3:0.5,kk-3:0.5"
    instruction = ""

    def read(self, path, split):
        return _task_file(path, "logic")

    def generate(self, mixture, n, *, seed, split, unique=True):
        from rlvr.tasks.logic import generate_logic

        return generate_logic(mixture, n, seed=seed, split=split)

    def check_mixture(self, mixture):
        from rlvr.tasks.logic import parse_mixture

        parse_mixture(mixture)


@register_source
class GSM8KSource(TaskSource):
    """GSM8K: a directory with train.jsonl / test.jsonl (validation: test.jsonl), or one
    file."""

    name = "gsm8k"
    own_splits = True
    convert_splits = ("train", "test")  # a directory's file; no split: test.jsonl
    verifier_defaults = {"math": {"accept_unevaluated": False}}

    def read(self, path, split):
        from rlvr.tasks.sources import load_gsm8k

        return load_gsm8k(path, split)


@register_source
class Math500Source(TaskSource):
    """MATH-500 (``problem`` / ``solution`` / ``answer``): a file, or a directory holding
    test.jsonl."""

    name = "math500"
    convert_splits = ("test",)

    def read(self, path, split):
        from rlvr.tasks.sources import load_math500

        return load_math500(path, "test")


@register_source
class JsonlSource(TaskSource):
    """The project's task record format, tasks of any registered task type."""

    name = "jsonl"

    def read(self, path, split):
        return _task_file(path)


@register_source
class HumanEvalSource(TaskSource):
    """HumanEval code tasks (an evaluation set: no train split of its own)."""

    name = "humaneval"
    convert_splits = ("test",)

    def read(self, path, split):
        from rlvr.tasks.code import load_humaneval

        return load_humaneval(path)


@register_source
class MBPPSource(TaskSource):
    """MBPP code tasks: one file holds every split (train = ids 601-974, validation =
    511-600)."""

    name = "mbpp"
    own_splits = True
    splits_in_one_file = True
    convert_splits = ("train", "validation", "test", "prompt")  # no split: every task
    empty_split = "no MBPP tasks in the {split} split (task ids 601-974 / 511-600)"

    def read(self, path, split):
        from rlvr.tasks.code import load_mbpp

        return load_mbpp(path, split)


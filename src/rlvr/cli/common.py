"""What every ``rlvr`` command shares: the stderr console, ``fail`` (``error: ...`` and exit 2),
exit codes, option checks made before any work, and config loading with CLI messages."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from rlvr.configio import ConfigError, load_config
from rlvr.io import OutputError, output_dir_problem, output_file_problem
from rlvr.models.loader import DEFAULT_MODEL, TINY_RANDOM, is_model_name, missing_model_path
from rlvr.registry import load_plugins

err = Console(stderr=True)

EXIT_BAD_INPUT = 2
EXIT_STOPPED = 3  # `rlvr train`: a health check stopped the run (results are still written)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print ``error: message`` to stderr and return the Exit to raise. ``message`` is plain
    text: brackets in it (``pip install 'rlvr[compare]'``, a path) are printed as written."""
    # soft_wrap: a long path is printed whole, not broken across lines at the terminal width
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


PRECISION_HELP = ("Compute precision: auto (bf16 where the CPU / GPU computes it natively, "
                  "else fp32), bf16 or fp32.")


def precision_choice(value: str):
    """Resolve a ``--precision`` value on this machine and print the choice (and any warning)
    to stderr; an unknown value exits 2 naming the option.

    Returns:
        :class:`rlvr.models.precision.PrecisionChoice`.
    """
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.models.precision import resolve_precision

    try:
        choice = resolve_precision(value)
    except ValueError as exc:
        raise fail(f"--precision: {exc}") from None
    err.print(choice.summary(), highlight=False)
    if choice.warning:
        err.print(f"[yellow]warning:[/] {choice.warning}", highlight=False)
    return choice


def default_preset() -> Path | None:
    """The default run config: ``./configs/arithmetic.yaml``, else the one beside the source
    tree (a checkout's ``configs/``), else the copy an installed wheel ships
    (``rlvr/presets/``); None when none exists."""
    package = Path(__file__).resolve().parents[1]
    candidates = [Path("configs/arithmetic.yaml"),
                  package.parents[1] / "configs" / "arithmetic.yaml",
                  package / "presets" / "arithmetic.yaml"]
    return next((c for c in candidates if c.is_file()), None)


def load_run_config(path: Path | None, overrides: list[str]):
    """The :class:`rlvr.train.config.RunConfig` at ``path`` (None: the default preset, named on
    stderr) with ``--set`` ``overrides``; a bad config exits 2 with its message."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.config import RunConfig

    if path is None:  # the default preset: ./configs, else the one beside the source tree
        path = default_preset()
        if path is not None:
            err.print(f"config: {path} (the default preset)")
    try:
        return load_config(RunConfig, path, overrides)
    except ConfigError as exc:
        raise fail(str(exc)) from None


def with_plugins(reward, plugins: list[str]):
    """``reward`` (a RewardConfig) with the ``--plugins`` modules added to its ``plugins``
    (imported now, so their task types are known before any data is read; one that does not
    import exits 2 naming it)."""
    modules = [m.strip() for text in plugins for m in text.split(",") if m.strip()]
    for module in modules:
        try:
            load_plugins([module])
        except ImportError as exc:
            raise fail(f"--plugins: cannot import {module!r} ({exc})") from None
        except Exception as exc:
            raise fail(f"--plugins: importing {module!r} failed: "
                       f"{type(exc).__name__}: {exc}") from None
    merged = list(dict.fromkeys([*reward.plugins, *modules]))
    return reward.model_copy(update={"plugins": merged})


def check_model_name(name: str, option: str) -> None:
    """Fail (exit 2) on a model name that is neither known, a local path nor a hub id, or a
    local path that does not exist."""
    if missing_model_path(name):
        raise fail(f"{option}: {missing_model_path(name)}")
    if not is_model_name(name):
        raise fail(f"{option}: {name!r} is neither a known model ({DEFAULT_MODEL}, "
                   f"{TINY_RANDOM}), a local path nor a hub id")


def check_output_file(path: Path, option: str, *, make_parents: bool = False) -> None:
    """Fail before any work (exit 2, naming the option and the path) when ``path`` cannot be
    written as a file: it is a directory, or its directory is missing (unless
    ``make_parents``) or not writable (:func:`rlvr.io.output_file_problem`)."""
    problem = output_file_problem(path, make_parents=make_parents)
    if problem is not None:
        raise fail(f"{option} {path}: {problem}")


def check_output_dir(path: Path, option: str) -> None:
    """Fail before any work (exit 2, naming the option and the path) when ``path`` cannot be
    created or written as an output directory: it (or an ancestor) is a file, or it is not
    writable (:func:`rlvr.io.output_dir_problem`)."""
    problem = output_dir_problem(path)
    if problem is not None:
        raise fail(f"{option} {path}: {problem}")


@contextmanager
def output_errors():
    """Turn an :class:`~rlvr.io.OutputError` raised in the block (disk full
    while writing an output) into one line on stderr and exit code 1; the outputs written
    before keep their content (every writer is temp-then-rename or cuts back what it
    appended)."""
    try:
        yield
    except OutputError as exc:
        raise fail(str(exc), code=1) from None


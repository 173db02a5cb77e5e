"""Checks made before ``rlvr train`` / ``rlvr sft`` / ``rlvr sweep`` start a run: inputs that
exist, a model name that can load, and a run directory that can take the run."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from rlvr.cli.common import fail
from rlvr.configio import override_for
from rlvr.io import output_dir_problem


def run_dir_option(resume: Optional[Path], output_dir: Optional[Path], run_config) -> str:
    """Where the run directory came from, for messages: ``--resume``, ``--output-dir``,
    ``output_dir`` (the config) or ``the default run directory``."""
    if resume is not None:
        return "--resume"
    if output_dir is not None:
        return "--output-dir"
    return "output_dir" if run_config.output_dir else "the default run directory"


def prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool,
                    option: str = "--output-dir", resumable: bool = True) -> bool:
    """Fail before any work (exit 2, naming ``option`` and the path) on a run directory that
    cannot take this run: a file in its place (or above it), an unwritable location, or a
    directory already holding a run (without ``--resume`` two runs' logs would interleave and
    the old ``sft_model/`` would become a later resume's KL reference). ``--overwrite``
    clears such a directory first (``resumable``: the refusal suggests ``--resume``; `rlvr sft`
    has none). Returns whether this run starts in an empty (or new)
    directory, which :func:`discard_failed_start` may then clear again."""
    if run_dir.exists() and not run_dir.is_dir():
        raise fail(f"{option} {run_dir}: exists and is not a directory (choose another "
                   f"--output-dir)")
    problem = output_dir_problem(run_dir)
    if problem is not None:
        raise fail(f"{option} {run_dir}: cannot write the run directory ({problem})")
    if resume:
        return False
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not overwrite:
            resume_hint = f"continue that run with --resume {run_dir}, " if resumable else ""
            raise fail(f"{run_dir} already holds files (a run?): {resume_hint}run the same "
                       f"command again with --overwrite added to clear it, or choose another "
                       f"--output-dir")
        foreign = foreign_entries(run_dir)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                               if len(foreign) > 5 else "")
            raise fail(f"{option} {run_dir}: --overwrite clears only what rlvr runs write, and "
                       f"this directory also holds {shown}: choose another --output-dir or "
                       f"remove them yourself")
        _clear_dir(run_dir)
    return True


# What `rlvr train` / `sft` / `sweep` write at the top of a run directory (atomic writes' temp
# files are ``.<name>.<random>.tmp``). --overwrite deletes a directory only when it holds
# nothing else, so a mistyped -o (a project folder, `.`) never deletes a user's own files.
RUN_FILES = frozenset({
    "config.yaml", "results.json", "results.md", "metrics.jsonl", "samples.jsonl",
    "validation.jsonl", "validation_samples.jsonl", "completions.jsonl", "alerts.jsonl",
    "sft_results.json", "sft_report.json", "lora_base.json", "no_tool_validation.json",
    "report.html", "accuracy_vs_k.png", "accuracy_vs_tokens.png", "sweep.json", "sweep.md",
    "sweep.png",
})
RUN_DIRS = frozenset({"checkpoints", "sft_model", "tensorboard", "spot_check"})


def foreign_entries(run_dir: Path) -> list[str]:
    """The entries of ``run_dir`` (paths relative to it, sorted) that no rlvr run writes: not
    in :data:`RUN_FILES` / :data:`RUN_DIRS`, not an atomic write's temp file, and not a
    sweep point (a sub-directory holding a run's ``config.yaml`` and only run entries)."""
    foreign = []
    for entry in sorted(run_dir.iterdir()):
        name = entry.name
        if entry.is_dir() and not entry.is_symlink():
            if name in RUN_DIRS:
                continue
            if (entry / "config.yaml").is_file() and not foreign_entries(entry):
                continue
        elif name in RUN_FILES or (name.startswith(".") and name.endswith(".tmp")):
            continue
        foreign.append(name + ("/" if entry.is_dir() else ""))
    return foreign


def _clear_dir(run_dir: Path) -> None:
    for entry in run_dir.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def discard_failed_start(run_dir: Path, fresh: bool) -> None:
    """A run refused for bad input before any training (exit 2) leaves nothing behind in a
    directory it started empty, so the corrected command runs without --overwrite."""
    if fresh and run_dir.is_dir():
        _clear_dir(run_dir)


def check_run_inputs(config, overrides: list[str] = ()) -> None:
    """Fail before any work on inputs that cannot work (exit 2); a value that came from a
    ``--set`` override is named by it."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.models.loader import is_model_name, missing_model_path

    def origin(field: str) -> str:
        text = override_for(tuple(field.split(".")), list(overrides))
        return f"--set {text!r}: " if text else ""

    for field in ("path", "val_path"):
        value = getattr(config.data, field)
        if value and not Path(value).exists():
            raise fail(f"{origin('data.' + field)}data.{field}: {value} does not exist")
    for i, spec in enumerate(config.data.sources):
        for field in ("path", "val_path"):
            value = getattr(spec, field)
            if value and not Path(value).exists():
                raise fail(f"data.sources.{i}.{field}: {value} does not exist")
    name = config.model.name
    if missing_model_path(name):
        raise fail(f"{origin('model.name')}model.name: {missing_model_path(name)}")
    if not is_model_name(name):
        raise fail(f"{origin('model.name')}model.name: {name!r} is neither a known model, a "
                   f"local path nor a hub id")

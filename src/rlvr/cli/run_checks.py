"""Checks made before ``rlvr train`` / ``rlvr sft`` / ``rlvr sweep`` start a run: inputs that
exist, a model name that can load, and a run directory that can take the run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlvr.cli.common import err, fail
from rlvr.configio import override_for
from rlvr.io import make_dirs, output_dir_problem
from rlvr.models.loader import is_model_name, missing_model_path
from rlvr.run_manifest import (
    BOOKKEEPING,
    MANIFEST_NAME,
    Manifest,
    RunDirError,
    RunDirLock,
    unlisted_entries,
)


def run_dir_option(resume: Path | None, output_dir: Path | None, run_config) -> str:
    """Where the run directory came from, for messages: ``--resume``, ``--output-dir``,
    ``output_dir`` (the config) or ``the default run directory``."""
    if resume is not None:
        return "--resume"
    if output_dir is not None:
        return "--output-dir"
    return "output_dir" if run_config.output_dir else "the default run directory"


class RunDir:
    """A run directory an rlvr command writes: locked for the command
    (:class:`rlvr.run_manifest.RunDirLock`), every output recorded in its manifest
    (:class:`rlvr.run_manifest.Manifest`), and, with ``--overwrite``, what an earlier command
    wrote there removed by :meth:`start_writing`, only once the new run's config, data and
    model have loaded (so a refused start deletes nothing). Made by :func:`prepare_run_dir`."""

    def __init__(self, path: Path, lock: RunDirLock, manifest: Manifest, *, resume: bool,
                 overwrite: bool, created: list[Path]):
        self.path, self.lock, self.manifest = path, lock, manifest
        self.resume, self.created = resume, created
        self.pending_clear = overwrite
        self.kept: list[str] = []
        manifest.activate()

    def start_writing(self) -> None:
        """Called once the inputs have loaded, before the first write: with ``--overwrite``,
        remove what the manifest lists (:meth:`rlvr.run_manifest.Manifest.clear`) and say
        what was kept."""
        if not self.pending_clear:
            return
        self.pending_clear = False
        kept_dirs = self.manifest.clear()
        if self.kept or kept_dirs:
            err.print(f"--overwrite: removed what rlvr wrote in {self.path}; kept what it did "
                      f"not write: {_shown(self.kept)}", highlight=False, soft_wrap=True)

    def discard(self) -> None:
        """After a start refused for bad input (exit 2): remove what this command wrote (not
        a resumed run's files, nor, before :meth:`start_writing`, the run ``--overwrite`` was
        to replace), so the corrected command runs without --overwrite; a directory this
        command created is removed again when nothing else is left in it."""
        if not self.resume and not self.pending_clear:
            self.manifest.clear()
        self.manifest.deactivate()
        if (self.path.is_dir() and not self.manifest.files and not self.manifest.dirs
                and not any(e.name not in BOOKKEEPING for e in self.path.iterdir())):
            self.manifest.path.unlink(missing_ok=True)
            _give_back(self.path, self.lock, self.created)
        else:
            self.close()

    def close(self) -> None:
        """Stop recording and release the lock (its file removed: a directory no command is
        writing holds none)."""
        self.manifest.deactivate()
        self.lock.release(remove=True)


@contextmanager
def recorded_output_dir(path: Path, option: str) -> Iterator[RunDir]:
    """Lock ``path`` (another command writing it: exit 2 naming its pid) and record in its
    manifest what the block writes there; for commands that add to an output directory
    (``rlvr eval -o``, ``rlvr sweep -o``): they remove only what a manifest lists
    (:func:`rlvr.run_manifest.remove_written`)."""
    target = prepare_run_dir(path, resume=True, overwrite=False, option=option)
    try:
        yield target
    finally:
        target.close()


def _shown(entries: list[str], most: int = 5) -> str:
    return ", ".join(entries[:most]) + (f" and {len(entries) - most} more"
                                        if len(entries) > most else "")


def prepare_run_dir(run_dir: Path, *, resume: bool, overwrite: bool,
                    option: str = "--output-dir", resumable: bool = True) -> RunDir:
    """Fail before any work (exit 2, naming ``option`` and the path) on a run directory that
    cannot take this run: a file in its place (or above it), an unwritable location, another
    rlvr command writing it (its lock), or, without ``--resume``, a directory already holding
    files (two runs' logs would interleave and the old ``sft_model/`` would become a later
    resume's KL reference: ``resumable`` makes the refusal suggest ``--resume``; `rlvr sft`
    has none).

    ``--overwrite`` removes what rlvr wrote there, as its manifest lists it, and keeps the
    rest; it is refused (nothing removed) when the directory has no manifest (a run of an
    older rlvr, or not a run: the entries are named) or holds a file rlvr did not write at a
    path this run writes (e.g. the user's own ``config.yaml``). The removal waits for
    :meth:`RunDir.start_writing`. Returns the locked, recording :class:`RunDir`.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise fail(f"{option} {run_dir}: exists and is not a directory (choose another "
                   f"--output-dir)")
    problem = output_dir_problem(run_dir)
    if problem is not None:
        raise fail(f"{option} {run_dir}: cannot write the run directory ({problem})")
    try:
        created = make_dirs(run_dir)
        lock = RunDirLock(run_dir)
    except RunDirError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{option} {run_dir}: cannot write the run directory ({exc.strerror})") from None
    try:
        manifest = Manifest.load(run_dir)
        pending = _check_existing(run_dir, manifest, resume=resume, overwrite=overwrite,
                                  option=option, resumable=resumable)
    except BaseException as exc:
        _give_back(run_dir, lock, created)
        if isinstance(exc, RunDirError):
            raise fail(str(exc)) from None
        raise
    run = RunDir(run_dir, lock, manifest or Manifest(run_dir), resume=resume,
                 overwrite=pending, created=created)
    run.kept = unlisted_entries(run_dir, manifest) if pending else []
    return run


def _check_existing(run_dir: Path, manifest: Manifest | None, *, resume: bool, overwrite: bool,
                    option: str, resumable: bool) -> bool:
    """Refuse (:class:`RunDirError`) a directory holding files this start cannot take (see
    :func:`prepare_run_dir`); returns whether ``--overwrite`` has something to remove."""
    if resume or not any(e.name not in BOOKKEEPING for e in run_dir.iterdir()):
        return False
    if not overwrite and manifest is None:
        raise RunDirError(f"{run_dir} already holds files that no rlvr run recorded writing "
                          f"({_shown(unlisted_entries(run_dir, None))}): choose another "
                          f"--output-dir (an empty or new directory)")
    if not overwrite:
        resume_hint = f"continue that run with --resume {run_dir}, " if resumable else ""
        raise RunDirError(f"{run_dir} already holds a run: {resume_hint}run the same command "
                          f"again with --overwrite added to remove what that run wrote (files "
                          f"of yours there are kept), or choose another --output-dir")
    kept = unlisted_entries(run_dir, manifest)
    if manifest is None:
        raise RunDirError(f"{option} {run_dir}: --overwrite removes only what rlvr recorded "
                          f"writing there ({MANIFEST_NAME}), and this directory has no such "
                          f"record (a run of an older rlvr, or not a run), so nothing was "
                          f"removed; it holds {_shown(kept)}: remove them yourself or "
                          f"choose another --output-dir")
    clashes = [e for e in kept if _run_path(e)]
    if clashes:
        raise RunDirError(f"{option} {run_dir}: --overwrite removes only what rlvr wrote, "
                          f"and {_shown(clashes)} (not written by rlvr) would be replaced by "
                          f"this run's own files; nothing was removed: move them away or "
                          f"choose another --output-dir")
    return True


def _give_back(run_dir: Path, lock: RunDirLock, created: list[Path]) -> None:
    """Undo a refused :func:`prepare_run_dir`: release the lock (its file removed) and remove
    the directories it created."""
    lock.release(remove=True)
    for directory in reversed(created):
        try:
            directory.rmdir()
        except OSError:
            break


# Where a run writes (relative to its directory): a file of the user's there would be
# replaced, so --overwrite refuses to start over it. Temp files of atomic writes are
# ``.<name>.<random>.tmp`` beside their file.
RUN_FILES = frozenset({
    "config.yaml", "results.json", "results.md", "metrics.jsonl", "samples.jsonl",
    "validation.jsonl", "validation_samples.jsonl", "completions.jsonl", "alerts.jsonl",
    "sft_results.json", "sft_report.json", "lora_base.json", "no_tool_validation.json",
    "report.html", "accuracy_vs_k.png", "accuracy_vs_tokens.png", "sweep.json", "sweep.md",
    "sweep.png", "sft_checkpoint.pt",
})
RUN_DIRS = frozenset({"checkpoints", "sft_model", "tensorboard", "spot_check", "references"})
# directories whose entries a run replaces whole (a model saved over one moves it aside and
# deletes it)
_REPLACED = {"sft_model": None, "checkpoints": "step-", "references": "step-",
             "spot_check": "step-"}


def _run_path(entry: str) -> bool:
    """``entry`` (relative, a directory ending in ``/``) is at a path a run writes or
    replaces: a top-level run file or a run directory's name as a file, anything inside
    ``sft_model/``, or a ``step-*`` entry of ``checkpoints/``, ``references/``,
    ``spot_check/``."""
    parts = entry.rstrip("/").split("/")
    if len(parts) == 1:
        return parts[0] in RUN_FILES or (parts[0] in RUN_DIRS and not entry.endswith("/"))
    prefix = _REPLACED.get(parts[0], "")
    return prefix is None or (bool(prefix) and parts[1].startswith(prefix))


def check_run_inputs(config, overrides: list[str] = ()) -> None:
    """Fail before any work on inputs that cannot work (exit 2); a value that came from a
    ``--set`` override is named by it."""
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

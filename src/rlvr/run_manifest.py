"""What rlvr wrote in a run directory (its manifest), and the lock that keeps one writer in it.

The manifest, ``DIR/.rlvr-manifest.json``, lists every file and directory an rlvr command
wrote or created in ``DIR`` (paths relative to it), rewritten atomically each time one is
added: ``config.yaml``, the JSONL logs, ``checkpoints/step-N/...``, ``sft_model/...``,
``sft_checkpoint.pt``, ``references/...``, ``tensorboard/events...``, ``results.json``,
reports. While a :class:`Manifest` is active (:meth:`Manifest.activate`) it is told of each
output through :func:`rlvr.io.record_output` (which :func:`rlvr.io.atomic_write`,
:func:`rlvr.io.append_jsonl` and :func:`rlvr.models.loader.save_model` call).

:meth:`Manifest.clear` (``--overwrite``, and a start refused for bad input) removes exactly
the listed paths that still are what rlvr wrote there (a listed file that is now a
directory, or the reverse, is left), plus the temp files of an interrupted atomic write of a
listed file, and never anything else: a directory is removed only once it is empty, so a
file the user put in ``checkpoints/`` keeps it (and the directory).

The lock, ``DIR/.rlvr-lock``, is an ``fcntl.flock`` held by the command writing ``DIR``
(:class:`RunDirLock`); the kernel drops it when that process ends, however it ends (a
``SIGKILL`` too), so a lock is never left stale. A second command writing ``DIR`` is refused
with the holder's pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

from rlvr.io import add_output_recorder, atomic_write, remove_output_recorder

MANIFEST_NAME = ".rlvr-manifest.json"
LOCK_NAME = ".rlvr-lock"
#: rlvr's own bookkeeping in a run directory (never listed in the manifest).
BOOKKEEPING = frozenset({MANIFEST_NAME, LOCK_NAME})
_FORMAT = 1


class RunDirError(ValueError):
    """A run directory cannot be used as asked; ``str(err)`` names it and the way out."""


def _abs(path: Path) -> str:
    return os.path.abspath(path)


class Manifest:
    """The paths rlvr wrote in ``root`` (see the module docstring).

    Args:
        root: the run directory.
        files, dirs: the recorded paths, relative to ``root`` (POSIX separators).
    """

    def __init__(self, root: Path, files: set[str] | None = None,
                 dirs: set[str] | None = None):
        self.root = Path(root)
        self.files: set[str] = set(files or ())
        self.dirs: set[str] = set(dirs or ())
        self._root_abs = _abs(self.root)
        self._guard = threading.Lock()  # a log appended from another thread records too

    @property
    def path(self) -> Path:
        """The manifest file."""
        return self.root / MANIFEST_NAME

    @classmethod
    def load(cls, root: Path) -> Manifest | None:
        """The manifest of ``root``, or None when it has none (a directory rlvr never wrote,
        or one written before manifests existed).

        Raises:
            RunDirError: the manifest cannot be read or is not one rlvr wrote.
        """
        path = Path(root) / MANIFEST_NAME
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            files, dirs = data["files"], data["dirs"]
            if data.get("format") != _FORMAT or not all(
                    isinstance(p, str) for p in [*files, *dirs]):
                raise ValueError("unknown format")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path}: not a manifest rlvr can read ({exc}); --overwrite "
                              f"removes only what a manifest lists: remove the run's files "
                              f"yourself or choose another directory") from None
        return cls(root, set(files), set(dirs))

    def save(self) -> None:
        """Rewrite the manifest file atomically (temp file, then rename).

        Raises:
            rlvr.io.OutputError: it cannot be written."""
        with atomic_write(self.path) as f:
            json.dump({"format": _FORMAT, "written_by": "rlvr",
                       "files": sorted(self.files), "dirs": sorted(self.dirs)}, f, indent=1)
            f.write("\n")

    def _relative(self, path: Path) -> str | None:
        """``path`` relative to the root (POSIX), or None when outside it or bookkeeping."""
        full = _abs(path)
        if full == self._root_abs or not full.startswith(self._root_abs + os.sep):
            return None
        rel = Path(os.path.relpath(full, self._root_abs)).as_posix()
        return None if rel in BOOKKEEPING else rel

    def record(self, path: Path, created_dirs: list[Path] = (), removed: bool = False) -> None:
        """Add ``path`` (a file; a directory: it and everything in it) and ``created_dirs``;
        with ``removed``, drop ``path`` and everything listed under it. Saves when the
        manifest changed; paths outside the root are ignored."""
        rel = self._relative(path)
        if rel is None:
            return
        with self._guard:
            self._record(rel, Path(path), created_dirs, removed)

    def _record(self, rel: str, path: Path, created_dirs: list[Path], removed: bool) -> None:
        before = (len(self.files), len(self.dirs))
        if removed:
            prefix = rel + "/"
            self.files = {p for p in self.files if p != rel and not p.startswith(prefix)}
            self.dirs = {p for p in self.dirs if p != rel and not p.startswith(prefix)}
            if (len(self.files), len(self.dirs)) != before:
                self.save()
            return
        for directory in created_dirs:
            made = self._relative(directory)
            if made is not None:
                self.dirs.add(made)
        if path.is_dir() and not path.is_symlink():
            self.dirs.add(rel)
            for folder, subdirs, names in os.walk(path):
                here = Path(folder)
                self.dirs.update(self._relative(here / d) for d in subdirs)
                self.files.update(self._relative(here / n) for n in names)
            self.dirs.discard(None)
            self.files.discard(None)
        else:
            self.files.add(rel)
        if (len(self.files), len(self.dirs)) != before:
            self.save()

    def lists(self, path: Path) -> bool:
        """``path`` is a file this manifest lists."""
        return self._relative(path) in self.files

    def activate(self) -> Manifest:
        """Record every output written under the root from now on (until
        :meth:`deactivate`). Returns itself."""
        add_output_recorder(self.record)
        _ACTIVE.append(self)
        return self

    def deactivate(self) -> None:
        """Stop recording."""
        remove_output_recorder(self.record)
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    def removable(self) -> tuple[list[Path], list[Path]]:
        """``(files, dirs)`` that :meth:`clear` removes: the listed files that exist and are
        files (or links), each with the temp files an interrupted atomic write of it left
        (``.<name>.<random>.tmp`` beside it), and the listed directories that exist and are
        directories, deepest first (removed only if empty by then)."""
        files = []
        for rel in sorted(self.files):
            target = self.root / rel
            if target.is_symlink() or target.is_file():
                files.append(target)
            if target.parent.is_dir():
                files.extend(sorted(p for p in target.parent.glob(f".{target.name}.*.tmp")
                                    if p.is_file() and not p.is_symlink()))
        dirs = [self.root / rel for rel in sorted(self.dirs, key=lambda r: (-r.count("/"), r))
                if (self.root / rel).is_dir() and not (self.root / rel).is_symlink()]
        return files, dirs

    def clear(self) -> list[Path]:
        """Remove what :meth:`removable` names and empty the manifest (saved). Returns the
        listed directories kept because they still hold entries rlvr did not write.

        Raises:
            OSError: a file cannot be removed (the manifest then still lists what is left).
        """
        files, dirs = self.removable()
        for path in files:
            path.unlink(missing_ok=True)
        kept = []
        for directory in dirs:
            try:
                directory.rmdir()
            except OSError:
                if directory.exists():
                    kept.append(directory)
        self.files, self.dirs = set(), set()
        self.save()
        return kept


_ACTIVE: list[Manifest] = []


def remove_written(path: Path) -> bool:
    """Remove the file ``path`` when an active manifest lists it (rlvr wrote it), and drop it
    from that manifest; a file no active manifest lists is kept. Returns whether it was
    removed.

    Raises:
        OSError: it cannot be removed."""
    for manifest in _ACTIVE:
        if manifest.lists(path):
            Path(path).unlink(missing_ok=True)
            manifest.record(Path(path), removed=True)
            return True
    return False


def lists_temp_of(path: Path) -> bool | None:
    """Whether ``path`` is the temp file of an interrupted atomic write
    (``.<name>.<random>.tmp``) of a file an active manifest lists; None when no active
    manifest covers ``path`` (nothing recorded to tell)."""
    covering = [m for m in _ACTIVE if m._relative(Path(path)) is not None]
    if not covering:
        return None
    return any(_temp_of_listed(m._relative(Path(path)), m.files) for m in covering)


def unlisted_entries(root: Path, manifest: Manifest | None) -> list[str]:
    """The paths under ``root`` (relative, sorted; a directory with a trailing ``/`` and not
    descended into when nothing in it is listed) that ``manifest`` does not list and that are
    not rlvr's bookkeeping: what ``--overwrite`` keeps."""
    files = manifest.files if manifest else set()
    dirs = manifest.dirs if manifest else set()
    out: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        for entry in sorted(folder.iterdir()):
            rel = prefix + entry.name
            if not prefix and entry.name in BOOKKEEPING:
                continue
            if entry.is_dir() and not entry.is_symlink():
                if rel in dirs:
                    walk(entry, rel + "/")
                else:
                    out.append(rel + "/")
            elif rel not in files and not _temp_of_listed(rel, files):
                out.append(rel)

    walk(Path(root), "")
    return out


def _temp_of_listed(rel: str, files: set[str]) -> bool:
    """``rel`` is an atomic write's temp file (``.<name>.<random>.tmp``) of a listed file."""
    folder, _, name = rel.rpartition("/")
    if not (name.startswith(".") and name.endswith(".tmp")):
        return False
    target = name[1:].rsplit(".", 2)[0]
    return (f"{folder}/{target}" if folder else target) in files


class RunDirLock:
    """An exclusive ``fcntl.flock`` on ``DIR/.rlvr-lock`` (which then holds the holder's pid),
    held until :meth:`release` or the end of the process.

    Raises (constructor):
        RunDirError: another process holds it (the message names the directory and its pid).
        OSError: the lock file cannot be created.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise RunDirError(
                    f"{self.run_dir} is in use by another rlvr command (pid {holder}, holding "
                    f"{self.path}): two commands writing one run directory would interleave "
                    f"its logs; wait for it to end or stop it, or choose another directory"
                ) from None
            try:  # the holder may have removed the file between our open and flock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd: int | None = fd

    def release(self, remove: bool = False) -> None:
        """Release the lock (``remove``: delete the lock file first, while still held)."""
        if self._fd is None:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

"""Write an export folder atomically: everything goes into a hidden sibling folder, which is renamed into place
only when complete and checked. An interrupted or failed export leaves neither output nor temporary files.

What may be replaced (``--force``) is decided here and nowhere else:

- never the current directory, a folder above it, the root folder, the home folder or a folder above it, whatever
  the flags: an export written over them would pull the shell's directory or a user's files from under them;
- otherwise a missing or empty folder, or, with ``force``, a folder holding an earlier gpt2-onnx export *and
  nothing else*: its ``manifest.json`` must parse as a gpt2-onnx manifest, and every entry of the folder must be a
  file that manifest names (the manifest itself, the graphs, the weights file, each listed file). A folder with
  anything else in it (a user's notes, a subfolder) is refused, so nothing that an export did not write is ever
  removed or moved. The user moves such files out first.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from gpt2_onnx_core.errors import ManifestError, OutputPathError
from gpt2_onnx_core.interrupts import raise_if_interrupted, signals_deferred
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import MANIFEST_FILE

__all__ = ["StagedFolder", "check_output_path"]

log = logging.getLogger(__name__)

_LISTED = 3  # foreign entries named in an error before "and N more"
# errno values of a write that failed for lack of room: a full disk, a quota, a file-size limit.
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _protected_reason(target: Path) -> str | None:
    """Why ``target`` may never receive an export, or None. Compared after resolving links and ``..``."""
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd:
        return "is the current directory"
    if resolved in cwd.parents:
        return "is the root folder" if resolved == Path(resolved.anchor) else "holds the current directory"
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no password entry: nothing to protect by that name
        return None
    if resolved == home:
        return "is the home folder"
    if resolved in home.parents:
        return "holds the home folder"
    return None


def _entry_name(entry: Path) -> str:
    return f"{entry.name}/" if entry.is_dir() and not entry.is_symlink() else entry.name


def earlier_export_files(target: Path) -> frozenset[str]:
    """The names of the files that make up the earlier export in ``target``: its manifest, graphs, weights and every
    file its manifest lists. Raises :class:`OutputPathError` unless the folder holds such an export and nothing
    else."""
    if not (target / MANIFEST_FILE).is_file():
        raise OutputPathError(
            f"'{target}' holds no gpt2-onnx export (no {MANIFEST_FILE}); --force replaces only an earlier export, "
            "so nothing was changed"
        )
    try:
        manifest = read_manifest(target)
    except ManifestError as exc:
        raise OutputPathError(
            f"'{target}' holds no gpt2-onnx export (its {MANIFEST_FILE} is not a gpt2-onnx manifest); --force "
            "replaces only an earlier export, so nothing was changed"
        ) from exc
    owned = {MANIFEST_FILE, manifest.weights_file, *manifest.files, *(g.file for g in manifest.graphs.values())}
    foreign = sorted(
        _entry_name(entry)
        for entry in target.iterdir()
        if entry.name not in owned or (entry.is_dir() and not entry.is_symlink())
    )
    if foreign:
        shown = ", ".join(foreign[:_LISTED]) + (f" and {len(foreign) - _LISTED} more" if len(foreign) > _LISTED else "")
        raise OutputPathError(
            f"'{target}' holds an earlier export and files it did not write ({shown}); --force replaces only an "
            "export's own files: move the others out first (nothing was changed)"
        )
    return frozenset(owned)


def _check_writable(parent: Path) -> None:
    if os.access(parent, os.W_OK | os.X_OK):
        try:  # what the export will do there (/proc passes the access check and refuses it)
            os.rmdir(tempfile.mkdtemp(prefix=".gpt2-onnx-probe-", dir=parent))
        except OSError as exc:
            raise OutputPathError(f"cannot create a folder in '{parent}': {exc.strerror or exc}") from exc
        return
    try:
        read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        read_only = False
    if read_only:
        raise OutputPathError(f"cannot write into '{parent}': it is on a read-only file system")
    raise OutputPathError(f"cannot write into '{parent}' (permission denied)")


def check_output_path(target: Path, force: bool) -> frozenset[str]:
    """Raise :class:`OutputPathError` unless ``target`` can receive an export (checked before any work starts and
    again at the commit). Returns the names of the earlier export's files that the commit replaces (none when
    ``target`` is missing or empty)."""
    reason = _protected_reason(target)
    if reason is not None:
        raise OutputPathError(
            f"output folder '{target}' {reason}; an export is never written over it: choose a new folder"
        )
    if target.exists() and not target.is_dir():
        raise OutputPathError(f"output path '{target}' is a file, not a folder")
    replaced: frozenset[str] = frozenset()
    if target.is_dir() and any(target.iterdir()):
        if not force:
            raise OutputPathError(
                f"output folder '{target}' is not empty; pass --force to replace an earlier export in it"
            )
        replaced = earlier_export_files(target)
    parent = target.absolute().parent
    if not parent.is_dir():
        raise OutputPathError(f"the folder '{parent}' that should hold '{target.name}' does not exist")
    _check_writable(parent)
    return replaced


def _remove_earlier_export(aside: Path, names: frozenset[str]) -> None:
    """Delete the earlier export's own files (set aside by the commit in ``aside/previous``), then both folders if
    nothing else is in them; anything else stays where it is."""
    previous = aside / "previous"
    for name in names:
        path = previous / name
        if path.is_symlink() or path.is_file():
            path.unlink()
    try:
        previous.rmdir()
        aside.rmdir()
    except OSError:
        log.warning("left %s in place: it holds files the earlier export did not write", previous)


def disk_full_error(exc: BaseException, target: Path) -> OutputPathError | None:
    """An :class:`OutputPathError` for a write that failed for lack of room (here or as the cause of a library's
    error), else None."""
    for error in (exc, exc.__cause__):
        if isinstance(error, OSError) and error.errno in _NO_ROOM:
            return OutputPathError(
                f"writing the export into '{target.parent}' failed: {error.strerror or error} (nothing was left "
                "behind; free some space and retry)"
            )
    return None


class StagedFolder:
    """A temporary folder beside ``target`` that becomes ``target`` on :meth:`commit`.

    Use as a context manager; leaving the block without committing (an error, Ctrl-C) deletes the staging folder.
    An existing ``target`` is replaced only at commit, after the new export is complete.
    """

    def __init__(self, target: Path, force: bool) -> None:
        self.target = target.absolute()
        self.force = force
        self._path: Path | None = None
        self.committed = False

    @property
    def path(self) -> Path:
        if self._path is None:
            raise RuntimeError("StagedFolder used outside its with-block")
        return self._path

    def __enter__(self) -> StagedFolder:
        check_output_path(self.target, self.force)
        try:
            self._path = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.partial-", dir=self.target.parent))
        except OSError as exc:
            raise OutputPathError(f"cannot create a folder beside '{self.target}': {exc.strerror or exc}") from exc
        return self

    def commit(self) -> Path:
        """Move the finished folder into place, replacing an earlier export (only when forced).

        The swap runs with SIGINT and SIGTERM held back (:func:`signals_deferred`): an interrupt in between its
        two renames would otherwise leave neither export in place. A signal that came meanwhile is delivered
        once the new export is in place (:attr:`committed` is then True). An interrupt recorded earlier
        (:func:`raise_if_interrupted`) stops the commit: the export is not put in place."""
        raise_if_interrupted()
        replaced = check_output_path(self.target, self.force)  # again: the folder may have changed meanwhile
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.path, 0o777 & ~umask)  # mkdtemp made it private; an export folder is ordinary output
        with signals_deferred():
            old: Path | None = None
            if self.target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=self.target.parent))
                os.replace(self.target, old / "previous")
            try:
                os.replace(self.path, self.target)
            except OSError:
                if old is not None:  # put the earlier export back before reporting the failure
                    os.replace(old / "previous", self.target)
                    shutil.rmtree(old, ignore_errors=True)  # empty now
                raise
            self.committed = True
            if old is not None:
                _remove_earlier_export(old, replaced)
        return self.target

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.committed and self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            log.info("removed unfinished export %s", self._path)
        if exc is None or isinstance(exc, OutputPathError):
            return
        full = disk_full_error(exc, self.target)
        if full is not None:
            raise full from exc
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError) and exc.errno is not None:
            # The folder vanished or lost its permissions, or the file system turned read-only.
            raise OutputPathError(
                f"writing the export into '{self.target.parent}' failed: {exc.strerror or exc}"
            ) from exc

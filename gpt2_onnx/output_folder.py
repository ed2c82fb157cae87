"""Write an export folder atomically: everything goes into a hidden sibling folder, which is renamed into place
only when complete and checked. An interrupted or failed export leaves neither output nor temporary files."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from gpt2_onnx.errors import OutputPathError
from gpt2_onnx.interrupts import raise_if_interrupted, signals_deferred

__all__ = ["StagedFolder", "check_output_path"]

log = logging.getLogger(__name__)


def check_output_path(target: Path, force: bool) -> None:
    """Raise :class:`OutputPathError` unless ``target`` can receive an export (checked before any work starts)."""
    if target.exists() and not target.is_dir():
        raise OutputPathError(f"output path '{target}' is a file, not a folder")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise OutputPathError(f"output folder '{target}' is not empty; pass --force to replace it")
    parent = target.absolute().parent
    if not parent.is_dir():
        raise OutputPathError(f"the folder '{parent}' that should hold '{target.name}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write into '{parent}' (permission denied)")


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
        once the new export is in place. An interrupt recorded earlier (:func:`raise_if_interrupted`) stops the
        commit: the export is not put in place."""
        raise_if_interrupted()
        check_output_path(self.target, self.force)
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
                    shutil.rmtree(old, ignore_errors=True)
                raise
            self.committed = True
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        return self.target

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.committed and self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            log.info("removed unfinished export %s", self._path)
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError) and exc.errno is not None:
            # The disk is full, a file-size limit was hit, the folder vanished or lost its permissions.
            raise OutputPathError(
                f"writing the export into '{self.target.parent}' failed: {exc.strerror or exc}"
            ) from exc

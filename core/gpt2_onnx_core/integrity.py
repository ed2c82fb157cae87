"""Every file of an export checked against the sha256 its manifest records, before the first token.

Loading checks presence and size always; with :class:`IntegrityCheck` (the default) it hashes every file too, so a
changed byte anywhere (a graph, the weights, the tokenizer) is refused before a session exists. Hashing costs what
reading the files costs (README has the figures for GPT-2-small and gpt2-xl).

To keep repeated loads cheap, a fingerprint cache outside the export folder remembers files already found intact:
a file whose path, size, inode, device, modification and status-change times (``st_ctime_ns``, which no user
can set back) are the same as when it was hashed is not hashed again. Any write to a file changes its times, so
it is hashed again. The cache is a convenience only: a missing, corrupted or unwritable cache file means hashing,
never a failed load.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.hashing import sha256_file
from gpt2_onnx_core.manifest import Manifest

__all__ = ["CACHE_FILE_NAME", "FingerprintCache", "IntegrityCheck", "check_file_hashes", "file_fingerprint"]

log = logging.getLogger(__name__)

CACHE_FILE_NAME = "verified-files.json"
_CACHE_VERSION = 1
_CACHE_ENTRIES = 512  # files remembered; the least recently checked are forgotten first


@dataclass(frozen=True)
class IntegrityCheck:
    """What loading checks beyond presence and size."""

    sha256: bool = True  # False: sizes only, for start-up-critical deployments that trust their files
    cache_file: Path | None = None  # fingerprints of files already found intact; None: hash every file every load


def file_fingerprint(path: Path) -> dict[str, Any]:
    """What must stay the same for a file to count as unchanged since it was hashed."""
    stat = path.stat()
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "inode": stat.st_ino,
        "device": stat.st_dev,
    }


def _checked(entry: object) -> float:
    value = entry.get("checked") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


class FingerprintCache:
    """The remembered fingerprints: resolved path → fingerprint, sha256 and when it was checked."""

    def __init__(self, path: Path, entries: dict[str, Any]) -> None:
        self.path = path
        self._entries = entries
        self._changed = False

    @classmethod
    def open(cls, path: Path) -> FingerprintCache:
        """Read ``path``; a missing or unreadable file gives an empty cache."""
        entries: Any = {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            entries = data["files"] if data.get("version") == _CACHE_VERSION else {}
            if not isinstance(entries, dict):
                raise TypeError("its files are not an object")
        except FileNotFoundError:
            entries = {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.info("ignoring the fingerprint cache %s (%s); hashing instead", path, exc)
            entries = {}
        return cls(path, entries)

    def knows(self, path: Path, fingerprint: dict[str, Any], sha256: str) -> bool:
        """True when ``path`` was found to hash to ``sha256`` and has not changed since."""
        entry = self._entries.get(str(path))
        if not isinstance(entry, dict) or entry.get("sha256") != sha256:
            return False
        return all(entry.get(key) == value for key, value in fingerprint.items())

    def remember(self, path: Path, fingerprint: dict[str, Any], sha256: str) -> None:
        self._entries[str(path)] = {**fingerprint, "sha256": sha256, "checked": time.time()}
        self._changed = True

    def save(self) -> None:
        """Write the cache atomically (a temporary file, then a rename); failing to is logged, never raised."""
        if not self._changed:
            return
        newest = sorted(self._entries.items(), key=lambda item: _checked(item[1]), reverse=True)
        data = {"version": _CACHE_VERSION, "files": dict(newest[:_CACHE_ENTRIES])}
        temporary: Path | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            temporary = Path(name)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(temporary, self.path)
        except OSError as exc:
            log.info("cannot remember checked files in %s (%s); the next load hashes them again", self.path, exc)
            if temporary is not None:
                temporary.unlink(missing_ok=True)
        self._changed = False


def _changed_files(folder: Path, manifest: Manifest, cache: FingerprintCache | None) -> Iterator[str]:
    for name, record in sorted(manifest.files.items()):
        path = (folder / name).resolve()
        fingerprint = file_fingerprint(path)
        if cache is not None and cache.knows(path, fingerprint, record.sha256):
            continue
        if sha256_file(path) != record.sha256:
            yield name
        elif cache is not None and file_fingerprint(path) == fingerprint:  # unchanged while it was read
            cache.remember(path, fingerprint, record.sha256)


def check_file_hashes(folder: Path, manifest: Manifest, check: IntegrityCheck) -> None:
    """Raise :class:`ManifestError` naming every file whose sha256 differs from the manifest's (the files are known
    to exist: presence and sizes are checked first)."""
    if not check.sha256:
        return
    cache = FingerprintCache.open(check.cache_file) if check.cache_file is not None else None
    start = time.perf_counter()
    changed = list(_changed_files(folder, manifest, cache))
    log.info("checked the sha256 of %d files of %s in %.2f s", len(manifest.files), folder, time.perf_counter() - start)
    if cache is not None:
        cache.save()
    if changed:
        raise ManifestError(
            f"'{folder}': {', '.join(changed)} changed since the export (sha256 differs from manifest.json); "
            "export it again, or run gpt2-onnx verify to see what the change breaks"
        )

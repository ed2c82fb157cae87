"""File digests for the manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["sha256_file"]

_CHUNK = 8 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (weights files can exceed the memory one wants to spend)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()

"""Version strings: comparison without third-party parsers, and the library versions a report records."""

from __future__ import annotations

import re
from importlib import metadata

__all__ = ["installed_versions", "version_tuple"]


def version_tuple(version: str) -> tuple[int, ...]:
    """``"1.18.1"`` → ``(1, 18, 1)``; trailing tags (``+cpu``, ``rc1``, ``.dev0``) are ignored."""
    numbers = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        if not match:
            break
        numbers.append(int(match.group()))
    return tuple(numbers)


def installed_versions(names: tuple[str, ...]) -> dict[str, str]:
    """Installed distribution versions by name; absent ones are left out."""
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found

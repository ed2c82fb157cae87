"""The command line's file check: every file's sha256 before the first token, remembered in the user's cache.

The cache folder is ``$GPT2_ONNX_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/gpt2-onnx`` (an absolute
``XDG_CACHE_HOME`` only, as the XDG specification says), else ``~/.cache/gpt2-onnx``. The command line reads the
environment here; the library is handed the path (:class:`~gpt2_onnx_core.integrity.IntegrityCheck`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from gpt2_onnx_core.integrity import CACHE_FILE_NAME, IntegrityCheck

__all__ = ["CACHE_DIR_VARIABLE", "cache_dir", "fingerprint_options", "integrity_option"]

CACHE_DIR_VARIABLE = "GPT2_ONNX_CACHE_DIR"

F = TypeVar("F", bound=Callable[..., Any])


def cache_dir(environ: Mapping[str, str]) -> Path | None:
    """Where gpt2-onnx keeps its user cache (None: no home folder to put it in)."""
    chosen = environ.get(CACHE_DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "gpt2-onnx"
    try:
        return Path.home() / ".cache" / "gpt2-onnx"
    except (RuntimeError, KeyError):  # no HOME and no password entry
        return None


def fingerprint_options(no_sha256_check: bool) -> IntegrityCheck:
    """What ``run`` checks when it loads an export."""
    if no_sha256_check:
        return IntegrityCheck(sha256=False)
    folder = cache_dir(os.environ)
    return IntegrityCheck(cache_file=None if folder is None else folder / CACHE_FILE_NAME)


def integrity_option(command: F) -> F:
    """``--no-sha256-check``: sizes only, for start-up-critical deployments."""
    option = click.option(
        "--no-sha256-check",
        is_flag=True,
        help="Check only that every file is present with its size, not its sha256 (start-up-critical deployments "
        "that trust their files). By default each file is hashed before the first token; files found intact are "
        f"remembered in the user cache (${CACHE_DIR_VARIABLE}, else $XDG_CACHE_HOME/gpt2-onnx) until they change.",
    )
    return option(command)

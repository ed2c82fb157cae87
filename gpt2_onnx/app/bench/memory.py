"""Resident memory of this process: now, at its peak, and (on Linux) split into anonymous and file pages.

File-backed pages are those of memory-mapped files (the weights file when ONNX Runtime maps it); the kernel
may drop them under pressure and shares them between processes, anonymous pages are the process's own.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["memory_snapshot"]

_STATUS = Path("/proc/self/status")
_FIELDS = {"VmRSS": "rss", "VmHWM": "peak_rss", "RssAnon": "rss_anon", "RssFile": "rss_file"}


def _linux_status() -> dict[str, int]:
    found: dict[str, int] = {}
    for line in _STATUS.read_text().splitlines():
        key, _, value = line.partition(":")
        if key in _FIELDS:
            found[_FIELDS[key]] = int(value.split()[0]) * 1024  # the kernel reports kB
    return found


def memory_snapshot() -> dict[str, int]:
    """Bytes: ``rss`` and ``peak_rss`` everywhere; ``rss_anon`` and ``rss_file`` where the kernel says."""
    if _STATUS.is_file():
        found = _linux_status()
        if "rss" in found and "peak_rss" in found:
            return found
    import psutil

    info = psutil.Process().memory_info()
    peak = getattr(info, "peak_wset", None)  # Windows
    if peak is None:
        import resource

        max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = max_rss if sys.platform == "darwin" else max_rss * 1024  # bytes on macOS, kB elsewhere
    return {"rss": int(info.rss), "peak_rss": int(peak)}

"""Hand back the resident pages of ONNX Runtime's private maps of the weights file once its sessions exist.

ONNX Runtime maps each external initializer of a session privately (``MAP_PRIVATE``; ``rw-p`` in
``/proc/self/maps``) and keeps the maps for the session's life. Weights it prepacks (every MatMulNBits of an int8
or int4 export, the MatMuls of an fp32 one) are then read from the packed copy only, yet the pages that prepacking
read stay resident: the quantized weights count twice. ``madvise(MADV_PAGEOUT)`` asks the kernel to reclaim those
pages now. It is a hint that keeps every byte: clean file pages come back from the file on the next read (the
embedding rows a lookup touches, the tensors no kernel prepacked), and a page ONNX Runtime had written would be
written out, not dropped. Maps that are not ONNX Runtime's (the runtime's own shared, read-only map of the
embedding, ``r--s``) are left alone. Linux 5.4 and newer; elsewhere, or where the kernel refuses, nothing happens.
``benchmarks/peers_side_by_side.sh`` measures the peak RSS it saves (docs/performance.md).

:func:`release_free_heap` hands back the other memory a load leaves resident without use: the heap pages that the
graph's parsing, its rewrites and the session's optimizers (and the int8 cache's calibration) freed. glibc's
``free`` keeps such pages in its arenas unless they are at the top of the heap; ``malloc_trim(0)`` returns every
whole free page to the kernel. Elsewhere (another C library, another platform) nothing happens.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

__all__ = ["page_out_private_maps", "release_free_heap"]

log = logging.getLogger(__name__)

MADV_PAGEOUT = 21  # linux/mman-common.h
_MAPS = Path("/proc/self/maps")


def _private_ranges(path: Path, maps_text: str) -> list[tuple[int, int]]:
    """The (start, end) address ranges of this process's private writable maps of ``path``."""
    target = str(path.resolve())
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[1] == "rw-p" and fields[5] == target:
            start, end = (int(address, 16) for address in fields[0].split("-"))
            ranges.append((start, end))
    return ranges


def page_out_private_maps(path: Path) -> int:
    """Advise the kernel to reclaim the pages of every private map of ``path``; returns the bytes advised (0
    where the platform has no such advice)."""
    if not sys.platform.startswith("linux") or not _MAPS.is_file():
        return 0
    try:
        ranges = _private_ranges(path, _MAPS.read_text(encoding="utf-8", errors="replace"))
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    advised = 0
    for start, end in ranges:
        if madvise(start, end - start, MADV_PAGEOUT) != 0:  # EINVAL before Linux 5.4: nothing to gain, stop
            log.debug("madvise(MADV_PAGEOUT) refused: errno %d", ctypes.get_errno())
            break
        advised += end - start
    return advised


def release_free_heap() -> bool:
    """Return the C heap's free pages to the kernel (glibc's ``malloc_trim(0)``); True when some were returned,
    False when none were or there is no such call. It walks the heap's free lists (milliseconds): for use after
    a load, not per step."""
    if not sys.platform.startswith("linux"):  # glibc's call; ctypes.CDLL(None) is not even valid on Windows
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))

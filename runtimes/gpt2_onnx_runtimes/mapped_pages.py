"""Hand back the resident pages of ONNX Runtime's private maps of the weights file once its sessions exist.

ONNX Runtime maps each external initializer of a session privately (``MAP_PRIVATE``; ``rw-p`` in
``/proc/self/maps``) and keeps the maps for the session's life. Weights it prepacks (every MatMulNBits of an int8
or int4 export, the MatMuls of an fp32 one) are then read from the packed copy only, yet the pages that prepacking
read stay resident: the quantized weights count twice. :func:`release_private_maps` unmaps those pages now, keeping
every byte:

- a map none of whose pages were written (``Anonymous: 0 kB`` in ``/proc/self/smaps``, as ONNX Runtime leaves
  them) gets ``madvise(MADV_DONTNEED)``: its pages leave this process but stay in the kernel's page cache, so a
  later read (the embedding rows a lookup touches: in int8 and int4 exports the tied embedding is both the head's
  prepacked weight and the lookup's table) is a minor fault that maps the cached page again;
- a map with written pages (private copies that exist nowhere else) gets ``madvise(MADV_PAGEOUT)`` (Linux 5.4),
  which writes them out to swap where there is any and otherwise keeps them.

``MADV_PAGEOUT`` for every map also freed the clean pages from the page cache, so the first prompts after a load
read their embedding rows and the float32 norms and biases back from the disk: on GPT-2-small int8 the first
128-token prompt took 143 ms against 101 ms with the advice per map (results/20261202T220921Z-first-prompt), for
the same RSS. Maps that are not ONNX Runtime's (the runtime's own shared, read-only map of the embedding, ``r--s``)
are left alone. Elsewhere than Linux, or where ``/proc`` cannot be read, nothing happens.
``benchmarks/peers_side_by_side.sh`` measures the peak RSS it saves (docs/performance.md).

:func:`release_free_heap` hands back the other memory a load leaves resident without use: the heap pages that the
graph's parsing, its rewrites and the session's optimizers (and the int8 cache's calibration) freed. glibc's
``free`` keeps such pages in its arenas unless they are at the top of the heap; ``malloc_trim(0)`` returns every
whole free page to the kernel. Elsewhere (another C library, another platform) nothing happens.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["PrivateMap", "release_free_heap", "release_private_maps", "release_shared_map"]

log = logging.getLogger(__name__)

MADV_DONTNEED = 4  # linux/mman-common.h
MADV_PAGEOUT = 21
_SMAPS = Path("/proc/self/smaps")


@dataclass(frozen=True)
class PrivateMap:
    """One private writable map of a file: its address range and how many of its pages were written (private
    copies, ``Anonymous`` in smaps), in KiB."""

    start: int
    end: int
    written_kib: int

    @property
    def advice(self) -> int:
        """The madvise advice that unmaps this map's pages without losing any: DONTNEED where every page is the
        file's own (it stays in the page cache), PAGEOUT where some exist only here."""
        return MADV_DONTNEED if self.written_kib == 0 else MADV_PAGEOUT


def _private_maps(path: Path, smaps_text: str) -> list[PrivateMap]:
    """This process's private writable maps of ``path``, from the text of ``/proc/self/smaps``. A map whose
    ``Anonymous`` line is missing counts as written (the advice that keeps its pages)."""
    target = str(path.resolve())
    found: list[PrivateMap] = []
    current: tuple[int, int] | None = None
    written: int | None = None

    def close() -> None:
        if current is not None:
            found.append(PrivateMap(current[0], current[1], 1 if written is None else written))

    for line in smaps_text.splitlines():
        fields = line.split(maxsplit=5)
        if fields and "-" in fields[0] and not fields[0].endswith(":"):  # a map's header line
            close()
            current, written = None, None
            if len(fields) == 6 and fields[1] == "rw-p" and fields[5] == target:
                start, end = (int(address, 16) for address in fields[0].split("-"))
                current = (start, end)
        elif current is not None and fields[:1] == ["Anonymous:"]:
            written = int(fields[1])
    close()
    return found


def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise(start, length, advice)`` (0 on success), or None off Linux or without it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def release_private_maps(path: Path) -> int:
    """Unmap the resident pages of every private map of ``path`` (see the module's docstring for which advice
    each map gets); returns the bytes advised (0 where the platform has no such advice)."""
    madvise = _madvise()
    if madvise is None or not _SMAPS.is_file():
        return 0
    try:
        maps = _private_maps(path, _SMAPS.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return 0
    advised = 0
    for found in maps:
        if madvise(found.start, found.end - found.start, found.advice) != 0:  # PAGEOUT: EINVAL before Linux 5.4
            log.debug("madvise(%d) refused: errno %d", found.advice, ctypes.get_errno())
            continue
        advised += found.end - found.start
    return advised


def release_shared_map(mapped: np.ndarray) -> bool:
    """Unmap the resident pages of ``mapped``, a read-only shared map of a file (``np.memmap`` mode 'r'), with
    ``MADV_DONTNEED``: they stay in the page cache and a later read maps them again (a minor fault). For after a
    session's creation has read every tensor once. True when the kernel took the advice."""
    madvise = _madvise()
    if madvise is None or mapped.size == 0:
        return False
    start = mapped.ctypes.data - (mapped.ctypes.data % mmap.PAGESIZE)  # madvise takes a page-aligned start
    end = mapped.ctypes.data + mapped.nbytes
    return madvise(start, end - start, MADV_DONTNEED) == 0


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

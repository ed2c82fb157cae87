"""The pages of ONNX Runtime's private maps of the weights file are handed back once the sessions exist
(gpt2_onnx_runtimes.mapped_pages), no written page is lost, and nothing a session computes changes for it."""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.mapped_pages import (
    MADV_DONTNEED,
    MADV_PAGEOUT,
    PrivateMap,
    _private_maps,
    release_free_heap,
    release_private_maps,
)

SMAPS = """\
7f65df178000-7f65df1ae000 rw-p 0411c000 fe:00 5432259                    {weights}
Size:                216 kB
Rss:                 216 kB
Anonymous:             0 kB
VmFlags: rd wr mr mw me ac
7f65df1ae000-7f65df4ae000 r--s 00000000 fe:00 5432259                    {weights}
Anonymous:             0 kB
7f65df4ae000-7f65df4f6000 rw-p 031ec000 fe:00 5432260                    {other}
Anonymous:             0 kB
7f65e674a000-7f65e79b2000 rw-p 0034a000 fe:00 5432259                    {weights}
Rss:                  12 kB
Anonymous:             8 kB
7f65e79b2000-7f65e79b4000 rw-p 0034a000 fe:00 5432259                    {weights}
Rss:                   0 kB
7f65f0cb7000-7f65f0cbf000 rw-p 00000000 00:00 0
Anonymous:            32 kB
"""


def test_only_private_writable_maps_of_the_weights_file_are_chosen(tmp_path: Path) -> None:
    weights, other = tmp_path / "model.onnx.data", tmp_path / "other.data"
    text = SMAPS.format(weights=weights.resolve(), other=other.resolve())
    assert _private_maps(weights, text) == [
        PrivateMap(0x7F65DF178000, 0x7F65DF1AE000, 0),
        PrivateMap(0x7F65E674A000, 0x7F65E79B2000, 8),
        PrivateMap(0x7F65E79B2000, 0x7F65E79B4000, 1),  # no Anonymous line: taken as written
    ]


def test_clean_maps_are_dropped_and_written_ones_paged_out() -> None:
    """A map holding only the file's own pages is unmapped (they stay in the page cache); one holding private
    copies is paged out, which keeps them."""
    assert PrivateMap(0, 4096, 0).advice == MADV_DONTNEED
    assert PrivateMap(0, 4096, 4).advice == MADV_PAGEOUT


def _resident_kib(start: int) -> int:
    """Rss of this process's map starting at ``start``, from /proc/self/smaps."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):
            inside = int(fields[0].split("-")[0], 16) == start
        elif inside and fields[0] == "Rss:":
            return int(fields[1])
    raise AssertionError(f"no map at {start:#x}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps and madvise: Linux only")
def test_a_written_page_survives_and_a_clean_map_leaves_the_process(tmp_path: Path) -> None:
    """Real private maps of a file: the clean one's pages leave this process and read back the file's bytes; the
    one whose page was written keeps the written byte (MADV_DONTNEED would have thrown it away)."""
    path = tmp_path / "model.onnx.data"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    with path.open("rb") as file:
        clean = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)  # MAP_PRIVATE, read-write: rw-p
        written = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
    try:
        assert sum(clean[::4096]) == 0  # touch every page
        written[5] = 200  # one private copy of the first page
        addresses = [ctypes.addressof(ctypes.c_char.from_buffer(m)) for m in (clean, written)]
        assert _resident_kib(addresses[0]) >= 1024
        assert release_private_maps(path) >= 2 * 2**20
        assert _resident_kib(addresses[0]) == 0
        assert clean[:256] == bytes(range(256))
        assert written[5] == 200 and written[6] == 6
    finally:
        clean.close()
        written.close()


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_generation_is_unchanged_after_the_pages_go(shared_export: Callable[..., Path], precision: str) -> None:
    folder = shared_export(precision=precision) if precision != "fp32" else shared_export()
    model = Gpt2Onnx.load(folder)  # loading already hands the pages back once
    options = GenerationOptions(max_new_tokens=12, ignore_eos=True)
    first = model.generate(["The quick brown fox", "Hi"], options)
    advised = release_private_maps(folder / model.manifest.weights_file)
    again = model.generate(["The quick brown fox", "Hi"], options)
    assert [r.token_ids for r in first] == [r.token_ids for r in again]
    assert [r.token_logprobs for r in first] == [r.token_logprobs for r in again]
    if sys.platform.startswith("linux") and precision == "int4":
        assert advised > 0, "ONNX Runtime maps a quantized export's weights privately; there were pages to give back"


def test_elsewhere_nothing_happens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert release_private_maps(tmp_path / "model.onnx.data") == 0


def test_freed_heap_pages_go_back_to_the_kernel() -> None:
    """Many small blocks freed out of order leave whole free pages inside glibc's heap, below blocks still held:
    ``free`` keeps them, ``malloc_trim`` hands them back."""
    if not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("glibc's malloc_trim only")
    kept = [bytearray(2048) for _ in range(20_000)]  # ~40 MiB of heap blocks, below the mmap threshold
    del kept[:-1]  # all but the last: the free pages lie below a block in use, so free() cannot shrink the heap
    assert release_free_heap()


def test_no_malloc_trim_means_nothing_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(_name: object) -> object:
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert release_free_heap() is False
    monkeypatch.setattr(sys, "platform", "win32")
    assert release_free_heap() is False

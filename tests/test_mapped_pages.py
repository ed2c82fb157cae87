"""The pages of ONNX Runtime's private maps of the weights file are handed back once the sessions exist
(gpt2_onnx_runtimes.mapped_pages), and nothing a session computes changes for it."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.mapped_pages import _private_ranges, page_out_private_maps, release_free_heap

MAPS = """\
7f65df178000-7f65df1ae000 rw-p 0411c000 fe:00 5432259                    {weights}
7f65df1ae000-7f65df4ae000 r--s 00000000 fe:00 5432259                    {weights}
7f65df4ae000-7f65df4f6000 rw-p 031ec000 fe:00 5432260                    {other}
7f65e674a000-7f65e79b2000 rw-p 0034a000 fe:00 5432259                    {weights}
7f65f0cb7000-7f65f0cbf000 rw-p 00000000 00:00 0
"""


def test_only_private_writable_maps_of_the_weights_file_are_chosen(tmp_path: Path) -> None:
    weights, other = tmp_path / "model.onnx.data", tmp_path / "other.data"
    text = MAPS.format(weights=weights.resolve(), other=other.resolve())
    assert _private_ranges(weights, text) == [(0x7F65DF178000, 0x7F65DF1AE000), (0x7F65E674A000, 0x7F65E79B2000)]


@pytest.mark.parametrize("precision", ["fp32", "int4"])
def test_generation_is_unchanged_after_the_pages_go(shared_export: Callable[..., Path], precision: str) -> None:
    folder = shared_export(precision=precision) if precision != "fp32" else shared_export()
    model = Gpt2Onnx.load(folder)  # loading already pages out once
    options = GenerationOptions(max_new_tokens=12, ignore_eos=True)
    first = model.generate(["The quick brown fox", "Hi"], options)
    advised = page_out_private_maps(folder / model.manifest.weights_file)
    again = model.generate(["The quick brown fox", "Hi"], options)
    assert [r.token_ids for r in first] == [r.token_ids for r in again]
    assert [r.token_logprobs for r in first] == [r.token_logprobs for r in again]
    if sys.platform.startswith("linux") and precision == "int4":
        assert advised > 0, "ONNX Runtime maps a quantized export's weights privately; there were pages to give back"


def test_elsewhere_nothing_happens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert page_out_private_maps(tmp_path / "model.onnx.data") == 0


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

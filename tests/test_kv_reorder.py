"""Reordering the KV cache between steps (beam search): the runtime's CPU buffers in numpy, ONNX Runtime's own
OrtValues through the Gather graph on their device. Either way, decoding after a reorder equals decoding rows
whose cache was built in that order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_runtimes import Gpt2Onnx
from gpt2_onnx_runtimes.kv_buffers import BufferPool, KvBuffers
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from tests.test_runtime_loading import cuda_works

PROMPTS = [[464, 2068, 7586, 21831], [15496], [818, 257, 14702]]


def filled(batch: int, length: int, max_batch: int | None = None) -> tuple[KvBuffers, list[np.ndarray]]:
    buffers = KvBuffers(3, batch, 2, 8, 4, max_batch)
    values = [np.random.default_rng(i).normal(size=(batch, 2, length, 4)).astype(np.float32) for i in range(3)]
    for index, value in enumerate(values):
        buffers._buffers[buffers._current][index, : value.size] = value.reshape(-1)
    buffers.length = length
    return buffers, values


# in place (at most half the rows move: a swap overlaps), and gathered into the other buffer (more move)
@pytest.mark.parametrize("rows", [[0, 1, 2, 3], [0, 1, 1, 3], [1, 0, 2, 3], [3, 3, 0, 1], [1, 0, 0, 2], [2, 2, 2, 2]])
def test_buffers_reorder(rows: list[int]) -> None:
    buffers, values = filled(4, 5)
    buffers.reorder(np.array(rows))
    for index, value in enumerate(values):
        np.testing.assert_array_equal(buffers.past(index), value[rows])


def test_buffers_reorder_grows_the_batch_into_the_other_buffer() -> None:
    buffers, values = filled(2, 3, max_batch=6)
    rows = np.array([0, 0, 0, 1, 1, 1])
    buffers.reorder(rows)
    assert buffers.batch == 6
    for index, value in enumerate(values):
        np.testing.assert_array_equal(buffers.past(index), value[rows])
    with pytest.raises(ValueError, match="room for 6"):
        buffers.reorder(np.arange(7) % 6)


def _decode_after(runner: KvCacheRunner, rows: np.ndarray, prompts: list[list[int]]) -> np.ndarray:
    """Prefill PROMPTS, reorder to ``rows``, decode one token (11) per row."""
    ids, mask = left_pad(prompts, 50256)
    runner.prefill(ids, mask, position_ids(mask))
    runner.reorder(rows)
    mask = np.concatenate([mask[rows], np.ones((len(rows), 1), dtype=np.int64)], axis=1)
    return runner.decode(np.full((len(rows), 1), 11), mask, mask.sum(axis=1, keepdims=True) - 1)


@pytest.mark.parametrize("capacity", [None, 32], ids=["ortvalues", "buffers"])
@pytest.mark.parametrize("rows", [[2, 0, 1], [1, 1, 0], [0, 0, 1, 1, 2, 2]])
def test_decode_after_reorder_equals_a_cache_built_in_that_order(
    model: Gpt2Onnx, capacity: int | None, rows: list[int]
) -> None:
    reordered = _decode_after(KvCacheRunner(model._loaded, capacity, max_batch=6), np.array(rows), PROMPTS)
    ids, mask = left_pad([PROMPTS[r] for r in rows], 50256)
    direct = KvCacheRunner(model._loaded)
    direct.prefill(ids, mask, position_ids(mask))
    mask = np.concatenate([mask, np.ones((len(rows), 1), dtype=np.int64)], axis=1)
    expected = direct.decode(np.full((len(rows), 1), 11), mask, mask.sum(axis=1, keepdims=True) - 1)
    np.testing.assert_allclose(reordered, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_works(), reason="no working CUDA provider here")
def test_cuda_reorder_stays_on_the_device_and_equals_the_cpu(model: Gpt2Onnx, tiny_export: Path) -> None:
    rows = np.array([2, 2, 0, 1])
    gpu = Gpt2Onnx.load(tiny_export, provider="cuda")
    runner = KvCacheRunner(gpu._loaded)
    ids, mask = left_pad(PROMPTS, 50256)
    runner.prefill(ids, mask, position_ids(mask))
    runner.reorder(rows)
    assert runner.past is not None and all(v.device_name().lower() == "cuda" for v in runner.past)
    assert runner.past[0].shape()[0] == len(rows)
    on_gpu = _decode_after(KvCacheRunner(gpu._loaded), rows, PROMPTS)
    on_cpu = _decode_after(KvCacheRunner(model._loaded, 32, max_batch=4), rows, PROMPTS)
    np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-3, atol=1e-3)


def test_pool_reuses_and_grows_buffers() -> None:
    pool = BufferPool(keep=2)
    first = KvBuffers(2, 1, 2, 8, 4, pool=pool)
    address = first._buffers[0].ctypes.data
    del first  # its two arrays go back to the pool
    assert pool.free_floats == 2 * 2 * 1 * 2 * 8 * 4
    again = KvBuffers(2, 1, 2, 8, 4, pool=pool)
    assert address in {b.ctypes.data for b in again._buffers}  # the same memory, not a new mapping
    del again
    bigger = KvBuffers(2, 3, 2, 16, 4, pool=pool)  # none fits: a new, larger pair
    assert all(b.size == 2 * 3 * 2 * 16 * 4 for b in bigger._buffers)
    del bigger
    assert pool.free_floats == 2 * 2 * 3 * 2 * 16 * 4  # the larger pair kept, the smaller dropped


def test_pool_hands_out_the_smallest_fitting_array_among_several() -> None:
    """Several free arrays of different sizes (what concurrent generations leave): each take gets the smallest
    that fits, the very array given, and one too large for all is new while the smallest free one is dropped."""
    pool = BufferPool(keep=4)
    arrays = [np.zeros(size, dtype=np.float32) for size in (2304, 3072, 1024, 4096)]
    pool.give(arrays)
    assert pool.take(2000) is arrays[0]
    assert pool.take(3000) is arrays[1]
    assert pool.take(5000).size == 5000  # none fits: a new array, and the smallest free one (1024) dropped
    assert pool.free_floats == 4096
    assert pool.take(10) is arrays[3]
    assert pool.free_floats == 0


def test_stale_pool_contents_do_not_change_a_generation(model: Gpt2Onnx) -> None:
    loaded = model._loaded
    dims = loaded.manifest.dims
    size = 2 * dims.n_layer * 6 * dims.n_head * 32 * dims.head_dim  # every cache tensor, 6 rows, 32 positions
    stale = [np.full(size, np.nan, dtype=np.float32) for _ in range(2)]  # garbage in every position
    poisoned = BufferPool()
    poisoned.give(stale)
    loaded.kv_pool, fresh = poisoned, loaded.kv_pool
    try:
        runner = KvCacheRunner(loaded, 32, max_batch=6)
        reused = _decode_after(runner, np.array([2, 0, 1]), PROMPTS)
        held = 1 if loaded.steps.in_place else 2  # the in-place cache is one buffer per tensor, the copying one two
        assert poisoned.free_floats == (2 - held) * size  # the runner holds the stale arrays
        del runner
        assert poisoned.free_floats == 2 * size  # and gave them back
    finally:
        loaded.kv_pool = fresh
    expected = _decode_after(KvCacheRunner(loaded), np.array([2, 0, 1]), PROMPTS)
    np.testing.assert_allclose(reused, expected, rtol=1e-5, atol=1e-5)

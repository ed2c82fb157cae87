"""Weights in memory once: in the split layout both sessions take their initializers from one map of the weights
file; in the merged layout one session holds the packed weights and reads the embedding from the map."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from gpt2_onnx_core.batching import position_ids
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import DECODE, PREFILL
from gpt2_onnx_core.weights_index import ExternalTensorRef, external_tensors
from gpt2_onnx_runtimes.generation_graph import TRANSPOSED_TABLE
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.shared_weights import SharedWeights


def _address_range(array: np.ndarray) -> range:
    return range(array.ctypes.data, array.ctypes.data + array.nbytes)


def test_a_transposed_copy_equals_the_transpose_whatever_the_chunk(tiny_export: Path) -> None:
    """The table transposed a few rows at a time (rows that do not divide it), into memory of its own."""
    graph = onnx.load(tiny_export / "decode.onnx", load_external_data=False)
    ref = next(r for r in external_tensors(graph, tiny_export / "decode.onnx") if r.name == "transformer.wte.weight")
    shared = SharedWeights(tiny_export / "model.onnx.data")
    table = shared.value(ref).numpy()  # (V, d)
    for rows in (7, table.shape[0], 10 * table.shape[0]):
        copy = shared.transposed(ref, rows=rows).numpy()  # (d, V)
        np.testing.assert_array_equal(copy, table.T)
        assert copy.ctypes.data not in _address_range(shared.mapped())


def _greedy_logits(loaded: LoadedExport, steps: int) -> list[np.ndarray]:
    ids = np.array([[464, 2068, 7586, 21831]], dtype=np.int64)  # (1, 4)
    mask = np.ones_like(ids)
    runner = KvCacheRunner(loaded)
    logits = [runner.prefill(ids, mask, position_ids(mask))]
    for _ in range(steps):
        token = logits[-1].argmax(axis=-1)[:, None]  # (1, 1)
        mask = np.concatenate([mask, np.ones((1, 1), dtype=np.int64)], axis=1)
        logits.append(runner.decode(token, mask, position_ids(mask)[:, -1:]))
    return logits


SPLIT = RuntimeOptions(layout="split")


def test_both_sessions_read_one_map(tiny_export: Path) -> None:
    loaded = LoadedExport.load(tiny_export, SPLIT)
    shared = loaded.shared_weights
    assert shared is not None
    assert shared.mapped_bytes == (tiny_export / loaded.manifest.weights_file).stat().st_size
    names = {}
    for kind in (PREFILL, DECODE):
        graph = onnx.load(str(tiny_export / f"{kind}.onnx"), load_external_data=False)
        names[kind] = {ref.name: shared.value(ref) for ref in external_tensors(graph, tiny_export / f"{kind}.onnx")}
    common = names[PREFILL].keys() & names[DECODE].keys()
    assert "transformer.wte.weight" in common
    for name in common:  # one OrtValue per tensor, whichever graph asks
        assert names[PREFILL][name] is names[DECODE][name]


def test_shared_weights_compute_what_onnx_runtime_loads_itself(tiny_export: Path) -> None:
    shared = _greedy_logits(LoadedExport.load(tiny_export, SPLIT), steps=3)
    own = _greedy_logits(LoadedExport.load(tiny_export, RuntimeOptions(layout="split", share_weights=False)), steps=3)
    merged = _greedy_logits(LoadedExport.load(tiny_export, RuntimeOptions(layout="merged")), steps=3)
    for a, b, c in zip(shared, own, merged, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
        np.testing.assert_allclose(c, b, atol=1e-5)


def test_merged_layout_reads_the_embedding_from_one_map(tiny_export: Path) -> None:
    """The one session's tied embedding is an input bound to the map: ONNX Runtime holds no copy of it."""
    loaded = LoadedExport.load(tiny_export, RuntimeOptions(layout="merged"))
    assert loaded.layout == "merged" and loaded.steps.prefill is loaded.steps.decode
    assert set(loaded.steps.constant_inputs) == {"transformer.wte.weight", TRANSPOSED_TABLE}
    assert loaded.shared_weights is not None
    dims = loaded.manifest.dims
    value = loaded.steps.constant_inputs["transformer.wte.weight"]
    assert value.shape() == [dims.vocab_size, dims.n_embd]
    assert value.data_ptr() in _address_range(loaded.shared_weights.mapped())  # the map itself, no copy
    assert loaded.steps.constant_inputs[TRANSPOSED_TABLE].shape() == [dims.n_embd, dims.vocab_size]
    inputs = {arg.name for arg in loaded.steps.decode.get_inputs()}
    assert "transformer.wte.weight" in inputs


def test_explicit_prepacking_leaves_loading_to_onnx_runtime(tiny_export: Path) -> None:
    config = {"session.disable_prepacking": "0"}
    loaded = LoadedExport.load(tiny_export, RuntimeOptions(layout="split", session_config=config))
    assert loaded.shared_weights is None


def test_tensor_beyond_the_file_is_refused(tiny_export: Path) -> None:
    shared = SharedWeights(tiny_export / "model.onnx.data")
    ref = ExternalTensorRef("x", np.dtype(np.float32), (4,), shared.mapped_bytes - 8, 16)
    with pytest.raises(ManifestError, match="beyond the end"):
        shared.value(ref)


def test_inconsistent_length_is_refused(tiny_export: Path) -> None:
    graph = onnx.load(str(tiny_export / "decode.onnx"), load_external_data=False)
    tensor = next(t for t in graph.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    for entry in tensor.external_data:
        if entry.key == "length":
            entry.value = str(int(entry.value) + 4)
    with pytest.raises(ManifestError, match="does not fill"):
        list(external_tensors(graph, tiny_export / "decode.onnx"))


_RSS_SCRIPT = """
import sys, numpy as np
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from gpt2_onnx_runtimes.generation_graph import TRANSPOSED_TABLE
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx.app.bench.memory import memory_snapshot
loaded = LoadedExport.load(sys.argv[1], RuntimeOptions(intra_op_threads=2, layout=sys.argv[2]))
ids = np.arange(1, 33, dtype=np.int64)[None]
mask = np.ones_like(ids)
runner = KvCacheRunner(loaded)
runner.prefill(ids, mask, np.arange(32)[None])
runner.decode(ids[:, :1], np.ones((1, 33), np.int64), np.array([[32]]))
print(memory_snapshot()["rss"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["merged", "split"])
def test_gpt2_small_rss_within_a_quarter_above_the_weights(tmp_path: Path, layout: str) -> None:
    """GPT-2-small fp32, loaded and run once: at most 1.25 × the weight bytes + 100 MiB (merged: prepacked)."""
    from gpt2_onnx.app.export import export_model
    from gpt2_onnx_core.config import ExportOptions

    result = export_model(ExportOptions(model="random:gpt2", output=tmp_path / "gpt2", check=False))
    weights = result.manifest.model["parameter_bytes"]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(result.folder), layout],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    rss = int(out.stdout.strip())
    assert rss <= 1.25 * weights + 100 * 2**20, f"RSS {rss / 2**20:.0f} MiB is {rss / weights:.2f}× the weights"

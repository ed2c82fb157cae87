"""The int8 cache's prompt graph (gpt2_onnx_runtimes.prompt_attention): with ``prompt_kernel`` 'dynamic' and
``kv_cache`` 'int8', a prompt attends over a float32 cache of its own, and each run returns its new keys and values
quantized, which the runner writes into the int8 cache.

What must hold: the graph's cache is float32 and it returns the new positions as int8 (B, nh, S, hs); the graph
given is left as it was, and one without an int8 cache is refused; a prompt's logits are the float32 cache's (the
same prompt session over a float32 cache), batched and left-padded too; the int8 cache it leaves holds
round(x / scale) of the float32 keys and values, exactly; a prompt in chunks leaves what one run leaves; and decode
continues from it alike whether the runtime's buffers hold the cache or ONNX Runtime's own tensors do."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import DECODE, KV_KINDS, past_names, present_names
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generation_graph import last_position_logits
from gpt2_onnx_runtimes.inplace_attention import in_place_attention, scale_name
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.prompt_attention import float_prompt_attention, new_cache_names
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import load_graph

ROOT = Path(__file__).resolve().parent.parent
MICRO_INT4 = ROOT / "fixtures" / "pydocs-micro-int4"  # trained weights, committed
HELDOUT = ROOT / "checkpoints" / "pydocs-micro" / "heldout.txt"


@pytest.fixture(scope="module")
def loaded_pair() -> tuple[LoadedExport, LoadedExport]:
    """The micro int4 export with the prompt kernel, over an int8 and over a float32 cache."""
    export = ExportFolder.open(MICRO_INT4)
    int8, float32 = (
        LoadedExport.open(export, RuntimeOptions(layout="merged", prompt_kernel="dynamic", kv_cache=cache))
        for cache in ("int8", "float32")
    )
    return int8, float32  # type: ignore[return-value]


def test_the_prompt_graph_attends_over_a_float32_cache_and_returns_the_new_positions_as_int8() -> None:
    dims = ExportFolder.open(MICRO_INT4).manifest.dims
    graph = in_place_attention(last_position_logits(load_graph(MICRO_INT4, DECODE)), dims, int8_cache=True)
    before = graph.SerializeToString()
    prompt = float_prompt_attention(graph, dims).graph
    assert graph.SerializeToString() == before, "the graph given is left as it was"
    types = {value.name: value.type.tensor_type.elem_type for value in [*prompt.input, *prompt.output]}
    cache = [*past_names(dims.n_layer), *present_names(dims.n_layer)]
    assert all(types[name] == onnx.TensorProto.FLOAT for name in cache)
    assert all(types[name] == onnx.TensorProto.INT8 for name in new_cache_names(dims.n_layer))
    assert {scale_name(layer, kind) for layer in range(dims.n_layer) for kind in KV_KINDS} <= types.keys()
    producers = {name: node for node in prompt.node for name in node.output}
    assert {producers[name].op_type for name in new_cache_names(dims.n_layer)} == {"Transpose"}
    for node in (node for node in prompt.node if node.op_type == "GroupQueryAttention"):
        assert node.input[3] and node.input[4] and len(node.input) == 11, node.name  # the past, no scales
        assert not {attribute.name for attribute in node.attribute} & {"kv_cache_bit_width", "k_quant_type"}
    assert Counter(node.op_type for node in prompt.node)["QuantizeLinear"] == 2 * dims.n_layer


def test_a_graph_without_an_int8_cache_is_refused() -> None:
    dims = ExportFolder.open(MICRO_INT4).manifest.dims
    graph = in_place_attention(last_position_logits(load_graph(MICRO_INT4, DECODE)), dims)
    with pytest.raises(ManifestError, match="int8 cache's generation graph only"):
        float_prompt_attention(graph, dims)


def _cache(runner: KvCacheRunner) -> np.ndarray:
    return np.stack(runner.past_arrays())  # (2L, B, nh, P, hs)


def _scales(loaded: LoadedExport) -> np.ndarray:
    """The int8 cache's scales in the cache's (layer, key/value) order, (2L, 1, nh, 1, hs)."""
    constants, layers = loaded.steps.constant_inputs, loaded.manifest.dims.n_layer
    return np.stack([constants[scale_name(layer, kind)].numpy() for layer in range(layers) for kind in KV_KINDS])


def test_a_prompt_attends_in_float32_and_leaves_the_cache_the_int8_format_stores(
    loaded_pair: tuple[LoadedExport, LoadedExport],
) -> None:
    int8, float32 = loaded_pair
    assert int8.steps.prefill_float_cache and not float32.steps.prefill_float_cache
    text = ExportFolder.open(MICRO_INT4).encode_once(HELDOUT.read_text(encoding="utf-8")[:2000])
    ids, mask = left_pad([text[:40], text[100:123]], pad_id=0)  # (2, 40): the second row left-padded
    runners = [KvCacheRunner(loaded, capacity=48) for loaded in (int8, float32)]
    logits = [runner.prefill(ids, mask, position_ids(mask)) for runner in runners]  # (2, V) each
    np.testing.assert_array_equal(logits[0], logits[1])  # the prompt session's attention is float32 in both
    quantized = np.clip(np.round(_cache(runners[1]) / _scales(int8)), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(_cache(runners[0]), quantized)


def test_decode_continues_alike_from_the_runtimes_buffers_and_from_onnx_runtimes_tensors(
    loaded_pair: tuple[LoadedExport, LoadedExport],
) -> None:
    int8, _ = loaded_pair
    ids = np.arange(300, 330)[None]  # (1, 30)
    runners = [KvCacheRunner(int8, capacity=40), KvCacheRunner(int8)]  # buffers written by the runner; OrtValues
    rows = []
    for runner in runners:
        mask = np.ones_like(ids)
        steps = [runner.prefill(ids, mask, position_ids(mask))]  # (1, V)
        for step in range(4):
            mask = np.ones((1, ids.shape[1] + step + 1), dtype=np.int64)
            token = np.array([[int(steps[-1].argmax())]])
            steps.append(runner.decode(token, mask, position_ids(mask)[:, -1:]))
        rows.append(np.concatenate(steps))  # (5, V)
        assert runner.past_length == ids.shape[1] + 4
    np.testing.assert_allclose(rows[0], rows[1], rtol=0, atol=1e-4)
    np.testing.assert_array_equal(_cache(runners[0]), _cache(runners[1]))


def test_a_prompt_in_chunks_runs_every_chunk_through_the_prompt_session(
    loaded_pair: tuple[LoadedExport, LoadedExport],
) -> None:
    """Five runs, the later four after a past: each attends over the float32 cache of the ones before it, so the
    logits and the int8 cache are the float32 cache's, chunk for chunk (the prompt kernel quantizes each run's
    activations by themselves, so chunks are compared with the same chunks)."""
    export = ExportFolder.open(MICRO_INT4)
    ids = np.asarray(export.encode_once(HELDOUT.read_text(encoding="utf-8")[:2000]))[None, :70]  # (1, 70)
    mask = np.ones_like(ids)
    found = []
    for cache in ("int8", "float32"):
        options = RuntimeOptions(layout="merged", prompt_kernel="dynamic", kv_cache=cache, prefill_chunk=16)  # type: ignore[arg-type]
        with LoadedExport.open(export, options) as loaded:
            runner = KvCacheRunner(loaded, capacity=80)
            found.append((runner.prefill(ids, mask, position_ids(mask)), _cache(runner)))
    (int8_logits, int8_cache), (float_logits, float_cache) = found
    np.testing.assert_array_equal(int8_logits, float_logits)
    quantized = np.clip(np.round(float_cache / _scales(loaded_pair[0])), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(int8_cache, quantized)

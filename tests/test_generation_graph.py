"""The generation graph built at load time from decode.onnx: last-position logits, the embedding as an input, the
single-row head, and the merged layout computing what the folder's own two graphs compute, for every precision and
--optimize."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.errors import InvalidInputError, ManifestError
from gpt2_onnx_core.names import DECODE, EMBEDDING, LOGITS, PREFILL, past_name
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.generation_graph import (
    TRANSPOSED_TABLE,
    initializer_as_input,
    last_layer_at_last_position,
    last_position_logits,
    single_row_head,
)
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import load_graph, spinning_entries

MERGED = RuntimeOptions(layout="merged")
SPLIT = RuntimeOptions(layout="split")
PROMPTS = [[464, 2068, 7586, 21831, 18045], [15496], [818, 257]]


@pytest.fixture(scope="module", params=["int8", "int4", "fp16", "optimize"])
def variant_export(request: pytest.FixtureRequest, shared_export: Callable[..., Path]) -> Path:
    return shared_export(optimize=True) if request.param == "optimize" else shared_export(precision=request.param)


def test_two_sessions_threads_stop_spinning_when_a_run_returns_and_one_session_keeps_the_default(
    tiny_export: Path,
) -> None:
    """The split layout's prefill and decode sessions, and a folder graph's session beside the generation session,
    share the cores: their threads stop spinning when a run returns. The merged layout's one generation session
    keeps ONNX Runtime's default, and an application's own spinning entry wins."""
    stopped = {"session.force_spinning_stop": "1", "session.intra_op.allow_spinning": None}
    with LoadedExport.load(tiny_export, SPLIT) as split:
        assert [spinning_entries(s) for s in (split.steps.prefill, split.steps.decode)] == [stopped, stopped]
    with LoadedExport.load(tiny_export, MERGED) as merged:
        assert set(spinning_entries(merged.steps.decode).values()) == {None}
        assert spinning_entries(merged.graph_session(DECODE)) == stopped
    asleep = RuntimeOptions(layout="split", session_config={"session.intra_op.allow_spinning": "0"})
    with LoadedExport.load(tiny_export, asleep) as own:
        assert spinning_entries(own.steps.decode) == {
            "session.force_spinning_stop": None,
            "session.intra_op.allow_spinning": "0",
        }


def test_last_position_logits_has_one_position_and_leaves_its_input_alone(tiny_export: Path) -> None:
    decode = load_graph(tiny_export, DECODE)
    before = decode.SerializeToString()
    merged = last_position_logits(decode)
    assert decode.SerializeToString() == before  # a pure transform
    logits = next(value for value in merged.graph.output if value.name == LOGITS)
    assert logits.type.tensor_type.shape.dim[1].dim_value == 1
    assert [n.op_type for n in merged.graph.node].count("Slice") == [n.op_type for n in decode.graph.node].count(
        "Slice"
    ) + 1


def test_merged_logits_are_decode_graphs_last_position(tiny_export: Path) -> None:
    """Three new tokens after a past of two: the generation graph's logits equal decode.onnx's last row."""
    split, merged = LoadedExport.load(tiny_export, SPLIT), LoadedExport.load(tiny_export, MERGED)
    dims = split.manifest.dims
    ids = np.array([[464, 2068, 7586, 21831, 18045]], dtype=np.int64)  # (1, 5)
    ones = np.ones_like(ids)
    prefill = split.run(
        PREFILL, {"input_ids": ids[:, :2], "attention_mask": ones[:, :2], "position_ids": position_ids(ones[:, :2])}
    )
    past = {past_name(i, kv): prefill[f"present.{i}.{kv}"] for i in range(dims.n_layer) for kv in ("key", "value")}
    feeds = {"input_ids": ids[:, 2:], "attention_mask": ones, "position_ids": position_ids(ones)[:, 2:], **past}
    expected = split.run(DECODE, feeds)[LOGITS]  # (1, 3, V)
    session = merged.steps.decode
    names = [out.name for out in session.get_outputs()]
    got = dict(zip(names, session.run(names, {**feeds, **_constants(merged)}), strict=True))[LOGITS]  # (1, 1, V)
    assert got.shape == (1, 1, dims.vocab_size)
    np.testing.assert_allclose(got[:, 0], expected[:, -1], atol=1e-5)


def _constants(loaded: LoadedExport) -> dict[str, np.ndarray]:
    return {name: value.numpy() for name, value in loaded.steps.constant_inputs.items()}


def test_initializer_as_input(tiny_export: Path) -> None:
    decode = load_graph(tiny_export, DECODE)
    changed = initializer_as_input(decode, EMBEDDING)
    assert EMBEDDING not in {t.name for t in changed.graph.initializer}
    added = next(value for value in changed.graph.input if value.name == EMBEDDING)
    table = next(t for t in decode.graph.initializer if t.name == EMBEDDING)
    assert [d.dim_value for d in added.type.tensor_type.shape.dim] == list(table.dims)
    with pytest.raises(ManifestError, match="no initializer 'nope'"):
        initializer_as_input(decode, "nope")


def _sliced_early(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The Slices last_layer_at_last_position added (every name of what generation_graph adds starts so)."""
    return [
        n
        for n in model.graph.node
        if n.op_type == "Slice"
        and n.name.startswith("/generation/last_position/")
        and n.name != "/generation/last_position/Slice"
    ]


def test_the_last_layer_after_its_attention_takes_the_last_position(tiny_export: Path, variant_export: Path) -> None:
    """fp32, int8, int4 and --optimize: the last layer's attention output and residual stream are sliced to the last
    position where what follows reads them (two Slices); the attention itself and the earlier layers keep every
    position. fp16's cache is cast around its attention, which is then not found: that graph stays as it is."""
    for folder in (tiny_export, variant_export):
        loaded = LoadedExport.load(folder, MERGED)
        graph = last_position_logits(load_graph(folder, DECODE))
        before = graph.SerializeToString()
        changed = last_layer_at_last_position(graph, loaded.manifest.dims)
        assert graph.SerializeToString() == before  # a pure transform
        if loaded.manifest.precision == "float16":
            assert changed is None
            continue
        assert changed is not None
        sliced = _sliced_early(changed)
        assert len(sliced) == 2 and len(changed.graph.node) == len(graph.graph.node) + 2
        readers = [n for n in changed.graph.node if {s.output[0] for s in sliced} & set(n.input)]
        assert {n.op_type for n in readers} <= {"MatMul", "Add", "MatMulNBits", "SkipLayerNormalization"}


def test_the_last_layer_keeps_every_position_where_anything_else_reads_it(tiny_export: Path) -> None:
    dims = LoadedExport.load(tiny_export, MERGED).manifest.dims
    graph = last_position_logits(load_graph(tiny_export, DECODE))
    final = next(n for n in graph.graph.node if n.name == "/generation/last_position/Slice")
    norm_input = next(n for n in graph.graph.node if final.input[0] in n.output).input[0]  # (B, S, d)
    graph.graph.output.append(onnx.helper.make_tensor_value_info(norm_input, onnx.TensorProto.FLOAT, None))
    assert last_layer_at_last_position(graph, dims) is None  # a graph output needs every position
    with pytest.raises(ManifestError, match="last_position_logits comes first"):
        last_layer_at_last_position(load_graph(tiny_export, DECODE), dims)


def test_single_row_head_branches_on_the_rows_and_leaves_other_heads_alone(tiny_export: Path) -> None:
    graph = initializer_as_input(last_position_logits(load_graph(tiny_export, DECODE)), EMBEDDING)
    before = graph.SerializeToString()
    headed = single_row_head(graph, EMBEDDING)
    assert headed is not None and graph.SerializeToString() == before  # a pure transform
    ops = [node.op_type for node in headed.graph.node]
    assert "If" in ops and ops.count("Gemm") == [n.op_type for n in graph.graph.node].count("Gemm") - 1
    added = next(value for value in headed.graph.input if value.name == TRANSPOSED_TABLE)
    table = next(value for value in graph.graph.input if value.name == EMBEDDING)
    assert [d.dim_value for d in added.type.tensor_type.shape.dim] == [
        d.dim_value for d in reversed(table.type.tensor_type.shape.dim)
    ]
    assert single_row_head(graph, "another.weight") is None  # no Gemm reads it: an untied head, prepacked
    head = next(node for node in graph.graph.node if node.op_type == "Gemm" and node.input[1] == EMBEDDING)
    next(a for a in head.attribute if a.name == "transB").i = 0
    assert single_row_head(graph, EMBEDDING) is None  # not the tied head's product


def _prompt_logits(loaded: LoadedExport, ids: np.ndarray, table_t: np.ndarray | None = None) -> np.ndarray:
    """The generation graph's last-position logits (B, 1, V) for ``ids`` (B, T) after an empty past, with the
    transposed table replaced by ``table_t`` where given."""
    dims = loaded.manifest.dims
    batch, _ = ids.shape
    ones = np.ones_like(ids)
    empty = np.zeros((batch, dims.n_head, 0, dims.n_embd // dims.n_head), dtype=np.float32)  # (B, nh, 0, hs)
    past = {past_name(i, kv): empty for i in range(dims.n_layer) for kv in ("key", "value")}
    constants = _constants(loaded)
    if table_t is not None:
        constants[TRANSPOSED_TABLE] = table_t
    feeds = {"input_ids": ids, "attention_mask": ones, "position_ids": position_ids(ones), **past, **constants}
    session = loaded.steps.decode
    names = [out.name for out in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))[LOGITS]


def test_a_single_row_multiplies_the_transposed_table_and_batches_the_table(tiny_export: Path) -> None:
    """The merged fp32 layout's tied head: one row reads the transposed copy made at load (a zero copy zeroes its
    logits), a batch the table (a zero copy changes nothing); either way the logits are the table's own."""
    loaded, plain = (
        LoadedExport.load(tiny_export, MERGED),
        LoadedExport.load(tiny_export, RuntimeOptions(layout="merged", single_row_head=False)),
    )
    assert set(plain.steps.constant_inputs) == {EMBEDDING}
    table = loaded.steps.constant_inputs[EMBEDDING].numpy()  # (V, d)
    np.testing.assert_array_equal(loaded.steps.constant_inputs[TRANSPOSED_TABLE].numpy(), table.T)
    zero = np.zeros_like(table.T)  # (d, V)
    one, two = np.array([PROMPTS[0]]), np.array([PROMPTS[0], PROMPTS[0][::-1]])  # (1, 5), (2, 5)
    assert not _prompt_logits(loaded, one, zero).any()
    np.testing.assert_array_equal(_prompt_logits(loaded, two, zero), _prompt_logits(loaded, two))
    for ids in (one, two):
        np.testing.assert_allclose(_prompt_logits(loaded, ids), _prompt_logits(plain, ids), rtol=1e-5, atol=1e-6)
    for a, b in zip(_greedy_logits(loaded, PROMPTS[:1], 3), _greedy_logits(plain, PROMPTS[:1], 3), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_graph_of_another_shape_is_refused(tiny_export: Path) -> None:
    decode = load_graph(tiny_export, DECODE)
    graph = onnx.ModelProto()
    graph.CopyFrom(decode)
    producer = next(n for n in graph.graph.node if LOGITS in n.output)
    producer.op_type = "Softmax"  # something no export of ours puts before the logits
    with pytest.raises(ManifestError, match="unexpected Softmax node"):
        last_position_logits(graph)


def _greedy_logits(loaded: LoadedExport, prompts: list[list[int]], steps: int) -> list[np.ndarray]:
    ids, mask = left_pad(prompts, 0)  # (B, T)
    runner = KvCacheRunner(loaded)
    logits = [runner.prefill(ids, mask, position_ids(mask))]  # (B, V) each
    for _ in range(steps):
        token = logits[-1].argmax(axis=-1)[:, None]  # (B, 1)
        mask = np.concatenate([mask, np.ones_like(token)], axis=1)
        logits.append(runner.decode(token, mask, position_ids(mask)[:, -1:]))
    return logits


def test_merged_layout_equals_split_on_a_padded_batch(tiny_export: Path) -> None:
    merged = _greedy_logits(LoadedExport.load(tiny_export, MERGED), PROMPTS, steps=4)
    split = _greedy_logits(LoadedExport.load(tiny_export, SPLIT), PROMPTS, steps=4)
    for a, b in zip(merged, split, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_every_variant_generates_in_the_merged_layout_as_in_the_split(variant_export: Path) -> None:
    """int8, int4, fp16 and --optimize exports: the merged layout loads and chooses the split layout's tokens
    (quantized kernels may differ by a rounding, so logits are compared loosely and tokens exactly)."""
    merged, split = LoadedExport.load(variant_export, MERGED), LoadedExport.load(variant_export, SPLIT)
    assert merged.layout == "merged" and merged.steps.prefill is merged.steps.decode
    assert not merged.steps.constant_inputs or merged.manifest.precision == "float32"
    options = GenerationOptions(max_new_tokens=6, ignore_eos=True)
    a, b = generate_ids(merged, PROMPTS, options), generate_ids(split, PROMPTS, options)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    for x, y in zip(_greedy_logits(merged, PROMPTS, 2), _greedy_logits(split, PROMPTS, 2), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-2)


def test_graph_sessions_are_created_on_first_use_in_the_merged_layout(tiny_export: Path) -> None:
    loaded = LoadedExport.load(tiny_export, MERGED)
    assert set(loaded.providers()) == {"generation"}
    ids = np.array([[464, 2068]], dtype=np.int64)
    out = loaded.run(
        PREFILL, {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(2)[None]}
    )
    assert out[LOGITS].shape[1] == 1
    assert set(loaded.providers()) == {"generation", "prefill"}
    loaded.close()
    assert loaded.providers() == {}
    with pytest.raises(InvalidInputError, match="was closed"):
        KvCacheRunner(loaded)


@pytest.mark.parametrize("layout", ["merged", "split"])
def test_runtime_owned_kv_buffers_compute_what_onnx_runtime_allocates(tiny_export: Path, layout: str) -> None:
    """The CPU cache in double buffers sized once (capacity) gives the logits of ONNX Runtime's own outputs."""
    loaded = LoadedExport.load(tiny_export, RuntimeOptions(layout=layout))  # type: ignore[arg-type]
    ids, mask = left_pad(PROMPTS, 0)  # (B, T)
    owned, allocated = KvCacheRunner(loaded, capacity=ids.shape[1] + 4), KvCacheRunner(loaded)
    a, b = owned.prefill(ids, mask, position_ids(mask)), allocated.prefill(ids, mask, position_ids(mask))
    for _ in range(4):
        np.testing.assert_allclose(a, b, atol=1e-6)
        token = b.argmax(axis=-1)[:, None]  # (B, 1)
        mask = np.concatenate([mask, np.ones_like(token)], axis=1)
        a, b = (runner.decode(token, mask, position_ids(mask)[:, -1:]) for runner in (owned, allocated))
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert owned.past is not None and allocated.past is not None
    np.testing.assert_allclose(owned.past[0].numpy(), allocated.past[0].numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="holds 9 positions"):
        owned.decode(token, np.concatenate([mask, np.ones_like(token)], axis=1), position_ids(mask)[:, -1:] + 1)

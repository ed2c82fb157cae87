"""The int8 KV cache (RuntimeOptions.kv_cache 'int8', ``--kv-cache int8``): the in-place generation graph's
GroupQueryAttention keeps the cache as int8 with per-channel scales measured on the export when it loads.

What must hold: the graph carries the scales and int8 cache tensors; its attention equals float32 attention over
the dequantized cache (checked against numpy); on the trained checkpoint its logits stay close to the float32
cache's and its perplexity moves by well under 1 %; the serving engine's running batch holds the same int8 cache;
and every place it cannot apply is refused with one clear line."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import InvalidInputError, OptionError
from gpt2_onnx_core.layouts import kv_cache_format
from gpt2_onnx_core.names import DECODE, KV_KINDS, past_name, past_names, present_name
from gpt2_onnx_core.perplexity import plan_windows
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.generation_graph import last_position_logits
from gpt2_onnx_runtimes.inplace_attention import (
    CacheScales,
    InPlaceRefused,
    in_place_attention,
    in_place_graph,
    probe_names,
    scale_name,
)
from gpt2_onnx_runtimes.kv_buffers import BufferPool, SharedKvBuffers
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.kv_scales import CHUNK, calibration_ids, default_calibration_text, measure_cache_scales
from gpt2_onnx_runtimes.perplexity import export_log_probs
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import invoke, load_graph, one_error_line, serve_schedule

ROOT = Path(__file__).resolve().parent.parent
PYDOCS = ROOT / "checkpoints" / "pydocs-tiny"
INT8 = RuntimeOptions(layout="merged", kv_cache="int8")
FLOAT = RuntimeOptions(layout="merged")


@pytest.fixture(scope="module")
def pydocs_export(scaled_export: Callable[..., Path]) -> Path:
    """The trained checkpoint's fp32 export (made once per session by ``scaled_export``). Read-only."""
    if not (PYDOCS / "model.safetensors").is_file():
        pytest.skip("checkpoints/pydocs-tiny is not in this checkout")
    return scaled_export(str(PYDOCS))


@pytest.fixture(scope="module")
def pydocs_pair(pydocs_export: Path) -> tuple[LoadedExport, LoadedExport]:
    return LoadedExport.load(pydocs_export, INT8), LoadedExport.load(pydocs_export, FLOAT)


def _kl(p_logits: np.ndarray, q_logits: np.ndarray) -> np.ndarray:
    """KL(p || q) per row of two (N, V) logit arrays, in float64."""
    p = p_logits.astype(np.float64) - p_logits.max(axis=-1, keepdims=True)
    q = q_logits.astype(np.float64) - q_logits.max(axis=-1, keepdims=True)
    log_p = p - np.log(np.exp(p).sum(axis=-1, keepdims=True))
    log_q = q - np.log(np.exp(q).sum(axis=-1, keepdims=True))
    return (np.exp(log_p) * (log_p - log_q)).sum(axis=-1)  # (N,)


def _int8_graph(folder: Path) -> tuple[onnx.ModelProto, ModelDims]:
    dims = ExportFolder.open(folder).manifest.dims
    return in_place_attention(last_position_logits(load_graph(folder, DECODE)), dims, int8_cache=True), dims


def test_the_graph_holds_int8_cache_tensors_scale_inputs_and_probes(tiny_export: Path) -> None:
    changed, dims = _int8_graph(tiny_export)
    inputs = {v.name: v.type.tensor_type for v in changed.graph.input}
    outputs = {v.name: v.type.tensor_type for v in changed.graph.output}
    for layer in range(dims.n_layer):
        for kind in KV_KINDS:
            assert inputs[past_name(layer, kind)].elem_type == TensorProto.INT8
            assert outputs[present_name(layer, kind)].elem_type == TensorProto.INT8
            scale = inputs[scale_name(layer, kind)]
            assert scale.elem_type == TensorProto.FLOAT
            assert [d.dim_value for d in scale.shape.dim] == [1, dims.n_head, 1, dims.head_dim]
    nodes = [n for n in changed.graph.node if n.op_type == "GroupQueryAttention"]
    for layer, node in enumerate(nodes):
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        assert attributes["k_quant_type"] == attributes["v_quant_type"] == b"PER_CHANNEL"
        assert attributes["kv_cache_bit_width"] == 8
        assert list(node.input[12:14]) == [scale_name(layer, "key"), scale_name(layer, "value")]
    assert not any(node.input[1] or node.input[2] for node in nodes)  # each reads its layer's packed projection
    assert probe_names(changed) == [node.input[0] for node in nodes]  # the probes: those projections
    shape = (dims.n_layer, dims.n_head, dims.head_dim)
    with pytest.raises(InvalidInputError, match="positive float32"):
        CacheScales(np.zeros(shape, np.float32), np.ones(shape, np.float32))
    feeds = CacheScales(np.ones(shape, np.float32), np.full(shape, 2, np.float32)).feeds()
    assert sorted(feeds) == sorted(scale_name(i, kind) for i in range(dims.n_layer) for kind in KV_KINDS)
    assert feeds[scale_name(0, "value")].shape == (1, dims.n_head, 1, dims.head_dim)


def _attention_node_graph(n_head: int, head_dim: int, capacity: int) -> bytes:
    """One GroupQueryAttention over an int8 cache, as the transform makes it: float32 q, k, v (1, 1, d)."""
    d = n_head * head_dim
    floats = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, d]) for n in ("q", "k", "v")]
    cache = [helper.make_tensor_value_info(n, TensorProto.INT8, [1, n_head, capacity, head_dim]) for n in ("pk", "pv")]
    rest = [
        helper.make_tensor_value_info("seqlens", TensorProto.INT32, [1]),
        helper.make_tensor_value_info("total", TensorProto.INT32, []),
        helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 1, 1, "W"]),
        helper.make_tensor_value_info("ks", TensorProto.FLOAT, [1, n_head, 1, head_dim]),
        helper.make_tensor_value_info("vs", TensorProto.FLOAT, [1, n_head, 1, head_dim]),
    ]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, d])] + [
        helper.make_tensor_value_info(n, TensorProto.INT8, [1, n_head, capacity, head_dim]) for n in ("k2", "v2")
    ]
    node = helper.make_node(
        "GroupQueryAttention",
        ["q", "k", "v", "pk", "pv", "seqlens", "total", "", "", "", "bias", "", "ks", "vs"],
        ["out", "k2", "v2"],
        domain="com.microsoft",
        num_heads=n_head,
        kv_num_heads=n_head,
        scale=head_dim**-0.5,
        k_quant_type="PER_CHANNEL",
        v_quant_type="PER_CHANNEL",
        kv_cache_bit_width=8,
    )
    graph = helper.make_graph([node], "int8-cache", [*floats, *cache, *rest], outputs)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, ir_version=9, opset_imports=opsets).SerializeToString()


def test_attention_over_the_int8_cache_is_float_attention_over_its_dequantized_values() -> None:
    """The kernel's contract as the transform relies on it: the past read as q · scale per channel, the new key
    and value written as round(x / scale) at column W - 1, the columns before it untouched."""
    n_head, head_dim, capacity, width = 2, 8, 16, 10
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n_head * head_dim)).astype(np.float32) for _ in range(3))
    past_k, past_v = (rng.integers(-127, 128, (1, n_head, capacity, head_dim)).astype(np.int8) for _ in range(2))
    k_scale = (0.02 + 0.02 * rng.random((1, n_head, 1, head_dim))).astype(np.float32)
    v_scale = (0.03 + 0.01 * rng.random((1, n_head, 1, head_dim))).astype(np.float32)
    session = ort.InferenceSession(
        _attention_node_graph(n_head, head_dim, capacity), providers=["CPUExecutionProvider"]
    )
    feeds = {"q": q, "k": k, "v": v, "pk": past_k.copy(), "pv": past_v.copy(), "ks": k_scale, "vs": v_scale}
    feeds.update(seqlens=np.array([width - 1], np.int32), total=np.array(width, np.int32))
    feeds["bias"] = np.zeros((1, 1, 1, width), np.float32)
    out, new_k, new_v = session.run(None, feeds)

    def heads(x: np.ndarray) -> np.ndarray:
        return x.reshape(1, 1, n_head, head_dim).transpose(0, 2, 1, 3)  # (1, nh, 1, hs)

    written_k = np.clip(np.round(heads(k) / k_scale), -127, 127)  # (1, nh, 1, hs)
    written_v = np.clip(np.round(heads(v) / v_scale), -127, 127)
    keys = np.concatenate([past_k[:, :, : width - 1], written_k], axis=2) * k_scale  # (1, nh, W, hs)
    values = np.concatenate([past_v[:, :, : width - 1], written_v], axis=2) * v_scale
    scores = heads(q) @ keys.transpose(0, 1, 3, 2) * head_dim**-0.5  # (1, nh, 1, W)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    expected = (probs @ values).transpose(0, 2, 1, 3).reshape(1, 1, -1)  # (1, 1, d)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    np.testing.assert_array_equal(new_k[:, :, width - 1 : width], written_k.astype(np.int8))
    np.testing.assert_array_equal(new_v[:, :, width - 1 : width], written_v.astype(np.int8))
    np.testing.assert_array_equal(new_k[:, :, : width - 1], past_k[:, :, : width - 1])


def test_calibration_covers_every_position_and_refuses_a_short_text(pydocs_export: Path) -> None:
    export = ExportFolder.open(pydocs_export)
    n_positions = export.manifest.dims.n_positions
    ids = calibration_ids(export.tokenizer.encode, default_calibration_text(), n_positions)
    assert ids.shape == (1, n_positions) and ids.dtype == np.int64
    with pytest.raises(InvalidInputError, match="calibration text has"):
        calibration_ids(export.tokenizer.encode, "Too short.", n_positions)


def test_calibration_keeps_no_tokenizer_a_folder_had_not_loaded(pydocs_export: Path) -> None:
    """A folder run by ids (a benchmark, an application that tokenizes for itself) does not keep the vocabulary
    resident for the calibration text; one whose tokenizer is in use encodes with it."""
    export = ExportFolder.open(pydocs_export)
    text = default_calibration_text()
    ids = export.encode_once(text)
    assert "tokenizer" not in vars(export)
    assert ids == export.tokenizer.encode(text)
    loaded = export.tokenizer
    assert export.encode_once(text) == ids and export.tokenizer is loaded
    model = LoadedExport.open(ExportFolder.open(pydocs_export), RuntimeOptions(kv_cache="int8"))
    assert "tokenizer" not in vars(model.export)


def test_measured_scales_hold_the_calibration_text_without_clipping(pydocs_export: Path) -> None:
    """Every key and value the float32 cache holds for the same chunk (decode.onnx's presents) fits its channel's
    int8 range with room to spare: the probes, measured over an int8 cache, differ from them by far less than the
    margin. The largest channels set their own scales, and no scale is below the floor (a fraction of its layer's
    largest)."""
    export = ExportFolder.open(pydocs_export)
    graph, dims = _int8_graph(pydocs_export)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(pydocs_export))
    session = ort.InferenceSession(graph.SerializeToString(), options, providers=["CPUExecutionProvider"])
    ids = calibration_ids(export.tokenizer.encode, default_calibration_text(), dims.n_positions)[:, :CHUNK]
    scales = measure_cache_scales(session, probe_names(graph), dims, ids, margin=1.25)
    assert scales.key.shape == scales.value.shape == (dims.n_layer, dims.n_head, dims.head_dim)
    decode = ort.InferenceSession(str(pydocs_export / "decode.onnx"), providers=["CPUExecutionProvider"])
    ones = np.ones_like(ids)
    feeds = {"input_ids": ids, "attention_mask": ones, "position_ids": position_ids(ones)}
    feeds.update(dict.fromkeys(past_names(dims.n_layer), np.zeros((1, dims.n_head, 0, dims.head_dim), np.float32)))
    names = [present_name(i, kind) for i in range(dims.n_layer) for kind in KV_KINDS]
    presents = dict(zip(names, decode.run(names, feeds), strict=True))
    for layer in range(dims.n_layer):
        for kind, layer_scales in zip(KV_KINDS, (scales.key[layer], scales.value[layer]), strict=True):
            largest = np.abs(presents[present_name(layer, kind)][0]).max(axis=1)  # (nh, hs)
            in_steps = largest / layer_scales  # (nh, hs): the largest |value| in quantization steps
            assert np.all(in_steps <= 127 / 1.25 * 1.05)  # the margin's 25 % of headroom barely touched
            assert in_steps.max() >= 127 / 1.25 * 0.95  # the largest channel set its own scale
            assert layer_scales.min() >= 0.02 * layer_scales.max() / 1.25 - 1e-9
    with pytest.raises(InvalidInputError, match="margin must be"):
        measure_cache_scales(session, probe_names(graph), dims, ids, margin=0.5)


def test_trained_logits_stay_close_to_the_float32_cache(pydocs_pair: tuple[LoadedExport, LoadedExport]) -> None:
    """Teacher-forced decode after a padded batch of prompts: every step's distribution within KL 0.005 of the
    float32 cache's (int8 weights' limit) and the same argmax where the float32 cache's top two are not near-tied."""
    int8, float32 = pydocs_pair
    assert int8.steps.in_place and int8.steps.cache_dtype == np.int8
    tokenizer = float32.export.tokenizer if float32.export is not None else None
    assert tokenizer is not None
    prompts = [
        tokenizer.encode("The :func:`open` function returns a file object whose type depends on the mode"),
        tokenizer.encode("import os"),
        tokenizer.encode("Exceptions raised in a generator"),
    ]
    steps = 24
    chosen = generate_ids(float32, prompts, GenerationOptions(max_new_tokens=steps, ignore_eos=True))
    logits: dict[str, list[np.ndarray]] = {}
    for name, loaded in (("int8", int8), ("float32", float32)):
        ids, mask = left_pad(prompts, 0)  # (B, T)
        runner = KvCacheRunner(loaded, capacity=ids.shape[1] + steps)
        logits[name] = [runner.prefill(ids, mask, position_ids(mask))]
        for step in range(steps - 1):
            tokens = np.array([[r.token_ids[step]] for r in chosen], dtype=np.int64)  # (B, 1)
            mask = np.concatenate([mask, np.ones_like(tokens)], axis=1)
            logits[name].append(runner.decode(tokens, mask, position_ids(mask)[:, -1:]))
    found, expected = np.concatenate(logits["int8"]), np.concatenate(logits["float32"])  # (steps·B, V)
    assert _kl(expected, found).max() < 0.005
    top2 = np.sort(expected, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 0.05
    assert np.array_equal(found.argmax(-1)[clear], expected.argmax(-1)[clear])
    assert not np.array_equal(found, expected)  # the cache really is quantized


def test_a_prompt_in_chunks_writes_the_int8_cache_a_whole_prompt_writes(
    pydocs_export: Path, pydocs_pair: tuple[LoadedExport, LoadedExport]
) -> None:
    """RuntimeOptions.prefill_chunk over the int8 cache: 100 prompt tokens in runs of 16, each after the int8 cache
    the runs before it wrote, give the whole-prompt run's logits and cache (measured: equal)."""
    whole = pydocs_pair[0]
    chunked = LoadedExport.load(pydocs_export, replace(INT8, prefill_chunk=16))
    assert whole.export is not None
    text = (PYDOCS / "heldout.txt").read_text(encoding="utf-8")[:2000]
    ids = np.array([whole.export.tokenizer.encode(text)[:100]], dtype=np.int64)  # (1, 100)
    ones = np.ones_like(ids)
    found = []
    for loaded in (whole, chunked):
        runner = KvCacheRunner(loaded, capacity=ids.shape[1])
        found.append((runner.prefill(ids, ones, position_ids(ones)), runner.past_arrays()))  # (1, V), caches
    (logits, cache), (chunked_logits, chunked_cache) = found
    np.testing.assert_allclose(chunked_logits, logits, atol=1e-5 * np.abs(logits).max())
    for got, want in zip(chunked_cache, cache, strict=True):  # (1, nh, 100, hs) int8 each
        assert got.dtype == np.int8
        assert np.abs(got.astype(np.int16) - want).max() <= 1


def test_perplexity_through_the_int8_cache_moves_by_under_a_percent(
    pydocs_pair: tuple[LoadedExport, LoadedExport],
) -> None:
    """Scored as generation computes it (one decode step per token over the int8 cache) against the folder's
    decode graph; the stepped path itself is exact (float32 cache: the same log-probabilities)."""
    int8, float32 = pydocs_pair
    assert float32.export is not None
    text = (PYDOCS / "heldout.txt").read_text(encoding="utf-8")[:3000]
    ids = float32.export.tokenizer.encode(text)
    plan = plan_windows(len(ids), 256, 128)
    reference = export_log_probs(float32, ids, plan)
    quantized = export_log_probs(int8, ids, plan)
    relative = np.exp(-quantized.mean()) / np.exp(-reference.mean()) - 1
    assert abs(relative) < 0.01, relative
    stepped = export_log_probs(float32, ids, plan, stepped=True)
    np.testing.assert_allclose(stepped, reference, atol=1e-4)


def test_the_serving_engine_runs_an_int8_running_batch(peaked_export: Path) -> None:
    """Requests joining and leaving the running batch get the tokens generation gives each alone, both over the
    int8 cache (the batch keeps int8 rows in place)."""
    schedule = [(0, [15496], 9), (0, [464, 2068, 7586, 21831] * 5, 12), (2, [818, 257, 1049], 5)]
    engine = BatchEngine.load(peaked_export, INT8, EngineOptions(max_rows=8, trim_columns=1))
    assert engine.loaded.steps.cache_dtype == np.int8
    served = serve_schedule(engine, schedule)
    alone = LoadedExport.load(peaked_export, INT8)
    for (_, prompt, new), tokens in zip(schedule, served, strict=True):
        expected = generate_ids(alone, [prompt], GenerationOptions(max_new_tokens=new, ignore_eos=True))[0]
        assert tokens == expected.token_ids


def test_where_an_int8_cache_cannot_apply(tiny_export: Path, shared_export: Callable[..., Path]) -> None:
    with pytest.raises(InvalidInputError, match="needs the merged layout"):
        LoadedExport.load(tiny_export, RuntimeOptions(layout="split", kv_cache="int8"))
    with pytest.raises(InvalidInputError, match="written in place only"):
        RuntimeOptions(kv_cache="int8", in_place_kv="off")
    with pytest.raises(InvalidInputError, match="kv_cache must be one of"):
        RuntimeOptions(kv_cache="int4")  # type: ignore[arg-type]
    with pytest.raises(OptionError):
        kv_cache_format("fp8")
    dims = ExportFolder.open(tiny_export).manifest.dims
    graph = last_position_logits(load_graph(tiny_export, DECODE))
    with pytest.raises(InvalidInputError, match="CPU provider only"):
        in_place_graph(graph, dims, "auto", "cuda", int8_cache=True)  # auto still refuses: int8 is only in place
    with pytest.raises(InPlaceRefused, match="cast to another type"):
        LoadedExport.load(shared_export(precision="fp16"), INT8)


def test_the_buffer_pool_keeps_each_dtype_apart() -> None:
    pool = BufferPool(keep=4)
    floats, bytes_ = np.empty(100, np.float32), np.empty(400, np.int8)
    pool.give([floats, bytes_])
    assert pool.take(50, np.int8) is bytes_
    assert pool.take(50) is floats
    assert pool.take(10, np.int8).dtype == np.int8


def test_run_with_an_int8_cache_and_its_refusals(tiny_export: Path) -> None:
    args = ("run", str(tiny_export), "--prompt", "Hello there", "--max-new-tokens", "6", "--no-stream")
    result = invoke(*args, "--kv-cache", "int8")
    assert result.exit_code == 0 and result.stdout.startswith("Hello there"), result.output
    split = invoke(*args, "--kv-cache", "int8", "--layout", "split")
    assert split.exit_code == 2 and "needs the merged layout" in one_error_line(split.output), split.output
    off = invoke(*args, "--kv-cache", "int8", "--in-place-kv", "off")
    assert off.exit_code == 2 and "written in place only" in one_error_line(off.output), off.output
    bad = invoke(*args, "--kv-cache", "int4")
    assert bad.exit_code == 2 and "int4" in bad.output


def test_verify_checks_generation_over_the_int8_cache(pydocs_export: Path, tmp_path: Path) -> None:
    """``verify --kv-cache int8`` adds the padded batch's steps and free-running greedy over the int8 cache, judged
    by the loosened limits it prints, and scores the perplexity through the cache."""
    text = tmp_path / "heldout-part.txt"
    text.write_text((PYDOCS / "heldout.txt").read_text(encoding="utf-8")[:3000], encoding="utf-8")
    args = ("verify", str(pydocs_export), "--steps", "6", "--batch-size", "2", "--kv-cache", "int8")
    result = invoke(*args, "--perplexity", str(text), "--perplexity-window", "256", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["kv_cache"] == "int8" and report["result"] == "pass"
    checks = [c["check"] for c in report["comparisons"] if c["check"].endswith("int8 KV cache")]
    assert len(checks) == 4 and any(check.startswith("generation row 1") for check in checks)
    assert report["perplexity"]["max_relative"] == pytest.approx(1e-4 + 1e-2) and report["perplexity"]["ok"]


def test_beam_search_reorders_the_int8_cache(peaked_export: Path) -> None:
    """The shared int8 buffer moves only the past's columns when beam search reorders its rows; beam search over it
    runs end to end and keeps the float32 cache's leading tokens and scores on a peaked model (its later steps may
    part at a near-tie between beams)."""
    buffers = SharedKvBuffers(2, 2, 2, 8, 4, max_batch=4, dtype=np.int8)
    past = np.random.default_rng(0).integers(-127, 128, size=(2, 2, 2, 5, 4)).astype(np.int8)  # (count, B, nh, P, hs)
    buffers._tensors(2)[:, :, :, :5] = past
    buffers.advance(5)
    buffers.reorder(np.array([1, 1, 0]))
    for index in range(2):
        np.testing.assert_array_equal(buffers.past(index), past[index][[1, 1, 0]])
    prompts = [[15496], [464, 2068, 7586, 21831, 18045], [818, 257, 1049]]
    options = GenerationOptions(max_new_tokens=10, ignore_eos=True, num_beams=3, num_return_sequences=2)
    found = generate_ids(LoadedExport.load(peaked_export, INT8), prompts, options)
    expected = generate_ids(LoadedExport.load(peaked_export, FLOAT), prompts, options)
    assert [(r.index, r.sequence) for r in found] == [(r.index, r.sequence) for r in expected]
    assert [r.token_ids[:5] for r in found] == [r.token_ids[:5] for r in expected]
    np.testing.assert_allclose([r.score for r in found], [r.score for r in expected], atol=0.05)

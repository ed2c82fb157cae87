"""The in-place KV cache (RuntimeOptions.in_place_kv): the generation graph's attention rewritten into
GroupQueryAttention over one fixed-capacity buffer per cache tensor computes what the copying path computes: the
same greedy tokens, fp32 logits within the fp32 rule against the float64 source, for batch 1 and left-padded
batches, past lengths 0, 1 and many, beam search (rows reordered inside the shared buffer) and serve's engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import numpy_helper

from gpt2_onnx_core import compatibility
from gpt2_onnx_core.batching import left_pad, position_ids
from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import InvalidInputError, RuntimeVersionError
from gpt2_onnx_core.names import DECODE, present_name
from gpt2_onnx_core.precisions import FP32_RULE
from gpt2_onnx_exporters.reference import ReferenceModel
from gpt2_onnx_runtimes.batching import BatchEngine, EngineOptions
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.generation_graph import last_position_logits
from gpt2_onnx_runtimes.inplace_attention import InPlaceRefused, in_place_attention, in_place_graph
from gpt2_onnx_runtimes.kv_buffers import SharedKvBuffers
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import invoke, load_graph, one_error_line, serve_schedule

ON = RuntimeOptions(layout="merged", in_place_kv="on")
OFF = RuntimeOptions(layout="merged", in_place_kv="off")
SHORT, LONG = [15496], [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290] * 5  # 1 and 45 tokens
BATCHES = {
    "alone-1": [SHORT],  # the first decode step has a past of 1
    "alone-45": [LONG],
    "padded": [LONG, SHORT, [818, 257, 1049]],  # rows left-padded by 44, 0 and 42
}
STEPS = 6


@pytest.fixture(scope="module", params=["fp32", "int8", "int4", "optimize"])
def variant(request: pytest.FixtureRequest, shared_export: Callable[..., Path]) -> tuple[str, Path]:
    options = {"fp32": {}, "optimize": {"optimize": True}}.get(request.param, {"precision": request.param})
    return request.param, shared_export(**options)


@pytest.fixture(scope="module")
def loaded_pair(variant: tuple[str, Path]) -> tuple[LoadedExport, LoadedExport]:
    return LoadedExport.load(variant[1], ON), LoadedExport.load(variant[1], OFF)


def _dims(folder: Path) -> ModelDims:
    return ExportFolder.open(folder).manifest.dims


def test_every_attention_becomes_one_group_query_attention(variant: tuple[str, Path]) -> None:
    decode = last_position_logits(load_graph(variant[1], DECODE))
    before = decode.SerializeToString()
    dims = _dims(variant[1])
    changed = in_place_attention(decode, dims)
    assert decode.SerializeToString() == before  # a pure transform
    ops = [node.op_type for node in changed.graph.node]
    assert ops.count("GroupQueryAttention") == dims.n_layer
    assert "Concat" not in {node.op_type for node in changed.graph.node if present_name(0, "key") in node.output}
    assert "Softmax" not in ops and "MultiHeadAttention" not in ops  # nothing of the old attention is left
    assert [i.name for i in changed.graph.input] == [i.name for i in decode.graph.input]  # the same inputs
    # Each reads its layer's packed (B, S, 3d) projection itself: the q, k and v Slices are gone (the one Slice
    # left is the head's last position).
    producers = {name: node for node in changed.graph.node for name in node.output}
    for node in (node for node in changed.graph.node if node.op_type == "GroupQueryAttention"):
        assert node.input[1:3] == ["", ""] and producers[node.input[0]].op_type == "Add"
    assert ops.count("Slice") == 1


def test_the_packed_projection_is_read_only_where_the_slices_prove_its_width(tiny_export: Path) -> None:
    """q, k, v as 0:d, d:2d, 2d:end of one projection: packed; a value Slice ending at exactly 3d could leave
    columns after it, so there the three stay apart (the same attention, with its Slices)."""
    decode = last_position_logits(load_graph(tiny_export, DECODE))
    dims = _dims(tiny_export)
    producers = {name: node for node in decode.graph.node for name in node.output}
    constants = {tensor.name: tensor for tensor in decode.graph.initializer}
    for node in decode.graph.node:  # every value Slice (starting at 2d) now ends at 3d, in a constant of its own
        starts = constants.get(node.input[1]) if node.op_type == "Slice" else None
        if starts is not None and numpy_helper.to_array(starts).tolist() == [2 * dims.n_embd]:
            node.input[2] = f"{node.name}/end"
            decode.graph.initializer.append(numpy_helper.from_array(np.array([3 * dims.n_embd]), node.input[2]))
    changed = in_place_attention(decode, dims)
    attentions = [node for node in changed.graph.node if node.op_type == "GroupQueryAttention"]
    assert len(attentions) == dims.n_layer
    for node in attentions:
        assert all(producers[name].op_type == "Slice" for name in node.input[:3])


def _steps(
    loaded: LoadedExport, prompts: list[list[int]], steps: int, capacity: int | None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Prefill the left-padded prompts, then greedy decode ``steps`` tokens: each step's logits (B, V) and the
    tokens chosen (B, steps)."""
    ids, mask = left_pad(prompts, 0)  # (B, T)
    runner = KvCacheRunner(loaded, capacity=capacity)
    logits = [runner.prefill(ids, mask, position_ids(mask))]
    chosen = []
    next_pos = mask.sum(axis=1, keepdims=True)  # (B, 1)
    for _ in range(steps):
        tokens = logits[-1].argmax(axis=-1)[:, None].astype(np.int64)  # (B, 1)
        chosen.append(tokens[:, 0])
        mask = np.concatenate([mask, np.ones_like(tokens)], axis=1)
        logits.append(runner.decode(tokens, mask, next_pos))
        next_pos = next_pos + 1
    return logits, np.stack(chosen, axis=1)


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_steps_equal_the_copying_path(loaded_pair: tuple[LoadedExport, LoadedExport], batch: str) -> None:
    in_place, copying = loaded_pair
    assert in_place.steps.in_place and not copying.steps.in_place
    prompts = BATCHES[batch]
    capacity = max(map(len, prompts)) + STEPS
    found, tokens = _steps(in_place, prompts, STEPS, capacity)
    expected, expected_tokens = _steps(copying, prompts, STEPS, capacity)
    np.testing.assert_array_equal(tokens, expected_tokens)
    for step, (got, want) in enumerate(zip(found, expected, strict=True)):
        np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), err_msg=f"step {step}")


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_fp32_logits_keep_the_fp32_rule(tiny_export: Path, tiny_model: Any, batch: str) -> None:
    """Every step's logits of every row against the float64 source run on that row alone, unpadded."""
    prompts = BATCHES[batch]
    found, tokens = _steps(LoadedExport.load(tiny_export, ON), prompts, STEPS, max(map(len, prompts)) + STEPS)
    reference = ReferenceModel(tiny_model)
    for row, prompt in enumerate(prompts):
        ids = np.array([[*prompt, *tokens[row]]], dtype=np.int64)  # (1, T_row + steps)
        ones = np.ones_like(ids)
        ref = reference.forward(ids, ones, position_ids(ones), exact=True)
        chose = slice(len(prompt) - 1, len(prompt) + STEPS)  # the positions whose logits chose tokens
        exact, single = ref.exact.logits[0, chose], ref.logits[0, chose]  # (steps + 1, V) each
        actual = np.stack([logits[row] for logits in found]).astype(np.float64)  # (steps + 1, V)
        error = np.abs(actual - exact).max()
        limit = FP32_RULE.limit(float(np.abs(single - exact).max()), float(np.abs(exact).max()))
        assert error <= limit, f"row {row}: |Δ| {error:.3g} from float64 > {limit:.3g}"


def test_several_new_tokens_after_a_past(loaded_pair: tuple[LoadedExport, LoadedExport]) -> None:
    """A batch of one takes 3 new tokens after a past of 4; a batch of two is refused with the reason."""
    ids = np.array([LONG[:7]], dtype=np.int64)  # (1, 7)
    ones = np.ones_like(ids)
    outputs = []
    for loaded in loaded_pair:
        runner = KvCacheRunner(loaded, capacity=16)
        runner.prefill(ids[:, :4], ones[:, :4], position_ids(ones[:, :4]))
        outputs.append(runner.decode(ids[:, 4:], ones, position_ids(ones)[:, 4:]))  # (1, V)
    np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5 * np.abs(outputs[1]).max())
    runner = KvCacheRunner(loaded_pair[0], capacity=16)
    two = np.repeat(ids, 2, axis=0)
    runner.prefill(two[:, :4], np.ones_like(two[:, :4]), position_ids(np.ones_like(two[:, :4])))
    with pytest.raises(InvalidInputError, match="batch of one only"):
        runner.decode(two[:, 4:], np.ones_like(two), position_ids(np.ones_like(two))[:, 4:])


def test_a_long_prompt_in_chunks_computes_what_one_run_does(
    variant: tuple[str, Path], loaded_pair: tuple[LoadedExport, LoadedExport]
) -> None:
    """RuntimeOptions.prefill_chunk: a 45-token prompt prefilled in runs of 8 (the last of 5), each after the cache
    the runs before it wrote, gives the whole-prompt run's logits, cache and greedy steps; a padded batch runs
    whole."""
    chunked = LoadedExport.load(variant[1], replace(ON, prefill_chunk=8))
    for batch in ("alone-45", "padded"):
        prompts = BATCHES[batch]
        capacity = max(map(len, prompts)) + STEPS
        found, tokens = _steps(chunked, prompts, STEPS, capacity)
        expected, expected_tokens = _steps(loaded_pair[0], prompts, STEPS, capacity)
        np.testing.assert_array_equal(tokens, expected_tokens)
        for step, (got, want) in enumerate(zip(found, expected, strict=True)):
            np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max(), err_msg=f"{batch}, step {step}")
    ids = np.array([LONG], dtype=np.int64)  # (1, 45)
    ones = np.ones_like(ids)
    runners = [KvCacheRunner(loaded, capacity=len(LONG)) for loaded in (chunked, loaded_pair[0])]
    for runner in runners:
        runner.prefill(ids, ones, position_ids(ones))
        assert runner.past_length == len(LONG)
    for got, want in zip(*(runner.past_arrays() for runner in runners), strict=True):  # (1, nh, 45, hs) each
        np.testing.assert_allclose(got, want, atol=1e-5 * max(np.abs(want).max(), 1.0))


def test_a_kept_binding_serves_the_next_generation_on_the_same_buffer(tiny_export: Path) -> None:
    """The in-place cache's binding is kept per pooled buffer and batch: a second generation of the same size binds
    nothing new and computes what the first did; another size binds anew; close() lets the bindings go."""
    loaded = LoadedExport.load(tiny_export, ON)
    prompts = BATCHES["alone-45"]
    capacity = len(LONG) + STEPS
    first, tokens = _steps(loaded, prompts, STEPS, capacity)
    assert len(loaded.kv_bindings) == 1
    again, again_tokens = _steps(loaded, prompts, STEPS, capacity)
    assert len(loaded.kv_bindings) == 1  # the same buffer, bound once
    np.testing.assert_array_equal(again_tokens, tokens)
    for got, want in zip(again, first, strict=True):
        np.testing.assert_array_equal(got, want)
    _steps(loaded, prompts, STEPS, capacity + 8)
    assert len(loaded.kv_bindings) == 2
    loaded.close()
    assert not len(loaded.kv_bindings)


def test_kept_bindings_tell_apart_caches_of_one_size_in_one_buffer(tiny_export: Path) -> None:
    """A pooled buffer holds a cache of 2 rows × 10 positions, then one of 1 row × 20 (as many elements, the same
    address): the second generation gets a binding of its own shape, and computes what a fresh load does."""
    loaded = LoadedExport.load(tiny_export, ON)
    ids = np.array([LONG[:8]], dtype=np.int64)  # (1, 8)
    ones = np.ones_like(ids)
    first = KvCacheRunner(loaded, capacity=10, max_batch=2)
    first.prefill(ids, ones, position_ids(ones))
    del first  # its buffer goes back to the pool
    found, _ = _steps(loaded, [LONG[:8]], 12, capacity=20)  # 8 + 12 positions: beyond the first cache's 10
    assert len(loaded.kv_bindings) == 2
    expected, _ = _steps(LoadedExport.load(tiny_export, ON), [LONG[:8]], 12, capacity=20)
    for got, want in zip(found, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_prefill_chunk_is_checked_and_follows_the_cache_format_unless_set() -> None:
    with pytest.raises(InvalidInputError, match="prefill_chunk must be >= 0"):
        RuntimeOptions(prefill_chunk=-1)
    assert RuntimeOptions().prefill_chunk_tokens == 256
    assert RuntimeOptions(kv_cache="int8").prefill_chunk_tokens == 128
    assert RuntimeOptions(kv_cache="int8", prefill_chunk=0).prefill_chunk_tokens == 0


def test_without_capacity_the_graph_concatenates(loaded_pair: tuple[LoadedExport, LoadedExport]) -> None:
    """The in-place graph bound to separate past and present (ONNX Runtime allocating each present) computes the
    same: serve's running batch binds it so."""
    prompts = BATCHES["padded"]
    found, tokens = _steps(loaded_pair[0], prompts, 3, capacity=None)
    expected, expected_tokens = _steps(loaded_pair[1], prompts, 3, capacity=None)
    np.testing.assert_array_equal(tokens, expected_tokens)
    np.testing.assert_allclose(found[-1], expected[-1], atol=1e-5 * np.abs(expected[-1]).max())


@pytest.mark.parametrize(
    "options",
    [
        {"num_beams": 3, "num_return_sequences": 2, "length_penalty": 0.8},
        {"num_beams": 4, "no_repeat_ngram_size": 2},
        {"do_sample": True, "seed": 5, "num_return_sequences": 3},  # one prefill row copied into three
    ],
    ids=["beams-3", "beams-4-ngram", "sampled-3"],
)
def test_generation_equals_the_copying_path(peaked_export: Path, options: dict[str, Any]) -> None:
    """Beam search reorders the rows inside the shared buffer at every step; several sequences expand one
    prefilled row into many."""
    prompts = [SHORT, LONG[:12], [818, 257, 1049]]
    chosen = GenerationOptions(max_new_tokens=10, ignore_eos=True, **options)
    found = generate_ids(LoadedExport.load(peaked_export, ON), prompts, chosen)
    expected = generate_ids(LoadedExport.load(peaked_export, OFF), prompts, chosen)
    assert [r.token_ids for r in found] == [r.token_ids for r in expected]
    np.testing.assert_allclose([r.score for r in found], [r.score for r in expected], atol=1e-4)


def test_serve_engine_equals_the_copying_path(tiny_export: Path) -> None:
    """The batching engine's prefill (batch 1, in place) and its running batch (the in-place graph bound to
    separate buffers) give each request the tokens the copying path gives, rows joining and leaving."""
    schedule = [(0, SHORT, 9), (0, LONG[:20], 12), (2, [818, 257, 1049], 5), (4, LONG[:30], 6)]
    results = []
    for runtime in (ON, OFF):
        engine = BatchEngine.load(tiny_export, runtime, EngineOptions(max_rows=8, trim_columns=1))
        assert engine.loaded.steps.in_place == (runtime is ON)
        results.append(serve_schedule(engine, schedule))
    assert results[0] == results[1]
    assert [len(tokens) for tokens in results[0]] == [new for _, _, new in schedule]


def test_fp16_is_copied_under_auto_and_refused_under_on(shared_export: Callable[..., Path]) -> None:
    folder = shared_export(precision="fp16")
    assert not LoadedExport.load(folder, replace(ON, in_place_kv="auto")).steps.in_place
    with pytest.raises(InPlaceRefused, match="cast to another type"):
        LoadedExport.load(folder, ON)


def test_where_it_cannot_apply(tiny_export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert LoadedExport.load(tiny_export, RuntimeOptions(layout="merged")).steps.in_place  # auto: on here
    with pytest.raises(InvalidInputError, match="needs the merged layout"):
        LoadedExport.load(tiny_export, RuntimeOptions(layout="split", in_place_kv="on"))
    assert not LoadedExport.load(tiny_export, RuntimeOptions(layout="split")).steps.in_place
    graph, dims = last_position_logits(load_graph(tiny_export, DECODE)), _dims(tiny_export)
    with pytest.raises(InvalidInputError, match="CPU provider only"):
        in_place_graph(graph, dims, "on", "cuda")
    assert in_place_graph(graph, dims, "auto", "cuda") is None
    assert in_place_graph(graph, dims, "off", "cpu") is None
    monkeypatch.setattr(compatibility, "IN_PLACE_KV_MIN_ONNXRUNTIME", "99.0")  # an older runtime than it needs
    with pytest.raises(RuntimeVersionError, match=r"needs onnxruntime >= 99\.0"):
        in_place_graph(graph, dims, "on", "cpu")
    assert in_place_graph(graph, dims, "auto", "cpu") is None
    with pytest.raises(InvalidInputError, match="in_place_kv must be one of"):
        RuntimeOptions(in_place_kv="sometimes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "rows", [[0, 0, 1, 1], [1, 0], [0, 1], [1, 1], [2, 0, 1]], ids=["expand", "swap", "same", "one-twice", "rotate"]
)
def test_shared_buffer_reorder_moves_only_the_past(rows: list[int]) -> None:
    batch = 2 if max(rows) < 2 and len(rows) != 3 else 3
    buffers = SharedKvBuffers(2, batch, 2, 8, 4, max_batch=4)
    past = np.random.default_rng(0).normal(size=(2, batch, 2, 5, 4)).astype(np.float32)  # (count, B, nh, P, hs)
    buffers._tensors(batch)[:, :, :, :5] = past
    buffers.advance(5)
    buffers.reorder(np.array(rows))
    assert buffers.batch == len(rows)
    for index in range(2):
        np.testing.assert_array_equal(buffers.past(index), past[index][rows])
    with pytest.raises(ValueError, match="cannot reorder"):
        buffers.reorder(np.array([0, 9]))


def test_run_in_place_and_copied_print_the_same_text_and_on_is_refused_where_it_cannot_apply(
    tiny_export: Path, shared_export: Callable[..., Path]
) -> None:
    """``run --in-place-kv``: on and off print the same greedy text; on, where it cannot apply, is one error line
    and exit 2 before any token (the split layout, an fp16 cache)."""
    args = ("run", str(tiny_export), "--prompt", "Hello there", "--max-new-tokens", "8", "--no-stream")
    printed = {mode: invoke(*args, "--in-place-kv", mode) for mode in ("on", "off", "auto")}
    assert all(result.exit_code == 0 for result in printed.values()), {m: r.output for m, r in printed.items()}
    assert printed["on"].stdout == printed["off"].stdout == printed["auto"].stdout
    split = invoke(*args, "--in-place-kv", "on", "--layout", "split")
    assert split.exit_code == 2 and "needs the merged layout" in one_error_line(split.output), split.output
    fp16 = invoke("run", str(shared_export(precision="fp16")), "--prompt", "Hi", "--in-place-kv", "on")
    assert fp16.exit_code == 2 and "cast to another type" in one_error_line(fp16.output), fp16.output
    assert "Hello there" not in split.stdout

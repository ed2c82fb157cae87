"""``--precision fp16|int8|int4`` on the tiny checkpoint: parity within the precision's tolerances, the tie kept
as one quantized table, one weights file, golden vectors the export itself reproduces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest

from gpt2_onnx_core.block_quant import dequantize, quantize_blocks, unpack
from gpt2_onnx_core.compatibility import min_onnxruntime_for
from gpt2_onnx_core.config import ExportOptions
from gpt2_onnx_core.errors import ExportError, InvalidInputError
from gpt2_onnx_core.golden import GoldenCase, greedy_agreement, ranks_agree, read_golden
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import DECODE, GRAPHS
from gpt2_onnx_core.precisions import Quantization, precision_flag, precision_named, tolerance_for
from gpt2_onnx_core.weights_index import INDEX_DTYPES, index_of_graphs
from gpt2_onnx_exporters.variants import GraphVariant, check_variant_tie
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.golden_check import check_golden
from gpt2_onnx_runtimes.session import LoadedExport
from tests.conftest import export_checkpoint
from tests.helpers import load_graph, manifest_dims, vocab_by_d_initializers

TABLE = "transformer.wte.weight"


@pytest.fixture(scope="module", params=["fp16", "int8", "int4"])
def precision_export(request: pytest.FixtureRequest, shared_export: Callable[..., Path]) -> tuple[str, Path]:
    return request.param, shared_export(precision=request.param)  # the export ran its parity check


def test_manifest_records_precision_and_runtime(precision_export: tuple[str, Path]) -> None:
    precision, folder = precision_export
    manifest = read_manifest(folder)
    assert manifest.precision == {"fp16": "float16", "int8": "int8", "int4": "int4"}[precision]
    assert manifest.export["options"]["precision"] == precision
    assert manifest.min_onnxruntime
    assert tolerance_for(manifest.precision).basis != "provisional"
    graphs = ((load_graph(folder, kind), folder / f"{kind}.onnx") for kind in GRAPHS)
    assert manifest.weights_index == index_of_graphs(graphs)  # the map the C++ sample could read
    assert {ref.dtype.name for ref in manifest.weights_index} <= set(INDEX_DTYPES)
    assert all(ref.offset % 4096 == 0 for ref in manifest.weights_index)


def test_weights_shrink_and_stay_in_one_file(precision_export: tuple[str, Path], tiny_export: Path) -> None:
    precision, folder = precision_export
    fp32 = (tiny_export / "model.onnx.data").stat().st_size
    size = (folder / "model.onnx.data").stat().st_size
    assert size < {"fp16": 0.55, "int8": 0.4, "int4": 0.25}[precision] * fp32
    assert sorted(p.name for p in folder.glob("*.data")) == ["model.onnx.data"]


def test_tie_survives(precision_export: tuple[str, Path]) -> None:
    precision, folder = precision_export
    vocab, d = manifest_dims(folder)
    for kind in GRAPHS:
        graph = load_graph(folder, kind)
        if precision == "fp16":
            assert vocab_by_d_initializers(graph, vocab, d) == [TABLE]
            readers = {n.op_type for n in graph.graph.node if TABLE in n.input}
            assert readers == {"Gather", "Gemm"}
            continue
        assert vocab_by_d_initializers(graph, vocab, d) == []  # no float copy beside the quantized table
        bits = precision[-1]
        for name in (f"{TABLE}.int{bits}", f"{TABLE}.scales"):
            readers = {n.op_type for n in graph.graph.node if name in n.input}
            assert readers == {"Gather", "MatMulNBits"}, (kind, name, readers)


def test_generation_and_own_golden_vectors(precision_export: tuple[str, Path]) -> None:
    _, folder = precision_export
    loaded = LoadedExport.load(folder)
    results = generate_ids(loaded, [[464, 2068], [15496]], GenerationOptions(max_new_tokens=5, ignore_eos=True))
    assert [len(r.token_ids) for r in results] == [5, 5]
    report = check_golden(loaded)
    assert report.ok, report.summary()


def test_tie_check_refuses_a_float_copy_beside_the_quantized_table(precision_export: tuple[str, Path]) -> None:
    precision, folder = precision_export
    if precision == "fp16":
        pytest.skip("fp16 keeps the float table: the fp32 tie check covers it")
    manifest = read_manifest(folder)
    graph = load_graph(folder, DECODE)
    copy = onnx.numpy_helper.from_array(np.zeros((manifest.dims.vocab_size, manifest.dims.n_embd), np.float32), "copy")
    graph.graph.initializer.append(copy)
    precision = precision_named(manifest.precision)
    variant = GraphVariant(precision=precision, quantization=precision.quantization)
    with pytest.raises(ExportError, match="float"):
        check_variant_tie(graph, manifest.dims, True, TABLE, variant, "decode")


@pytest.mark.parametrize("bits", [4, 8])
def test_block_quantization_round_trip(bits: int) -> None:
    weight = np.random.default_rng(0).standard_normal((6, 64)).astype(np.float32)
    quantized = quantize_blocks(weight, bits, 32)
    assert quantized.packed.shape == (6, 2, 32 * bits // 8)
    step = np.abs(weight).reshape(6, 2, 32).max(-1) / ((1 << (bits - 1)) - 1)  # (N, K/b)
    error = np.abs(dequantize(quantized) - weight).reshape(6, 2, 32)
    assert (error <= step[..., None] / 2 + 1e-7).all()  # round to nearest: within half a step
    assert unpack(quantized).max() < 1 << bits


def test_four_bit_packing_is_low_nibble_first() -> None:
    weight = np.zeros((1, 32), np.float32)
    weight[0, 0], weight[0, 1] = -1.0, 1.0  # q = 8 - 7 = 1 and 8 + 7 = 15
    packed = quantize_blocks(weight, 4, 32).packed
    assert packed[0, 0, 0] == 1 | (15 << 4)


def test_block_size_fits_the_input_features() -> None:
    settings = Quantization(bits=8, block_size=128, accuracy_level=4)
    assert settings.block_for(768) == 128
    assert settings.block_for(64) == 64
    with pytest.raises(ExportError):
        settings.block_for(24)


def test_unknown_precision_and_simplify_with_precision_are_refused(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        ExportOptions(model=str(tiny_checkpoint), precision="int3")
    with pytest.raises(InvalidInputError, match="simplify runs on plain fp32 graphs only"):
        export_checkpoint(tiny_checkpoint, tmp_path / "x", precision="int4", simplify=True)
    assert not (tmp_path / "x").exists()


def test_minimum_runtime_follows_the_variant() -> None:
    def minimum(opset: int, flag: str = "fp32", optimize: bool = False) -> str:
        return min_onnxruntime_for(opset, optimize, precision_flag(flag))

    assert minimum(17) == "1.15.0"
    assert minimum(17, "fp16") == "1.15.0"
    assert minimum(17, "int4") == "1.17.0"
    assert minimum(17, "int8") == "1.22.0"
    assert minimum(21, "fp16") == "1.18.0"  # the opset's own minimum is higher
    assert minimum(21, "int4") == "1.18.0"  # the opset's minimum again
    assert minimum(17, "int4", optimize=True) == "1.20.0"


@pytest.mark.parametrize(
    ("expected", "agree"),
    [
        ([4, 3, 2, 1, 0], True),  # the exact order
        ([4, 2, 3, 1, 0], True),  # 3 and 2 tie within 2 × atol (0.05 apart)
        ([4, 3, 2, 0, 1], False),  # 1 and 0 are 0.5 apart: a real reordering
        ([4, 3, 2, 1, 5], True),  # the fifth replaced by an id tied with it (0.02 below)
        ([4, 3, 2, 1, 6], False),  # the fifth replaced by an id far below it
        ([4, 3, 2, 1], True),  # fewer expected ids than five
    ],
)
def test_golden_ranks_agree_up_to_ties_within_the_tolerance(expected: list[int], agree: bool) -> None:
    logits = np.array([0.0, 0.5, 1.0, 1.05, 2.0, -0.02, -3.0], dtype=np.float32)  # (V,)
    assert ranks_agree(logits, expected, atol=0.05) is agree
    assert ranks_agree(logits, [4, 3, 2, 1, 0], atol=1e-4)  # fp32's tolerance: only the exact order
    assert not ranks_agree(logits, [4, 2, 3, 1, 0], atol=1e-4)


def _case(greedy: list[int], margins: list[float]) -> GoldenCase:
    return GoldenCase("p", [1, 2], greedy, [5], [0.0], margins)


@pytest.mark.parametrize(
    ("got", "margins", "ok", "detail"),
    [
        ([7, 8, 9], [1.0, 1.0, 1.0], True, "3 greedy tokens match"),
        ([7, 3, 4], [1.0, 0.05, 1.0], True, "1 token matches, then a near-tie at step 1"),  # 0.05 <= 2 × 0.1
        ([7, 3, 9], [1.0, 0.5, 1.0], False, "diverges at step 1: 3 vs expected 8"),  # a clear choice differs
        ([7, 3, 9], [], False, "diverges at step 1"),  # an older golden file without margins: exact
        ([7, 8], [1.0, 1.0, 1.0], False, "diverges at step 2: None vs expected 9"),
        ([7, 8, 9, 10], [1.0, 1.0, 1.0], False, "4 tokens vs 3 expected"),
    ],
)
def test_greedy_tokens_may_diverge_only_at_a_near_tie(
    got: list[int], margins: list[float], ok: bool, detail: str
) -> None:
    agreement = greedy_agreement(got, _case([7, 8, 9], margins), atol=0.1)
    assert agreement.ok is ok
    assert detail in agreement.detail


def test_golden_records_a_margin_per_greedy_step(precision_export: tuple[str, Path], tiny_export: Path) -> None:
    for folder in (precision_export[1], tiny_export):  # the export's own golden and the source model's
        for case in read_golden(folder).cases:
            assert len(case.greedy_margins) == len(case.greedy_ids)
            assert all(m >= 0 for m in case.greedy_margins)

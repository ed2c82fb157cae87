"""``export --optimize``: ONNX Runtime contrib-op fusions on the tiny checkpoint, tie and weights file kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import GRAPHS
from gpt2_onnx_runtimes.generate import generate_ids
from gpt2_onnx_runtimes.generation import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import external_locations, load_graph, manifest_dims, vocab_by_d_initializers

TABLE = "transformer.wte.weight"


@pytest.fixture(scope="module")
def optimized_export(shared_export: Callable[..., Path]) -> Path:
    return shared_export(optimize=True)


def test_fused_operators_replace_the_plain_ones(optimized_export: Path) -> None:
    n_layer = read_manifest(optimized_export).dims.n_layer
    for kind in GRAPHS:
        ops = Counter((n.domain, n.op_type) for n in load_graph(optimized_export, kind).graph.node)
        assert ops[("com.microsoft", "SkipLayerNormalization")] == 2 * n_layer + 1  # ln_2 per block, ln_1 + ln_f
        assert ops[("com.microsoft", "MultiHeadAttention")] == n_layer
        assert ops[("", "Softmax")] == 0


def test_tie_and_one_weights_file_kept(optimized_export: Path) -> None:
    vocab, d = manifest_dims(optimized_export)
    for kind in GRAPHS:
        graph = load_graph(optimized_export, kind)
        assert vocab_by_d_initializers(graph, vocab, d) == [TABLE]
        assert {n.op_type for n in graph.graph.node if TABLE in n.input} == {"Gather", "Gemm"}
        assert external_locations(graph) == {"model.onnx.data"}
    manifest = read_manifest(optimized_export)
    assert manifest.export["options"]["optimize"] is True
    assert manifest.precision == "float32"


def test_optimized_generation_equals_plain(optimized_export: Path, tiny_export: Path) -> None:
    prompts = [[464, 2068, 7586], [15496]]
    options = GenerationOptions(max_new_tokens=8, ignore_eos=True)
    plain = generate_ids(LoadedExport.load(tiny_export, RuntimeOptions()), prompts, options)
    fused = generate_ids(LoadedExport.load(optimized_export, RuntimeOptions()), prompts, options)
    assert [r.token_ids for r in fused] == [r.token_ids for r in plain]

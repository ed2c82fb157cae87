"""``export --accuracy-level`` and ``--matmul-kernel``: each lands in the graphs and in manifest.json, the export
passes ``verify`` with it, and a value it cannot take is refused in one line before any work."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpt2_onnx.app.verify import VerifyOptions, verify_export
from gpt2_onnx_core.config import ExportOptions
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import GRAPHS
from gpt2_onnx_core.precisions import precision_flag
from tests.helpers import invoke, load_graph, one_error_line

CONTRIB = "com.microsoft"


def _contrib_nodes(folder: Path, op_type: str) -> list[dict[str, object]]:
    """The attributes of every ``op_type`` node of both graphs."""
    found = []
    for kind in GRAPHS:
        for node in load_graph(folder, kind).graph.node:
            if node.domain == CONTRIB and node.op_type == op_type:
                found.append({a.name: a.i for a in node.attribute if a.type == a.INT})
    return found


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_accuracy_level_in_graph_and_manifest_and_verify_passes(
    shared_export: Callable[..., Path], precision: str
) -> None:
    folder = shared_export(precision=precision, accuracy_level=0, matmul_kernel="matmulnbits")
    nodes = _contrib_nodes(folder, "MatMulNBits")
    assert len(nodes) > 2 and {node["accuracy_level"] for node in nodes} == {0}
    quantization = read_manifest(folder).export["quantization"]
    assert quantization["accuracy_level"] == 0 and quantization["kernel"] == "matmulnbits"
    assert read_manifest(folder).export["options"]["accuracy_level"] == 0
    report = verify_export(VerifyOptions(folder, steps=4, batch_size=2))
    assert report.ok, report.parity.failures


def test_dynamic_kernel_multiplies_the_blocks_and_keeps_the_tied_table(shared_export: Callable[..., Path]) -> None:
    folder = shared_export(precision="int8", matmul_kernel="dynamic")
    layers = read_manifest(folder).dims.n_layer
    for kind in GRAPHS:
        graph = load_graph(folder, kind).graph
        dynamic = [node for node in graph.node if node.op_type == "DynamicQuantizeMatMul"]
        assert len(dynamic) == 4 * layers  # qkv, attention projection, MLP in and out
        weights = {init.name: init for init in graph.initializer}
        assert all(weights[node.input[1]].data_type == 3 for node in dynamic)  # int8 (K, N)
        heads = [node for node in graph.node if node.op_type == "MatMulNBits"]
        assert len(heads) == 1 and heads[0].input[1] == "transformer.wte.weight.int8"  # the tied head, blocks
    assert read_manifest(folder).export["quantization"]["kernel"] == "dynamic"
    report = verify_export(VerifyOptions(folder, steps=4, batch_size=2))
    assert report.ok, report.parity.failures


def test_defaults_come_from_the_precision_table() -> None:
    for flag in ("int8", "int4"):
        assert ExportOptions(precision=flag).quantization == precision_flag(flag).quantization
    options = ExportOptions(precision="int4", accuracy_level=1, block_size=64)
    assert options.quantization is not None
    assert (options.quantization.accuracy_level, options.quantization.block_size) == (1, 64)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--accuracy-level", "7", "--precision", "int4"], "--accuracy-level must be one of 0..4, got 7"),
        (["--accuracy-level", "4"], "--accuracy-level applies to --precision int8 or int4 only"),
        (["--matmul-kernel", "dynamic"], "--matmul-kernel applies to --precision int8 or int4 only"),
        (
            ["--matmul-kernel", "dynamic", "--precision", "int4"],
            "--matmul-kernel dynamic needs 8-bit weights: --precision int8",
        ),
    ],
)
def test_bad_values_are_refused_in_one_line(tmp_path: Path, options: list[str], message: str) -> None:
    out = tmp_path / "out"
    result = invoke("export", "--model", "random:tiny", *options, "-o", str(out))
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result.output)
    assert not out.exists()


def test_an_unknown_kernel_is_refused_by_the_python_api() -> None:
    with pytest.raises(InvalidInputError, match=r"^matmul_kernel must be one of matmulnbits, dynamic, got 'fast'$"):
        ExportOptions(precision="int8", matmul_kernel="fast")  # type: ignore[arg-type]  # the refusal under test

"""The export folder's structure: one tied initializer, one shared weights file, opset/IR/checker, manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from gpt2_onnx_core.hashing import sha256_file
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import GRAPH_FILES, GRAPHS, WEIGHTS_FILE, graph_inputs, graph_outputs, past_names
from tests.conftest import export_checkpoint
from tests.helpers import external_locations, load_graph, manifest_dims, vocab_by_d_initializers

EXPECTED_FILES = {
    "prefill.onnx",
    "decode.onnx",
    WEIGHTS_FILE,
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "config.json",
    "generation_config.json",
    "golden.json",
    "genai_config.json",
    "manifest.json",
}


def test_folder_holds_the_deployment_unit(tiny_export: Path) -> None:
    names = {p.name for p in tiny_export.iterdir()}
    assert names >= EXPECTED_FILES
    assert not [n for n in names if n.startswith(".")], "no temporary files left behind"


@pytest.mark.parametrize("kind", GRAPHS)
def test_tied_head_is_one_initializer_read_by_gather_and_gemm(tiny_export: Path, kind: str) -> None:
    graph = load_graph(tiny_export, kind)  # type: ignore[arg-type]
    vocab, d = manifest_dims(tiny_export)
    assert vocab_by_d_initializers(graph, vocab, d) == ["transformer.wte.weight"]
    readers = [n for n in graph.graph.node if "transformer.wte.weight" in n.input]
    assert sorted(n.op_type for n in readers) == ["Gather", "Gemm"]
    gemm = next(n for n in readers if n.op_type == "Gemm")
    assert onnx.helper.get_node_attr_value(gemm, "transB") == 1
    assert not any(n.op_type == "Transpose" and "transformer.wte.weight" in n.input for n in graph.graph.node)


def test_both_graphs_share_one_weights_file_at_the_same_offsets(tiny_export: Path) -> None:
    graphs = {kind: load_graph(tiny_export, kind) for kind in GRAPHS}
    for graph in graphs.values():
        assert external_locations(graph) == {WEIGHTS_FILE}

    def offsets(graph: onnx.ModelProto) -> dict[str, tuple[str, str]]:
        table = {}
        for t in graph.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                entries = {e.key: e.value for e in t.external_data}
                table[t.name] = (entries["offset"], entries["length"])
        return table

    prefill, decode = offsets(graphs["prefill"]), offsets(graphs["decode"])
    assert prefill == decode and len(prefill) > 10
    weights = (tiny_export / WEIGHTS_FILE).stat().st_size
    assert max(int(o) + int(n) for o, n in prefill.values()) == weights


def test_export_is_no_bigger_than_the_weights(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    graph_and_weights = sum((tiny_export / n).stat().st_size for n in [*GRAPH_FILES.values(), WEIGHTS_FILE])
    assert graph_and_weights <= 1.01 * manifest.model["parameter_bytes"]


@pytest.mark.parametrize("kind", GRAPHS)
def test_opset_ir_version_and_full_checker(tiny_export: Path, kind: str) -> None:
    path = tiny_export / GRAPH_FILES[kind]  # type: ignore[index]
    onnx.checker.check_model(str(path), full_check=True)
    graph = onnx.load(str(path), load_external_data=False)
    assert [(o.domain, o.version) for o in graph.opset_import] == [("", 17)]
    assert graph.ir_version == 8, "the lowest IR version opset 17 allows, so older runtimes load it"
    assert not any(node.metadata_props for node in graph.graph.node)


@pytest.mark.parametrize("kind", GRAPHS)
def test_io_contract_names_types_and_dimensions(tiny_export: Path, kind: str) -> None:
    dims = read_manifest(tiny_export).dims
    graph = load_graph(tiny_export, kind)  # type: ignore[arg-type]
    specs = [
        *graph_inputs(kind, dims),  # type: ignore[arg-type]
        *graph_outputs(kind, dims, all_logits=False),  # type: ignore[arg-type]
    ]
    values = [*graph.graph.input, *graph.graph.output]
    assert [v.name for v in values] == [s.name for s in specs]
    for value, spec in zip(values, specs, strict=True):
        shape = [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        assert shape == list(spec.dims), value.name


def test_decode_names_follow_the_shared_convention(tiny_export: Path) -> None:
    decode = load_graph(tiny_export, "decode")
    inputs = [v.name for v in decode.graph.input]
    outputs = [v.name for v in decode.graph.output]
    assert inputs[:5] == [
        "input_ids",
        "attention_mask",
        "position_ids",
        "past_key_values.0.key",
        "past_key_values.0.value",
    ]
    assert outputs[:3] == ["logits", "present.0.key", "present.0.value"]


def test_onnxruntime_optimizations_do_not_copy_the_embedding(tiny_export: Path, tmp_path: Path) -> None:
    """ONNX Runtime's constant folding at session load must not create a transposed [d × vocab] copy."""
    vocab, d = manifest_dims(tiny_export)
    for kind in GRAPHS:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(tmp_path / f"{kind}.opt.onnx")
        ort.InferenceSession(str(tiny_export / GRAPH_FILES[kind]), options, providers=["CPUExecutionProvider"])  # type: ignore[index]
        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
        assert len(vocab_by_d_initializers(optimized, vocab, d)) == 1, kind


def test_manifest_records_every_file_with_size_and_sha256(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    assert set(manifest.files) == EXPECTED_FILES - {"manifest.json"}
    for name, record in manifest.files.items():
        assert (tiny_export / name).stat().st_size == record.size
        assert sha256_file(tiny_export / name) == record.sha256


def test_manifest_states_the_contract(tiny_export: Path) -> None:
    data = json.loads((tiny_export / "manifest.json").read_text())
    assert data["opset"] == 17 and data["ir_version"] == 8
    assert "cumsum(attention_mask" in data["position_ids_rule"]
    assert data["padding_side"] == "left"
    assert data["tokens"]["eos_token_id"] == 50256
    assert data["model"]["tied_lm_head"] is True
    assert set(data["dimensions"]) == {"batch", "sequence", "past_sequence", "total_sequence"}
    assert {"torch", "transformers", "onnx"} <= set(data["export"]["environment"]["libraries"])
    decode_inputs = data["graphs"]["decode"]["inputs"]
    assert decode_inputs[3] == {
        "name": "past_key_values.0.key",
        "dtype": "float32",
        "dims": ["batch", 4, "past_sequence", 16],
        "meaning": decode_inputs[3]["meaning"],
    }


def test_tokenizer_files_are_the_real_gpt2_bpe(tiny_export: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tiny_export / "tokenizer.json"))
    assert tokenizer.encode("Hello world").ids == [15496, 995]
    assert len(json.loads((tiny_export / "vocab.json").read_text())) == 50257
    config = json.loads((tiny_export / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|endoftext|>" and config["model_max_length"] == 128


def test_simplify_keeps_the_tie_and_the_shared_file(tiny_checkpoint: Path, tmp_path: Path) -> None:
    folder = export_checkpoint(tiny_checkpoint, tmp_path / "simplified", share_trace=True, simplify=True)
    vocab, d = manifest_dims(folder)
    for kind in GRAPHS:
        graph = load_graph(folder, kind)
        assert vocab_by_d_initializers(graph, vocab, d) == ["transformer.wte.weight"]
        assert external_locations(graph) == {WEIGHTS_FILE}
        onnx.checker.check_model(str(folder / GRAPH_FILES[kind]), full_check=True)
    assert read_manifest(folder).export["options"]["simplify"] is True


@pytest.mark.parametrize("opset", [pytest.param(18, marks=pytest.mark.slow), 21])  # 18: in CI's -m slow run
def test_newer_opsets_export_and_check(tiny_checkpoint: Path, tmp_path: Path, opset: int) -> None:
    folder = export_checkpoint(tiny_checkpoint, tmp_path / f"opset{opset}", opset=opset)
    for kind in GRAPHS:
        graph = load_graph(folder, kind)
        assert [(o.domain, o.version) for o in graph.opset_import] == [("", opset)]
        assert graph.ir_version == onnx.helper.find_min_ir_version_for(list(graph.opset_import))


def _graph_bytes(folder: Path) -> dict[str, bytes]:
    """The graphs' bytes with the export id (a fresh uuid per export) blanked out, and the weights file's sha256."""
    export_id = json.loads((folder / "manifest.json").read_text())["export"]["export_id"].encode()
    found = {name: (folder / name).read_bytes() for name in GRAPH_FILES.values()}
    assert all(data.count(export_id) == 1 for data in found.values()), "the export id is not in each graph once"
    blanked = {name: data.replace(export_id, b"0" * len(export_id)) for name, data in found.items()}
    return {**blanked, WEIGHTS_FILE: sha256_file(folder / WEIGHTS_FILE).encode()}


def test_exports_sharing_one_load_and_trace_write_what_exports_of_their_own_write(
    tiny_checkpoint: Path, tiny_export: Path, shared_export: Any, tmp_path: Path
) -> None:
    """scripts/make_fixtures.py exports fp32 and int4 from one load and trace, and the tests share the run's
    (tests.helpers.session_export_work: every shared export, the default one too, from traces that one worker made
    and wrote, read back from their files); the graphs such an export writes must be those of an export that traced
    on its own, byte for byte (the passes run on copies of the trace, naming new values as on the trace). Here one
    load and trace of this test's own, in this process only, exports fp32 and int8, against the shared ones."""
    from gpt2_onnx.app.export import SharedExportWork, export_model
    from gpt2_onnx_core.config import ExportOptions

    def options(precision: str) -> ExportOptions:
        return ExportOptions(model=str(tiny_checkpoint), output=tmp_path / precision, precision=precision, check=False)

    own = SharedExportWork()  # not the run's: this test's own trace
    export_model(options("fp32"), None, own)
    assert _graph_bytes(tmp_path / "fp32") == _graph_bytes(tiny_export)
    export_model(options("int8"), None, own)
    assert _graph_bytes(tmp_path / "int8") == _graph_bytes(shared_export(precision="int8"))


def test_prefill_runs_the_last_block_past_its_attention_on_the_last_position(tiny_export: Path) -> None:
    """prefill.onnx's last block slices to the last position after its attention: its MLP multiplies one row per
    sequence, the block before it every row; decode.onnx (every position's logits) keeps every row throughout."""
    dims = read_manifest(tiny_export).dims
    last, before = dims.n_layer - 1, dims.n_layer - 2
    prompt = 5
    for kind, rows_last in (("prefill", 1), ("decode", prompt)):
        model = onnx.load(str(tiny_export / f"{kind}.onnx"))  # with its weights: the session reads them from memory
        mlp_in = {
            layer: next(
                n.output[0] for n in model.graph.node if any(f"h.{layer}.mlp.c_fc.weight" in i for i in n.input)
            )
            for layer in (last, before)
        }
        model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in mlp_in.values())
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        feeds: dict[str, Any] = {
            "input_ids": np.arange(prompt, dtype=np.int64)[None],  # (1, T)
            "attention_mask": np.ones((1, prompt), dtype=np.int64),
            "position_ids": np.arange(prompt, dtype=np.int64)[None],
        }
        if kind == "decode":  # an empty past
            empty = np.zeros((1, dims.n_head, 0, dims.head_dim), dtype=np.float32)  # (1, nh, 0, hs)
            feeds.update(dict.fromkeys(past_names(dims.n_layer), empty))
        found = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
        assert found[mlp_in[before]].shape[:2] == (1, prompt), kind
        assert found[mlp_in[last]].shape[:2] == (1, rows_last), kind

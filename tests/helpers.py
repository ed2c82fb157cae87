"""Small helpers shared by tests: reading graphs without their weights, and counting head-shaped tensors."""

from __future__ import annotations

from pathlib import Path

import onnx

from gpt2_onnx.manifest import read_manifest
from gpt2_onnx.names import GRAPH_FILES, GraphKind


def load_graph(folder: Path, kind: GraphKind) -> onnx.ModelProto:
    return onnx.load(str(folder / GRAPH_FILES[kind]), load_external_data=False)


def vocab_by_d_initializers(model: onnx.ModelProto, vocab: int, d: int) -> list[str]:
    """Initializers shaped [vocab, d] or [d, vocab]: copies of the embedding would show up here."""
    return [t.name for t in model.graph.initializer if tuple(t.dims) in {(vocab, d), (d, vocab)}]


def external_locations(model: onnx.ModelProto) -> set[str]:
    locations = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations |= {e.value for e in tensor.external_data if e.key == "location"}
    return locations


def manifest_dims(folder: Path) -> tuple[int, int]:
    dims = read_manifest(folder).dims
    return dims.vocab_size, dims.n_embd

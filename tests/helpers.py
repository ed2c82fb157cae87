"""Small helpers shared by tests: reading graphs without their weights, counting head-shaped tensors, editing a
manifest, and reading what a failed command left behind (its one error line, staging folders)."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def edit_manifest(folder: Path, change: Callable[[dict[str, object]], None]) -> None:
    """Change manifest.json's JSON in place (no validation: tests plant bad manifests with it)."""
    data = json.loads((folder / "manifest.json").read_text())
    change(data)
    (folder / "manifest.json").write_text(json.dumps(data))


def leftovers(parent: Path) -> list[str]:
    """An export's staging and replaced-export folders left in ``parent``."""
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name)


def one_error_line(output: str) -> str:
    """The single ``Error:`` line of a command's output (asserting there is exactly one)."""
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    return errors[0]

"""Checks of an export folder before any session exists: its files against the manifest, each graph's external data,
its weights index, its export id and its inputs and outputs, and the installed ONNX Runtime against its minimum.

Every failure is a one-line :class:`~gpt2_onnx_core.errors.ManifestError` (or :class:`RuntimeVersionError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx

from gpt2_onnx_core.errors import ManifestError, RuntimeVersionError
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.names import GraphKind
from gpt2_onnx_core.versions import version_tuple
from gpt2_onnx_core.weights_index import check_index_covers

__all__ = ["check_files", "check_graph", "check_runtime_version", "read_graph"]

# TensorProto element types of the contract's dtypes.
_ELEMENT_TYPES = {
    "int64": onnx.TensorProto.INT64,
    "float32": onnx.TensorProto.FLOAT,
    "float16": onnx.TensorProto.FLOAT16,
}


def check_files(folder: Path, manifest: Manifest) -> None:
    """Every listed file exists inside the folder (no links out of it) and has the size the manifest states."""
    inside = folder.resolve()
    for name, record in manifest.files.items():
        path = folder / name
        if not path.is_file():
            raise ManifestError(f"'{folder}' lacks {name}, which its manifest lists")
        if path.resolve().parent != inside:
            raise ManifestError(f"{path} is a link to '{path.resolve()}', outside the export folder")
        size = path.stat().st_size
        if size != record.size:
            raise ManifestError(f"{path} has {size} bytes but the manifest says {record.size} (changed or truncated)")


def check_runtime_version(manifest: Manifest) -> None:
    import onnxruntime as ort

    if version_tuple(ort.__version__) < version_tuple(manifest.min_onnxruntime):
        raise RuntimeVersionError(
            f"this export needs onnxruntime >= {manifest.min_onnxruntime}, but {ort.__version__} is installed; "
            "upgrade onnxruntime"
        )


def read_graph(path: Path) -> onnx.ModelProto:
    """The graph without its weights (they stay in the weights file)."""
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and OSError alike
        raise ManifestError(f"{path} is not a readable ONNX graph: {exc}") from exc


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a graph holds: initializers, sparse initializers' parts, and tensors in node attributes
    (``Constant`` values, subgraphs of ``If``/``Loop``/``Scan``), recursively."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("sparse_tensor"):
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            for sparse in attribute.sparse_tensors:
                yield sparse.values
                yield sparse.indices
            if attribute.HasField("g"):
                yield from _graph_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graph_tensors(subgraph)


def _check_external_data(graph: onnx.ModelProto, manifest: Manifest, path: Path) -> None:
    """Every external tensor, wherever the graph holds it, must live in the manifest's weights file: no paths out
    of the folder reach ONNX Runtime."""
    for tensor in _graph_tensors(graph.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
        if location != manifest.weights_file:
            raise ManifestError(
                f"{path.name}: tensor '{tensor.name}' points at external data '{location}', "
                f"not the export's weights file '{manifest.weights_file}'"
            )


def _graph_export_id(graph: onnx.ModelProto) -> str | None:
    return next((prop.value for prop in graph.metadata_props if prop.key == "gpt2_onnx.export_id"), None)


def _value_types(values: object) -> list[tuple[str, int]]:
    return [(value.name, value.type.tensor_type.elem_type) for value in values]  # type: ignore[attr-defined]


def _check_io(graph: onnx.ModelProto, manifest: Manifest, kind: GraphKind, path: Path) -> None:
    """The graph's inputs and outputs, names and element types in order, are the manifest's."""
    record = manifest.graphs[kind]
    initializers = {tensor.name for tensor in graph.graph.initializer}
    inputs = [value for value in graph.graph.input if value.name not in initializers]  # IR < 4 lists them too
    for label, got, specs in (("inputs", inputs, record.inputs), ("outputs", graph.graph.output, record.outputs)):
        have = _value_types(got)
        want = [(spec.name, _ELEMENT_TYPES.get(spec.dtype, -1)) for spec in specs]
        if have != want:
            diff = next(
                (f"{h} vs {w}" for h, w in zip(have, want, strict=False) if h != w),
                f"{len(have)} vs {len(want)}",
            )
            raise ManifestError(f"{path.name}: {label} do not match manifest.json (graph vs manifest: {diff})")


def check_graph(graph: onnx.ModelProto, manifest: Manifest, kind: GraphKind, path: Path) -> None:
    """One graph of the folder: its external data, the manifest's index of it, its export id and its I/O."""
    _check_external_data(graph, manifest, path)
    if manifest.weights_index:  # what C++/C# consumers map must be what the graphs read
        check_index_covers(manifest.weights_index, graph, path)
    export_id = manifest.export.get("export_id")
    if export_id is not None and _graph_export_id(graph) != export_id:
        raise ManifestError(f"{path.name} belongs to another export than manifest.json (export ids differ)")
    _check_io(graph, manifest, kind, path)

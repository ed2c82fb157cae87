"""Planted faults for verify's tests: each damages an export in a way only parity can see (the manifest is
updated to match, so file hashes alone would not give it away)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gpt2_onnx_core.manifest import file_records, read_manifest, write_manifest


def refresh_manifest_record(folder: Path, name: str) -> None:
    """Record ``name``'s new size and sha256 in the manifest, so that only what the file computes gives it away."""
    manifest = read_manifest(folder)
    write_manifest(folder, replace(manifest, files={**manifest.files, **file_records(folder, [name])}))


def corrupt_weight(folder: Path, tensor: str, refresh: bool) -> None:
    """Overwrite the first 64 floats of ``tensor`` in the shared weights file (same size)."""
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    entry = next(t for t in graph.graph.initializer if t.name == tensor)
    offset = int(next(e.value for e in entry.external_data if e.key == "offset"))
    with (folder / "model.onnx.data").open("r+b") as handle:
        handle.seek(offset)
        handle.write(np.full(64, 0.5, dtype=np.float32).tobytes())
    if refresh:
        refresh_manifest_record(folder, "model.onnx.data")


def save_graph(folder: Path, kind: str, graph: onnx.ModelProto) -> None:
    (folder / f"{kind}.onnx").write_bytes(graph.SerializeToString())
    refresh_manifest_record(folder, f"{kind}.onnx")


def swap_kv_outputs(folder: Path, kind: str, first: str, second: str) -> None:
    """Make graph output ``first`` carry ``second``'s tensor and vice versa (Identity nodes at the end)."""
    graph = onnx.load(str(folder / f"{kind}.onnx"), load_external_data=False)
    renamed = {first: f"{first}/inner", second: f"{second}/inner"}
    for node in graph.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]
    graph.graph.node.extend(
        [
            helper.make_node("Identity", [renamed[second]], [first], name="planted/swap0"),
            helper.make_node("Identity", [renamed[first]], [second], name="planted/swap1"),
        ]
    )
    save_graph(folder, kind, graph)


def shift_positions(folder: Path, kind: str, by: int = 1) -> None:
    """Change the position-id rule inside a graph: the position embedding reads position_ids + ``by``."""
    graph = onnx.load(str(folder / f"{kind}.onnx"), load_external_data=False)
    graph.graph.initializer.append(numpy_helper.from_array(np.array(by, dtype=np.int64), "planted/shift"))
    for node in graph.graph.node:
        if node.op_type == "Gather" and list(node.input)[1:] == ["position_ids"]:
            node.input[1] = "planted/positions"
    graph.graph.node.insert(0, helper.make_node("Add", ["position_ids", "planted/shift"], ["planted/positions"]))
    save_graph(folder, kind, graph)


def nudge_row(folder: Path, tensor: str, row: int, relative: float) -> None:
    """Multiply one row of the float32 matrix ``tensor`` in the shared weights file by (1 + ``relative``): a fault
    as small as a checkpoint mix-up or a kernel bug can make, within every absolute tolerance a random model's
    logits would suggest. The manifest is refreshed to match."""
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    entry = next(t for t in graph.graph.initializer if t.name == tensor)
    offset = int(next(e.value for e in entry.external_data if e.key == "offset"))
    width = int(entry.dims[-1])
    with (folder / "model.onnx.data").open("r+b") as handle:
        handle.seek(offset + row * width * 4)
        values = np.frombuffer(handle.read(width * 4), dtype=np.float32)  # (width,)
        handle.seek(offset + row * width * 4)
        handle.write((values * np.float32(1 + relative)).astype(np.float32).tobytes())
    refresh_manifest_record(folder, "model.onnx.data")

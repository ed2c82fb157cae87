"""``manifest.json``: the I/O contract and inventory of an export folder.

The manifest states what a consumer needs without reading the graphs: model dimensions, every input and output with
dtype and dimension meaning, the position-id rule, special token ids, opset and IR version, the minimum ONNX Runtime,
each file with size and sha256, where each tensor lies in the weights file (``weights_index``), and how the export
was made. Runtimes load a folder through it and refuse a folder whose files do not match it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.hashing import sha256_file
from gpt2_onnx_core.names import (
    BATCH,
    GRAPHS,
    MANIFEST_FILE,
    PAST_SEQUENCE,
    POSITION_IDS_RULE,
    SEQUENCE,
    TOTAL_SEQUENCE,
    GraphKind,
    TensorSpec,
)
from gpt2_onnx_core.weights_index import ExternalTensorRef, index_from_json

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "FileRecord",
    "GraphRecord",
    "Manifest",
    "read_manifest",
    "write_manifest",
]

FORMAT = "gpt2-onnx"
SCHEMA_VERSION = 1

DIMENSION_MEANINGS = {
    BATCH: "number of sequences in the batch",
    SEQUENCE: "tokens fed in this call: the prompt in prefill, the new tokens in decode (>= 1)",
    PAST_SEQUENCE: "tokens already in the KV cache (>= 0; 0 lets decode serve as a single merged graph)",
    TOTAL_SEQUENCE: "past_sequence + sequence",
}


@dataclass(frozen=True)
class FileRecord:
    size: int
    sha256: str


@dataclass(frozen=True)
class GraphRecord:
    file: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


@dataclass(frozen=True)
class Manifest:
    """The parsed manifest. ``files`` maps every other file in the folder to its size and sha256."""

    dims: ModelDims
    graphs: dict[GraphKind, GraphRecord]
    weights_file: str
    files: dict[str, FileRecord]
    opset: int
    ir_version: int
    min_onnxruntime: str  # the oldest ONNX Runtime release this export runs on (measured, docs/compatibility.md)
    precision: str = "float32"
    model: dict[str, Any] = field(default_factory=dict)  # source, seed, revision, activation, tied head, …
    tokens: dict[str, int | None] = field(default_factory=dict)  # bos/eos/pad token ids
    export: dict[str, Any] = field(default_factory=dict)  # options, tool and library versions, time
    # Each tensor of the weights file (name, dtype, shape, offset, length), in file order. Optional within this
    # schema version: empty in a manifest written without it, and readers that do not know it ignore it.
    weights_index: tuple[ExternalTensorRef, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def graph_and_weight_bytes(self) -> int:
        """What the graphs and their weights file take on disk: the export's size beside the parameters'."""
        names = [record.file for record in self.graphs.values()] + [self.weights_file]
        return sum(self.files[name].size for name in names)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "model": {**self.model, **_dims_json(self.dims)},
            "tokens": self.tokens,
            "precision": self.precision,
            "opset": self.opset,
            "ir_version": self.ir_version,
            "min_onnxruntime": self.min_onnxruntime,
            "padding_side": "left",
            "position_ids_rule": POSITION_IDS_RULE,
            "dimensions": DIMENSION_MEANINGS,
            "graphs": {
                kind: {
                    "file": record.file,
                    "inputs": [spec.to_json() for spec in record.inputs],
                    "outputs": [spec.to_json() for spec in record.outputs],
                }
                for kind, record in self.graphs.items()
            },
            "weights_file": self.weights_file,
            **({"weights_index": [ref.to_json() for ref in self.weights_index]} if self.weights_index else {}),
            "files": {name: {"size": rec.size, "sha256": rec.sha256} for name, rec in sorted(self.files.items())},
            "export": self.export,
        }


def _dims_json(dims: ModelDims) -> dict[str, int]:
    return {
        "n_layer": dims.n_layer,
        "n_head": dims.n_head,
        "n_embd": dims.n_embd,
        "head_dim": dims.head_dim,
        "vocab_size": dims.vocab_size,
        "n_positions": dims.n_positions,
    }


def file_records(folder: Path, names: list[str]) -> dict[str, FileRecord]:
    """Size and sha256 of each named file in ``folder``."""
    return {name: FileRecord((folder / name).stat().st_size, sha256_file(folder / name)) for name in names}


def write_manifest(folder: Path, manifest: Manifest) -> Path:
    path = folder / MANIFEST_FILE
    path.write_text(json.dumps(manifest.to_json(), indent=2) + "\n", encoding="utf-8")
    return path


def plain_file_name(name: object, where: str) -> str:
    """Return ``name`` if it is a plain file name inside the folder; refuse paths (``../x``, ``/x``, ``a/b``)."""
    if not isinstance(name, str) or not name or name in (".", ".."):
        raise ManifestError(f"{where}: '{name}' is not a file name")
    if len(PurePosixPath(name).parts) != 1 or len(PureWindowsPath(name).parts) != 1 or "\0" in name:
        raise ManifestError(f"{where}: '{name}' must be a plain file name inside the export folder")
    return name


def _spec(entry: dict[str, Any]) -> TensorSpec:
    return TensorSpec(str(entry["name"]), entry["dtype"], tuple(entry["dims"]), str(entry.get("meaning", "")))


def _parse(data: dict[str, Any], path: Path) -> Manifest:
    model = data["model"]
    dims = ModelDims(
        n_layer=int(model["n_layer"]),
        n_head=int(model["n_head"]),
        n_embd=int(model["n_embd"]),
        vocab_size=int(model["vocab_size"]),
        n_positions=int(model["n_positions"]),
    )
    graphs: dict[GraphKind, GraphRecord] = {}
    for kind in GRAPHS:
        entry = data["graphs"][kind]
        graphs[kind] = GraphRecord(
            plain_file_name(entry["file"], f"{path} graphs.{kind}.file"),
            tuple(_spec(e) for e in entry["inputs"]),
            tuple(_spec(e) for e in entry["outputs"]),
        )
    files = {
        plain_file_name(name, f"{path} files"): FileRecord(int(rec["size"]), str(rec["sha256"]))
        for name, rec in data["files"].items()
    }
    extras = {key: value for key, value in model.items() if key not in _dims_json(dims)}
    weights_file = plain_file_name(data["weights_file"], f"{path} weights_file")
    index = data.get("weights_index")
    weights_size = files[weights_file].size if weights_file in files else None
    return Manifest(
        dims=dims,
        graphs=graphs,
        weights_file=weights_file,
        weights_index=() if index is None else index_from_json(index, weights_size, f"{path} weights_index"),
        files=files,
        opset=int(data["opset"]),
        ir_version=int(data["ir_version"]),
        precision=str(data.get("precision", "float32")),
        min_onnxruntime=str(data["min_onnxruntime"]),
        model=extras,
        tokens=dict(data.get("tokens", {})),
        export=dict(data.get("export", {})),
        schema_version=int(data["schema_version"]),
    )


def read_manifest(folder: Path) -> Manifest:
    """Read and validate ``folder/manifest.json``; every problem is a one-line :class:`ManifestError`."""
    if folder.exists() and not folder.is_dir():
        raise ManifestError(f"'{folder}' is a file, not an export folder")
    if not folder.is_dir():
        raise ManifestError(f"export folder '{folder}' does not exist")
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ManifestError(f"'{folder}' has no {MANIFEST_FILE}; is it a gpt2-onnx export folder?")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(f'{path} is not a gpt2-onnx manifest (no "format": "{FORMAT}")')
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ManifestError(f"{path} has no integer schema_version")
    if version > SCHEMA_VERSION:
        raise ManifestError(
            f"{path} has schema version {version}, newer than this gpt2-onnx reads ({SCHEMA_VERSION}); "
            "upgrade gpt2-onnx"
        )
    try:
        return _parse(data, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"{path} is malformed: {type(exc).__name__} {exc}") from exc

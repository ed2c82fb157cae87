"""Write the weights of several graphs into one external-data file that all of them reference.

Each distinct initializer (by name) is written once, page-aligned so that ONNX Runtime can memory-map it; every
graph's initializer of that name then points at the same offset. Small constants (shape vectors and the like) stay
inside their graph.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from gpt2_onnx_core.errors import ExportError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["WrittenTensor", "WrittenWeights", "externalize_shared_weights"]

log = logging.getLogger(__name__)

ALIGNMENT = 4096  # page size: lets ONNX Runtime map tensors straight from the file
MIN_EXTERNAL_BYTES = 1024  # smaller initializers stay inside the graph


@dataclass(frozen=True)
class WrittenTensor:
    """One tensor as the exporter wrote it into the weights file (the graphs and the manifest's weights_index then
    state its place as a gpt2_onnx_core.weights_index.ExternalTensorRef)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    length: int
    sha256: str


@dataclass(frozen=True)
class WrittenWeights:
    """What the exporter wrote into the weights file, tensor by tensor."""

    file_name: str
    size: int
    entries: dict[str, WrittenTensor]

    def parameter_bytes(self) -> int:
        return sum(entry.length for entry in self.entries.values())


def _same_tensor(a: ir.TensorProtocol, b: ir.TensorProtocol) -> bool:
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    raw_a: Any = getattr(a, "raw", None)
    raw_b: Any = getattr(b, "raw", None)
    if hasattr(raw_a, "data_ptr") and hasattr(raw_b, "data_ptr"):
        return bool(raw_a.data_ptr() == raw_b.data_ptr())  # the same torch parameter, traced twice
    return bool(a.tobytes() == b.tobytes())


def _large_initializers(models: Iterable[ir.Model]) -> dict[str, ir.TensorProtocol]:
    """The union, by name, of every initializer worth storing externally; a name must mean one tensor."""
    chosen: dict[str, ir.TensorProtocol] = {}
    for model in models:
        for name, value in model.graph.initializers.items():
            tensor = value.const_value
            if tensor is None or tensor.nbytes < MIN_EXTERNAL_BYTES:
                continue
            if name in chosen and not _same_tensor(chosen[name], tensor):
                raise ExportError(f"initializer '{name}' differs between graphs; cannot share one weights file")
            chosen.setdefault(name, tensor)
    return chosen


def externalize_shared_weights(models: Sequence[ir.Model], folder: Path, file_name: str) -> WrittenWeights:
    """Write every large initializer of ``models`` once into ``folder/file_name`` and point the graphs at it.

    The models are changed in place: their large initializers become :class:`onnx_ir.ExternalTensor`.
    """
    tensors = _large_initializers(models)
    entries: dict[str, WrittenTensor] = {}
    path = folder / file_name
    with path.open("wb") as out:
        for name, tensor in tensors.items():
            offset = -(-out.tell() // ALIGNMENT) * ALIGNMENT
            out.write(b"\0" * (offset - out.tell()))
            data = tensor.tobytes()
            out.write(data)
            entries[name] = WrittenTensor(
                name=name,
                dtype=tensor.dtype.name.lower(),
                shape=tuple(int(d) for d in tensor.shape.numpy()),
                offset=offset,
                length=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
            del data
        size = out.tell()
    for model in models:
        for name, value in model.graph.initializers.items():
            entry = entries.get(name)
            if entry is None:
                continue
            source = value.const_value
            assert source is not None  # every entry came from a tensor
            value.const_value = ir.ExternalTensor(
                file_name,
                entry.offset,
                entry.length,
                source.dtype,
                shape=ir.Shape(entry.shape),
                name=name,
                base_dir=folder,
            )
    log.info("wrote %d tensors (%d bytes) to %s", len(entries), size, path)
    return WrittenWeights(file_name=file_name, size=size, entries=entries)

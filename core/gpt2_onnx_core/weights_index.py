"""The weights file's table of contents: where each external tensor of the graphs lies in it.

Both graphs state it (each external initializer's ``location``, ``offset`` and ``length``); ``manifest.json``
repeats it as ``weights_index`` so that a consumer without an ONNX parser (the C++ and C# samples) can map the
weights file once and hand both sessions the same tensors. The Python loader checks the manifest's copy against the
graphs (:func:`check_index_covers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpt2_onnx_core.errors import ManifestError

if TYPE_CHECKING:
    import onnx

__all__ = ["ExternalTensorRef", "check_index_covers", "external_tensors", "index_from_json", "index_of_graphs"]

# The dtypes an export's weights file holds (fp32/fp16 weights; uint8 packed int4/int8, their zero points; scales).
INDEX_DTYPES = ("float32", "float16", "uint8", "int8", "int32", "int64")


@dataclass(frozen=True)
class ExternalTensorRef:
    """Where one initializer's bytes lie in the weights file."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int
    length: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype.name,
            "shape": list(self.shape),
            "offset": self.offset,
            "length": self.length,
        }


def _checked(name: str, dtype: np.dtype, shape: tuple[int, ...], offset: int, length: int, where: str) -> None:
    if offset < 0 or length < 0 or any(d < 0 for d in shape):
        raise ManifestError(f"{where}: tensor '{name}' has a negative offset, length or dimension")
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != length:
        raise ManifestError(f"{where}: tensor '{name}' {list(shape)} {dtype} does not fill {length} bytes")


def external_tensors(graph: onnx.ModelProto, path: Path) -> Iterator[ExternalTensorRef]:
    """The graph's external initializers (those in the weights file), checked for a consistent length."""
    import onnx

    for tensor in graph.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
            offset, length = int(info.get("offset", 0)), int(info["length"])
        except (KeyError, ValueError, TypeError) as exc:
            raise ManifestError(f"{path.name}: tensor '{tensor.name}' has unreadable external data ({exc})") from exc
        shape = tuple(int(d) for d in tensor.dims)
        _checked(tensor.name, dtype, shape, offset, length, path.name)
        yield ExternalTensorRef(tensor.name, dtype, shape, offset, length)


def index_of_graphs(graphs: Iterable[tuple[onnx.ModelProto, Path]]) -> tuple[ExternalTensorRef, ...]:
    """Every external tensor of the graphs once, in file order; a name must mean the same bytes in every graph."""
    seen: dict[str, ExternalTensorRef] = {}
    for graph, path in graphs:
        for ref in external_tensors(graph, path):
            if seen.setdefault(ref.name, ref) != ref:
                raise ManifestError(
                    f"{path.name}: tensor '{ref.name}' lies elsewhere in the weights file than in another graph"
                )
    return tuple(sorted(seen.values(), key=lambda ref: ref.offset))


def index_from_json(entries: object, weights_size: int | None, where: str) -> tuple[ExternalTensorRef, ...]:
    """Parse and check a manifest's ``weights_index``: known dtypes, consistent lengths, unique names, every tensor
    inside the weights file (``weights_size``, when known) and no two overlapping."""
    if not isinstance(entries, list):
        raise ManifestError(f"{where}: weights_index must be a list")
    refs: list[ExternalTensorRef] = []
    for entry in entries:
        try:
            name, dtype_name = str(entry["name"]), str(entry["dtype"])
            shape = tuple(int(d) for d in entry["shape"])
            offset, length = int(entry["offset"]), int(entry["length"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"{where}: unreadable weights_index entry {entry!r} ({exc})") from exc
        if dtype_name not in INDEX_DTYPES:
            raise ManifestError(f"{where}: tensor '{name}' has dtype '{dtype_name}', not one of {INDEX_DTYPES}")
        dtype = np.dtype(dtype_name)
        _checked(name, dtype, shape, offset, length, where)
        if weights_size is not None and offset + length > weights_size:
            raise ManifestError(f"{where}: tensor '{name}' lies beyond the end of the weights file")
        refs.append(ExternalTensorRef(name, dtype, shape, offset, length))
    if len({ref.name for ref in refs}) != len(refs):
        raise ManifestError(f"{where}: weights_index names a tensor twice")
    ordered = sorted(refs, key=lambda ref: ref.offset)
    for before, after in pairwise(ordered):
        if before.offset + before.length > after.offset:
            raise ManifestError(f"{where}: tensors '{before.name}' and '{after.name}' overlap in the weights file")
    return tuple(ordered)


def check_index_covers(index: Iterable[ExternalTensorRef], graph: onnx.ModelProto, path: Path) -> None:
    """The manifest's index must state every external tensor of ``graph`` exactly as the graph does."""
    listed = {ref.name: ref for ref in index}
    for ref in external_tensors(graph, path):
        stated = listed.get(ref.name)
        if stated is None:
            raise ManifestError(f"manifest.json's weights_index lacks '{ref.name}', which {path.name} reads")
        if stated != ref:
            raise ManifestError(
                f"manifest.json's weights_index disagrees with {path.name} on '{ref.name}' "
                f"({stated.dtype} {list(stated.shape)} at {stated.offset} vs {ref.dtype} {list(ref.shape)} "
                f"at {ref.offset})"
            )

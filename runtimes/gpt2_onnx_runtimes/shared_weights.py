"""Weights in memory once: one read-only memory map of the export's weights file, whose tensors both sessions
take as their initializers (``SessionOptions.add_initializer``), with ONNX Runtime's weight prepacking off.

Why each part is needed (the split layout, both sessions loaded and run once): by default ONNX Runtime maps the
file per session and then prepacks each MatMul weight into a private copy per session; with prepacking off, two
maps of one file still count twice (Linux counts the pages per map); one shared map with prepacking on keeps the
packed copies, one per session; one shared map with prepacking off holds the weights' pages once, plus the runtime.
The RSS of each mode is measured by ``benchmarks/runtime_modes.sh`` (docs/performance.md).

Prepacking reorders weight matrices for MLAS's GEMM kernels; without it, single-row products (decode, M = 1)
use MLAS's M=1 kernels straight from the map, and prompt-sized products pack panels on the fly, which costs
prefill more than decode. Quantized graphs are not shared this way: MatMulNBits without its prepacked layout is
many times slower (see gpt2_onnx_runtimes.session). The merged layout (gpt2_onnx_runtimes.generation_graph) keeps
one session, so its weights are prepacked once and need none of this; it reads the tied embedding from the map,
and its single-row head a transposed copy of it (:meth:`SharedWeights.transposed`, see generation_graph).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.weights_index import ExternalTensorRef, external_tensors
from gpt2_onnx_runtimes.mapped_pages import release_shared_map

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["DISABLE_PREPACKING", "SharedWeights"]

log = logging.getLogger(__name__)

DISABLE_PREPACKING = "session.disable_prepacking"  # ONNX Runtime session config key
_TRANSPOSE_ROWS = 256  # rows of a table transposed at a time: GPT-2-small's 768 KB, within a core's L2


class SharedWeights:
    """The weights file mapped once; :meth:`value` gives one OrtValue per tensor name, shared by all sessions.

    The OrtValues point into the map (no copy); this object keeps the map alive and must outlive the sessions.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._map = np.memmap(path, dtype=np.uint8, mode="r")  # read-only, shared with the page cache
        self._values: dict[str, ort.OrtValue] = {}
        self._arrays: dict[str, np.ndarray] = {}

    def value(self, ref: ExternalTensorRef) -> ort.OrtValue:
        import onnxruntime as ort

        known = self._arrays.get(ref.name)
        if known is not None:
            if known.dtype != ref.dtype or known.shape != ref.shape:
                raise ManifestError(f"tensor '{ref.name}' is {known.shape} in one graph and {ref.shape} in another")
            return self._values[ref.name]
        if ref.offset < 0 or ref.offset + ref.length > self._map.size:
            raise ManifestError(f"tensor '{ref.name}' lies beyond the end of {self.path.name}")
        array = self._map[ref.offset : ref.offset + ref.length].view(ref.dtype).reshape(ref.shape)
        self._arrays[ref.name] = array
        self._values[ref.name] = ort.OrtValue.ortvalue_from_numpy(array)
        return self._values[ref.name]

    def transposed(self, ref: ExternalTensorRef, rows: int = _TRANSPOSE_ROWS) -> ort.OrtValue:
        """A copy of the 2-D tensor ``ref`` transposed, in this process's memory (it stays alive with this object).

        It is made ``rows`` rows of the map at a time, each chunk's pages unmapped once copied (they stay in the
        page cache), so the load holds the copy and one chunk, not the copy and the whole table.
        """
        import onnxruntime as ort

        self.value(ref)  # checks the reference and keeps the map's view
        table = self._arrays[ref.name]  # (R, C), in the map
        if table.ndim != 2:
            raise ManifestError(f"tensor '{ref.name}' is {table.shape}, not a matrix")
        copy = np.empty((table.shape[1], table.shape[0]), dtype=table.dtype)  # (C, R)
        for start in range(0, table.shape[0], rows):
            chunk = table[start : start + rows]  # (rows, C)
            copy[:, start : start + rows] = chunk.T
            release_shared_map(chunk)
        key = f"{ref.name}/transposed"
        self._arrays[key] = copy
        self._values[key] = ort.OrtValue.ortvalue_from_numpy(copy)
        return self._values[key]

    def add_to(
        self,
        options: ort.SessionOptions,
        graph: onnx.ModelProto,
        path: Path,
        *,
        prepacking: bool = False,
        skip: Collection[str] = (),
    ) -> int:
        """Give ``options`` every external initializer of ``graph`` from the map, but those named in ``skip``;
        returns how many. Unless ``prepacking``, ONNX Runtime's weight prepacking is turned off (the split layout's
        sessions, which then share the weights' pages; see the module's docstring)."""
        count = 0
        for ref in external_tensors(graph, path):
            if ref.name not in skip:
                options.add_initializer(ref.name, self.value(ref))
                count += 1
        if not prepacking:
            options.add_session_config_entry(DISABLE_PREPACKING, "1")
        log.debug("%s: %d initializers from the shared map of %s", path.name, count, self.path.name)
        return count

    def release_resident(self) -> bool:
        """Unmap the map's resident pages (they stay in the page cache; see mapped_pages.release_shared_map)."""
        return release_shared_map(self._map)

    def mapped(self) -> np.ndarray:
        """The whole map, uint8 (bytes,): read-only."""
        return self._map

    @property
    def mapped_bytes(self) -> int:
        return int(self._map.size)

"""manifest.json's ``weights_index``: the weights file's table of contents that parser-less consumers (the C++ and
C# samples) map the file by. It must state what the graphs state, and a manifest that disagrees is refused."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import GRAPH_FILES, GRAPHS
from gpt2_onnx_core.weights_index import ExternalTensorRef, index_from_json, index_of_graphs
from gpt2_onnx_runtimes.session import LoadedExport
from tests.helpers import edit_manifest, load_graph


def _graphs_index(folder: Path) -> tuple[ExternalTensorRef, ...]:
    return index_of_graphs((load_graph(folder, kind), folder / GRAPH_FILES[kind]) for kind in GRAPHS)


def test_manifest_index_is_what_the_graphs_state(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    index = manifest.weights_index
    assert index == _graphs_index(tiny_export)
    assert [ref.offset for ref in index] == sorted(ref.offset for ref in index)
    assert all(ref.offset % 4096 == 0 for ref in index)  # page-aligned, as docs/deploying.md promises
    names = {ref.name for ref in index}
    assert "transformer.wte.weight" in names  # the tied table, once
    assert sum(ref.length for ref in index) == manifest.export["weight_bytes"]
    assert index[-1].offset + index[-1].length <= manifest.files[manifest.weights_file].size


def test_index_bytes_are_the_tensors(tiny_export: Path, tiny_model: Any) -> None:
    """Reading the file at an entry's offset gives the checkpoint's tensor of that name."""
    manifest = read_manifest(tiny_export)
    data = np.memmap(tiny_export / manifest.weights_file, dtype=np.uint8, mode="r")
    params = dict(tiny_model.named_parameters())
    for name in ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight"):
        ref = next(r for r in manifest.weights_index if r.name == name)
        stored = data[ref.offset : ref.offset + ref.length].view(ref.dtype).reshape(ref.shape)
        expected = params[name].detach().numpy()
        np.testing.assert_array_equal(stored, expected if stored.shape == expected.shape else expected.T)


def _entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in data["weights_index"] if e["name"] == name)  # type: ignore[no-any-return]


def _transpose_entry(data: dict[str, Any]) -> None:  # same length, another shape: only the graphs can tell
    entry = _entry(data, "transformer.h.0.mlp.c_fc.weight")
    entry["shape"] = entry["shape"][::-1]


def _drop_entry(data: dict[str, Any]) -> None:
    data["weights_index"] = [e for e in data["weights_index"] if e["name"] != "transformer.h.1.attn.c_proj.weight"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_transpose_entry, "weights_index disagrees with prefill.onnx on 'transformer.h.0.mlp.c_fc.weight'"),
        (_drop_entry, "weights_index lacks 'transformer.h.1.attn.c_proj.weight', which prefill.onnx reads"),
    ],
)
def test_loader_refuses_an_index_the_graphs_contradict(
    copy_export: Callable[[], Path], change: Callable[[dict[str, Any]], None], message: str
) -> None:
    folder = copy_export()
    edit_manifest(folder, change)  # type: ignore[arg-type]
    with pytest.raises(ManifestError, match=re.escape(message)) as caught:
        LoadedExport.load(folder)
    assert "\n" not in str(caught.value)


def test_manifest_without_index_still_loads_and_shares(copy_export: Callable[[], Path]) -> None:
    """Exports made before the index existed keep working: the Python loader reads the graphs themselves."""
    folder = copy_export()
    edit_manifest(folder, lambda data: data.pop("weights_index"))
    loaded = LoadedExport.load(folder)
    assert loaded.manifest.weights_index == ()
    assert loaded.shared_weights is not None


def _raw(**change: Any) -> list[dict[str, Any]]:
    entries = [
        {"name": "a", "dtype": "float32", "shape": [2, 4], "offset": 0, "length": 32},
        {"name": "b", "dtype": "uint8", "shape": [16], "offset": 4096, "length": 16},
    ]
    entries[1].update(change)
    return entries


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (_raw(dtype="complex64"), "tensor 'b' has dtype 'complex64'"),
        (_raw(length=15), r"tensor 'b' \[16\] uint8 does not fill 15 bytes"),
        (_raw(offset=8184), "tensor 'b' lies beyond the end of the weights file"),
        (_raw(offset=16), "tensors 'a' and 'b' overlap"),
        (_raw(name="a"), "names a tensor twice"),
        (_raw(offset=-4096), "negative offset"),
        (_raw(shape="x"), "unreadable weights_index entry"),
        ({"a": 1}, "must be a list"),
    ],
)
def test_malformed_index_is_refused_in_one_line(entries: object, message: str) -> None:
    with pytest.raises(ManifestError, match=message) as caught:
        index_from_json(entries, weights_size=8192, where="manifest.json weights_index")
    assert "\n" not in str(caught.value)


def test_malformed_index_in_a_folder_is_refused_when_reading_the_manifest(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    size = (folder / "model.onnx.data").stat().st_size
    edit_manifest(folder, lambda data: _entry(data, "transformer.wte.weight").update(offset=size))  # type: ignore[arg-type]
    with pytest.raises(ManifestError, match=re.escape("'transformer.wte.weight' lies beyond the end")):
        read_manifest(folder)

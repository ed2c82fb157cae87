"""Loading an export folder through its manifest: providers, every mismatch refused with a clear error, and nothing
that a manifest or a graph names reaching outside the folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from gpt2_onnx_core.errors import InvalidInputError, ManifestError, ProviderUnavailableError
from gpt2_onnx_runtimes import Gpt2Onnx, RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.conftest import cuda_works
from tests.faults import refresh_manifest_record, save_graph
from tests.helpers import edit_manifest


@pytest.mark.skipif(cuda_works(), reason="this machine has a working CUDA provider")
def test_asking_for_cuda_without_it_fails_clearly(tiny_export: Path) -> None:
    with pytest.raises(ProviderUnavailableError) as caught:
        Gpt2Onnx.load(tiny_export, provider="cuda")
    message = str(caught.value)
    assert "\n" not in message
    assert "CUDA" in message and "--provider cpu" in message


@pytest.mark.skipif(cuda_works(), reason="this machine has a working CUDA provider")
def test_cuda_in_runtime_options_is_never_a_cpu_run(tiny_export: Path) -> None:
    """``RuntimeOptions(provider="cuda")`` without the ``provider`` argument asks for CUDA too."""
    with pytest.raises(ProviderUnavailableError):
        Gpt2Onnx.load(tiny_export, options=RuntimeOptions(provider="cuda"))


def test_contradicting_providers_are_refused(tiny_export: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"contradicts options\.provider 'cpu'"):
        Gpt2Onnx.load(tiny_export, provider="cuda", options=RuntimeOptions(provider="cpu"))
    with pytest.raises(InvalidInputError, match=r"RuntimeOptions go in options=, not in provider's place"):
        Gpt2Onnx.load(tiny_export, RuntimeOptions())  # type: ignore[arg-type]  # the mistake the check names


@pytest.mark.skipif(cuda_works(), reason="this machine has a working CUDA provider")
def test_session_that_drops_cuda_is_refused(
    tiny_export: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The check after each session is created: where the early library check passes but ONNX Runtime still
    creates the session on the CPU, loading fails with one line, and ONNX Runtime's own log stays quiet."""
    from gpt2_onnx_runtimes import session

    monkeypatch.setattr(session, "ensure_provider_loadable", lambda name: None)
    with pytest.raises(ProviderUnavailableError, match=r"asked for CUDAExecutionProvider but .*CPUExecutionProvider"):
        LoadedExport.load(tiny_export, RuntimeOptions(provider="cuda"))
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("layout", "sessions"), [("merged", ["generation"]), ("split", ["prefill", "decode"]), ("auto", ["generation"])]
)
def test_sessions_run_on_the_provider_asked_for(tiny_export: Path, layout: str, sessions: list[str]) -> None:
    options = RuntimeOptions(intra_op_threads=1, graph_optimization="basic", layout=layout)  # type: ignore[arg-type]
    model = Gpt2Onnx.load(tiny_export, provider="cpu", options=options)
    assert model.providers == {name: ["CPUExecutionProvider"] for name in sessions}


def test_missing_folder_and_manifest(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist"):
        LoadedExport.load(tmp_path / "nope")
    with pytest.raises(ManifestError, match=r"no manifest\.json"):
        LoadedExport.load(tmp_path)


def test_missing_graph(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    (folder / "decode.onnx").unlink()
    with pytest.raises(ManifestError, match=r"lacks decode\.onnx"):
        LoadedExport.load(folder)


def test_changed_weights_size(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    with (folder / "model.onnx.data").open("ab") as handle:
        handle.write(b"\0" * 16)
    with pytest.raises(ManifestError, match=r"model\.onnx\.data has \d+ bytes but the manifest says"):
        LoadedExport.load(folder)


def test_graph_from_another_export(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    for prop in graph.metadata_props:
        if prop.key == "gpt2_onnx.export_id":
            prop.value = "0" * 32
    (folder / "decode.onnx").write_bytes(graph.SerializeToString())
    refresh_manifest_record(folder, "decode.onnx")  # a consistent size and sha256: only the origin differs
    with pytest.raises(ManifestError, match="another export"):
        LoadedExport.load(folder)


def test_manifest_io_that_does_not_match_the_graph(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["graphs"]["prefill"]["outputs"][0]["name"] = "scores"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"outputs do not match manifest\.json"):
        LoadedExport.load(folder)


@pytest.mark.parametrize("name", ["../decode.onnx", "/etc/passwd", "sub/decode.onnx", ".."])
def test_manifest_paths_must_stay_in_the_folder(copy_export: Callable[[], Path], name: str) -> None:
    folder = copy_export()
    edit_manifest(folder, lambda m: m["graphs"]["decode"].__setitem__("file", name))  # type: ignore[index]
    with pytest.raises(ManifestError, match=r"plain file name|not a file name"):
        LoadedExport.load(folder)


def test_external_data_pointing_outside_the_folder_is_refused(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    tensor = next(t for t in graph.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = "../model.onnx.data"
    save_graph(folder, "decode", graph)
    with pytest.raises(ManifestError, match=r"points at external data '\.\./model\.onnx\.data'"):
        LoadedExport.load(folder)


def test_external_data_in_a_constant_node_is_refused(copy_export: Callable[[], Path]) -> None:
    """Not only initializers: a tensor in a node attribute pointing outside the folder never reaches ONNX Runtime."""
    folder = copy_export()
    graph = onnx.load(str(folder / "decode.onnx"), load_external_data=False)
    value = onnx.TensorProto(name="escape", data_type=onnx.TensorProto.FLOAT, dims=[1])
    value.data_location = onnx.TensorProto.EXTERNAL
    for key, text in (("location", "/etc/passwd"), ("offset", "0"), ("length", "4")):
        value.external_data.add(key=key, value=text)
    constant = onnx.helper.make_node("Constant", [], ["escape_out"], value=value)
    graph.graph.node.insert(0, constant)
    save_graph(folder, "decode", graph)
    with pytest.raises(ManifestError, match=r"tensor 'escape' points at external data '/etc/passwd'"):
        LoadedExport.load(folder)


def test_weights_file_linked_from_outside_is_refused(copy_export: Callable[[], Path], tmp_path: Path) -> None:
    folder = copy_export()
    elsewhere = tmp_path / "elsewhere.data"
    (folder / "model.onnx.data").rename(elsewhere)
    (folder / "model.onnx.data").symlink_to(elsewhere)
    with pytest.raises(ManifestError, match="outside the export folder"):
        LoadedExport.load(folder)


def test_malformed_and_newer_manifests(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        LoadedExport.load(folder)
    (folder / "manifest.json").write_text(json.dumps({"format": "gpt2-onnx", "schema_version": 99}))
    with pytest.raises(ManifestError, match="schema version 99, newer"):
        LoadedExport.load(folder)
    (folder / "manifest.json").write_text(json.dumps({"format": "gpt2-onnx", "schema_version": 1, "model": {}}))
    with pytest.raises(ManifestError, match="malformed"):
        LoadedExport.load(folder)


def test_missing_weights_file(copy_export: Callable[[], Path]) -> None:
    folder = copy_export()
    (folder / "model.onnx.data").unlink()
    with pytest.raises(ManifestError, match=r"lacks model\.onnx\.data"):
        LoadedExport.load(folder)

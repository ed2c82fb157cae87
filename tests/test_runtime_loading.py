"""Loading an export folder through its manifest: providers, and every mismatch refused with a clear error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from gpt2_onnx.errors import InvalidInputError, ManifestError, ProviderUnavailableError
from gpt2_onnx_runtimes import Gpt2Onnx, RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport
from tests.faults import refresh_manifest_record


def cuda_works() -> bool:
    """True only where a session really gets the CUDA provider (libraries present and a GPU)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from gpt2_onnx_runtimes.providers import ensure_provider_loadable

    try:
        ensure_provider_loadable("cuda")
    except ProviderUnavailableError:
        return False
    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [value],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CUDAExecutionProvider"])
    return session.get_providers()[0] == "CUDAExecutionProvider"


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

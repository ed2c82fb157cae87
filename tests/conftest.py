"""Shared fixtures: tiny seeded GPT-2 checkpoints (the real GPT-2 vocabulary and tokenizer, a few thousand
hidden units) and their exports. No network, no GPU."""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach for the network

TINY_CONFIG: dict[str, Any] = {"n_layer": 2, "n_head": 4, "n_embd": 64, "n_positions": 128}


def save_checkpoint(
    folder: Path, seed: int = 0, tie: bool = True, logit_scale: float | None = None, **config: Any
) -> Path:
    """A seeded random GPT2LMHeadModel saved as safetensors, with the real GPT-2 tokenizer files. ``logit_scale``:
    ln_f.weight × that and ln_f.bias = 0, so that the logits are that many times larger (a trained model's scale)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from gpt2_onnx_exporters.tokenizer_files import load_packaged_gpt2_tokenizer

    settings = {
        **TINY_CONFIG,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "tie_word_embeddings": tie,
        **config,
    }
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**settings))
    if not tie:  # an untied head must hold its own values, not a copy of the embedding
        with torch.no_grad():
            model.lm_head.weight.normal_(0.0, 0.02)
    if logit_scale is not None:
        with torch.no_grad():
            model.transformer.ln_f.weight.mul_(logit_scale)  # (d,)
            model.transformer.ln_f.bias.zero_()
    model.save_pretrained(folder)
    load_packaged_gpt2_tokenizer().save_pretrained(folder)
    return folder


@functools.cache
def cuda_works() -> bool:
    """True only where a session really gets the CUDA provider (libraries present and a GPU); asked once."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from gpt2_onnx_core.errors import ProviderUnavailableError
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


def export_checkpoint(checkpoint: Path | str, output: Path, *, share_trace: bool = False, **options: Any) -> Path:
    """Export ``checkpoint`` in this process; ``share_trace``: with ``tests.helpers.session_export_work``, whose
    traces the run's workers share (a checkpoint whose weights an export traced before costs no trace)."""
    from gpt2_onnx.app.export import export_model
    from gpt2_onnx_core.config import ExportOptions
    from tests.helpers import session_export_work

    export_model(
        ExportOptions(model=str(checkpoint), output=output, **options),
        None,
        session_export_work() if share_trace else None,
    )
    return output


@pytest.fixture
def shared_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every export in this process during the test (``gpt2-onnx export`` through ``invoke`` included) loads and
    traces through ``tests.helpers.session_export_work``, for tests of what happens around the trace (output
    folder, exit codes, interrupts): the export of a model another test already traced costs seconds, not a trace."""
    import gpt2_onnx.app.export as export_module
    from tests.helpers import session_export_work

    export_model = export_module.export_model

    def sharing(options: Any, report: Any = None, shared: Any = None) -> Any:
        return export_model(options, report, shared if shared is not None else session_export_work())

    monkeypatch.setattr(export_module, "export_model", sharing)


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The command line's user cache (fingerprints of checked files) in a temporary folder, not the real one."""
    folder = tmp_path_factory.mktemp("user-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPT2_ONNX_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def run_traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder where the run's workers share their traces (tests/shared_traces.py), beside made_once's."""
    from tests.shared_traces import FOLDER_VARIABLE

    folder = _run_folder(tmp_path_factory) / "traces"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FOLDER_VARIABLE, str(folder))
        yield folder


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's temporary folder: the workers' own are popen-gw0, popen-gw1, ... inside it."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """``make(folder)`` run once per test run, whichever process asks first: the suite runs in pytest-xdist
    workers (``-n`` in pyproject.toml), and what one worker made, the others read. The folder lives beside the
    workers' own temporary folders, in the run's; a lock makes the others wait for it, and a folder that a crashed
    maker left half-done (no ``.done`` mark beside it) is made again."""
    from filelock import FileLock

    folder = _run_folder(tmp_path_factory) / "made-once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    done = folder.with_name(name + ".done")
    with FileLock(str(folder.with_name(name + ".lock"))):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made_once(tmp_path_factory, "tiny-checkpoint", save_checkpoint)


def _fingerprint(folder: Path) -> dict[str, str]:
    from gpt2_onnx_core.hashing import sha256_file

    return {path.name: sha256_file(path) for path in sorted(folder.iterdir())}


@pytest.fixture(scope="session")
def shared_export(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Path]]:
    """``shared_export(**options)``: the tiny checkpoint exported with these options (``precision="int8"``,
    ``optimize=True``, ...; none: the default export) once per session, however many tests read it. Each is a real
    export, parity check included; all share the load and traces of the run (``session_export_work``:
    test_export_structure holds them to an export that traced on its own, byte for byte). For reading only: at
    the end of the session every file must be as it was written, or the session fails here (a test that changes an
    export works on a copy: ``copy_export``)."""
    made: dict[tuple[tuple[str, Any], ...], tuple[Path, dict[str, str]]] = {}

    def export(**options: Any) -> Path:
        key = tuple(sorted(options.items()))
        if key not in made:
            name = "-".join(f"{option}-{value}" for option, value in key) or "tiny"
            folder = made_once(
                tmp_path_factory,
                f"shared-export-{name}",
                lambda out: export_checkpoint(tiny_checkpoint, out / name, share_trace=True, **options),
            )
            made[key] = folder / name, _fingerprint(folder / name)
        return made[key][0]

    yield export
    changed = [folder.name for folder, written in made.values() if _fingerprint(folder) != written]
    assert not changed, f"tests changed shared exports they should only read: {changed}"


@pytest.fixture(scope="session")
def scaled_export(shared_export: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``scaled_export(scale)``: the tiny checkpoint with ln_f.weight × ``scale`` (ln_f.bias 0), or a model spec
    (``"random:tiny-trained-scale"``), exported once per session (its parity check included). Read-only. × 1 is
    the default tiny export: its ln_f is transformers' initialisation, weight 1 and bias 0."""
    made: dict[str, Path] = {"1.0": shared_export()}

    def export(scale: float | str) -> Path:
        key = str(scale)
        if key not in made:

            def make(work: Path) -> None:
                model = scale if isinstance(scale, str) else save_checkpoint(work / "checkpoint", logit_scale=scale)
                export_checkpoint(model, work / "export")

            name = "scaled-" + "".join(c if c.isalnum() else "-" for c in key)[-40:]
            made[key] = made_once(tmp_path_factory, name, make) / "export"
        return made[key]

    return export


@pytest.fixture(scope="session")
def tiny_export(shared_export: Callable[..., Path]) -> Path:
    """The default export (opset 17, fp32) of the tiny checkpoint. Read-only (see ``shared_export``)."""
    return shared_export()


@pytest.fixture(scope="session")
def tiny_model(tiny_checkpoint: Path) -> Any:
    """The tiny checkpoint loaded with transformers (eager attention): the parity reference."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(tiny_checkpoint, attn_implementation="eager").eval()


@pytest.fixture(scope="session")
def peaked_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny checkpoint with a wider initialisation (0.2, not 0.02): its next-token distributions are peaked, so
    near-ties between candidates do not decide equality tests of greedy and beam search."""
    return made_once(
        tmp_path_factory,
        "peaked-checkpoint",
        lambda folder: save_checkpoint(folder, seed=1, initializer_range=0.2),
    )


@pytest.fixture(scope="session")
def peaked_export(peaked_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The peaked checkpoint's export (check=False: the tests using it compare with transformers themselves)."""
    folder = made_once(
        tmp_path_factory,
        "peaked-export",
        lambda out: export_checkpoint(peaked_checkpoint, out / "tiny", share_trace=True, check=False),
    )
    return folder / "tiny"


@pytest.fixture(scope="session")
def peaked_model(peaked_checkpoint: Path) -> Any:
    """The peaked checkpoint loaded with transformers (eager attention)."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(peaked_checkpoint, attn_implementation="eager").eval()


@pytest.fixture
def copy_export(tiny_export: Path, tmp_path: Path) -> Callable[[], Path]:
    """A writable copy of the tiny export, for tests that damage it."""
    import shutil

    def make() -> Path:
        target = tmp_path / "copy"
        shutil.copytree(tiny_export, target)
        return target

    return make


@pytest.fixture(scope="session")
def model(tiny_export: Path) -> Any:
    """The default tiny export loaded with the runtime (Gpt2Onnx): immutable, shared by every test that reads it."""
    from gpt2_onnx_runtimes import Gpt2Onnx

    return Gpt2Onnx.load(tiny_export)


@pytest.fixture(scope="session")
def peaked_runtime(peaked_export: Path) -> Any:
    """The peaked export loaded with the runtime (Gpt2Onnx)."""
    from gpt2_onnx_runtimes import Gpt2Onnx

    return Gpt2Onnx.load(peaked_export)


def move_eos(export: Path, token: int, target: Path) -> Path:
    """A copy of ``export`` at ``target`` whose manifest names ``token`` as end-of-text (a manifest edit: its
    files' hashes stay valid), for tests of how generation ends."""
    import json
    import shutil

    shutil.copytree(export, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["tokens"]["eos_token_id"] = token
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target

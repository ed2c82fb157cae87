"""What is installed: a wheel holding every module under the project's own import names (no generic top-level
``exporters`` or ``runtimes``), whose plain dependencies run an export without PyTorch, and an ``[export]`` extra
that brings the PyTorch side."""

from __future__ import annotations

import email.parser
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpt2_onnx.app.dependencies import PYTORCH_INSTALL_HINT

REPO = Path(__file__).resolve().parent.parent
# repository folder → the import package it holds
PACKAGES = {
    "gpt2_onnx": "gpt2_onnx",
    "core/gpt2_onnx_core": "gpt2_onnx_core",
    "exporters/gpt2_onnx_exporters": "gpt2_onnx_exporters",
    "runtimes/gpt2_onnx_runtimes": "gpt2_onnx_runtimes",
}
# What a runtime-only environment gets: the plain dependencies, with the CPU build of ONNX Runtime standing in for
# the GPU build the wheel names on x86-64 (its CPU provider is the same; the GPU build is ~250 MB to download).
RUNTIME_ONLY = ("onnxruntime", "numpy", "onnx", "tokenizers", "click", "psutil")


def _source_copy(target: Path) -> Path:
    """What the wheel is built from, copied: setuptools writes build/ and *.egg-info beside the sources it builds."""
    for folder in PACKAGES:
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, target / name)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _source_copy(tmp_path_factory.mktemp("source"))
    wheels = tmp_path_factory.mktemp("wheels")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels)]
    if importlib.util.find_spec("setuptools") is not None:
        command.append("--no-build-isolation")  # offline and quick; else pip fetches setuptools to build with
    done = subprocess.run([*command, str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (built,) = wheels.glob("gpt2_onnx-*.whl")
    return built


def test_wheel_holds_every_module_under_the_projects_own_names(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        packaged = {name for name in archive.namelist() if name.endswith(".py")}
    sources = {
        f"{package}/{path.relative_to(REPO / folder).as_posix()}"
        for folder, package in PACKAGES.items()
        for path in (REPO / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sources - packaged == set()
    assert {"gpt2_onnx/app/bench/runner.py", "gpt2_onnx/cli/bench_cmd.py", "gpt2_onnx_runtimes/api.py"} <= packaged
    tops = {name.split("/")[0] for name in packaged}
    assert tops == set(PACKAGES.values()), tops  # no exporters/ or runtimes/ at the top of site-packages


def test_plain_dependencies_leave_out_the_pytorch_side(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(archive.read(metadata).decode())
    requires = message.get_all("Requires-Dist") or []
    plain = [line for line in requires if "extra ==" not in line]
    export = [line for line in requires if 'extra == "export"' in line]
    for name in ("torch", "transformers", "onnxscript", "onnxsim", "safetensors"):
        assert not any(line.startswith(name) for line in plain), name
        assert any(line.startswith(name) for line in export), name
    assert message["License-Expression"] == "MIT" or message["License"] == "MIT"


@pytest.fixture(scope="module")
def runtime_only(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and the runtime's dependencies only: no torch, no transformers."""
    venv = tmp_path_factory.mktemp("runtime-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    done = subprocess.run([*pip, "--no-deps", str(wheel)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run([*pip, *RUNTIME_ONLY], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"the runtime's dependencies cannot be installed here: {done.stderr.strip().splitlines()[-1:]}")
    return venv / "bin"


def test_a_runtime_only_install_runs_an_export_without_torch(runtime_only: Path, tiny_export: Path) -> None:
    run = [str(runtime_only / "gpt2-onnx"), "run", str(tiny_export), "-p", "Hello", "-n", "4", "--json"]
    done = subprocess.run(run, capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 0, done.stderr
    assert '"token_ids"' in done.stdout
    check = "import importlib.util as u, sys; sys.exit(any(u.find_spec(n) for n in ('torch', 'transformers')))"
    assert subprocess.run([str(runtime_only / "python"), "-c", check], cwd="/").returncode == 0


def test_a_runtime_only_install_says_what_export_needs(runtime_only: Path, tmp_path: Path) -> None:
    export = [str(runtime_only / "gpt2-onnx"), "export", "--model", "random:tiny", "-o", str(tmp_path / "out")]
    done = subprocess.run(export, capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and PYTORCH_INSTALL_HINT in errors[0], done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()

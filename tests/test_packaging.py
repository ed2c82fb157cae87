"""A plain (non-editable) install holds every module: editable installs hide a subpackage left out of the wheel."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("gpt2_onnx", "exporters", "runtimes")


def _source_copy(target: Path) -> Path:
    """What the wheel is built from, copied: setuptools writes build/ and *.egg-info beside the sources it builds."""
    for root in ROOTS:
        shutil.copytree(REPO / root, target / root, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    return target


def test_wheel_holds_every_module(tmp_path: Path) -> None:
    source = _source_copy(tmp_path / "source")
    wheels = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels)]
    if importlib.util.find_spec("setuptools") is not None:
        command.append("--no-build-isolation")  # offline and quick; else pip fetches setuptools to build with
    done = subprocess.run([*command, str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = wheels.glob("gpt2_onnx-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packaged = {name for name in archive.namelist() if name.endswith(".py")}
    sources = {
        path.relative_to(REPO).as_posix()
        for root in ROOTS
        for path in (REPO / root).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sources - packaged == set()
    assert {"gpt2_onnx/bench/runner.py", "gpt2_onnx/cli/bench_cmd.py"} <= packaged

"""What a report records about where it ran: versions, provider, hardware."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gpt2_onnx_core import __version__
from gpt2_onnx_core.versions import installed_versions

__all__ = ["describe_environment"]

LIBRARIES = (
    "torch",
    "transformers",
    "onnx",
    "onnxscript",
    "onnx-ir",
    "onnxsim",
    "onnxruntime",
    "onnxruntime-gpu",
    "numpy",
    "tokenizers",
)


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def describe_environment(provider: str | None = None) -> dict[str, Any]:
    """Versions of gpt2-onnx and the libraries that computed a result, and the machine it ran on."""
    return {
        "gpt2-onnx": __version__,
        "python": platform.python_version(),
        "libraries": installed_versions(LIBRARIES),
        "provider": provider,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": _gpus(),
    }

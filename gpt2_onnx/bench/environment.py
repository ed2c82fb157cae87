"""The machine and library versions a benchmark ran on, recorded beside its figures."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from gpt2_onnx.versions import installed_versions

__all__ = ["BENCH_LIBRARIES", "machine_info"]

BENCH_LIBRARIES = ("gpt2-onnx", "onnxruntime", "onnxruntime-gpu", "onnx", "torch", "transformers", "numpy")


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU, core counts, memory, OS, Python, library versions and the load average right now."""
    import psutil

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": _cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "python": platform.python_version(),
        "libraries": installed_versions(BENCH_LIBRARIES),
        "load_average": [round(x, 2) for x in load] if load else None,
    }

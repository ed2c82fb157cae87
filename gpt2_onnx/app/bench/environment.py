"""The machine a benchmark ran on: :func:`gpt2_onnx.app.environment.describe_environment` plus what timing and memory
figures depend on (physical cores, memory, the load average, the ONNX Runtime this process loaded)."""

from __future__ import annotations

import os
import sys
from typing import Any

from gpt2_onnx.app.environment import describe_environment

__all__ = ["load_average", "loaded_onnxruntime", "machine_info"]


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages, where the OS has them."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine_info(provider: str) -> dict[str, Any]:
    """Versions, CPU, GPUs, core counts, memory and the load average right now."""
    import psutil

    return {
        **describe_environment(provider),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "load_average": load_average(),
        "onnxruntime_loaded": loaded_onnxruntime(),
    }


def loaded_onnxruntime() -> str | None:
    """The version of the ``onnxruntime`` module this process imported, None before it has: the installed
    distributions (``libraries``) can list two (onnxruntime and onnxruntime-gpu), or a release put on PYTHONPATH
    runs instead of either, and only the loaded module says which one computed the figures."""
    module = sys.modules.get("onnxruntime")
    version = getattr(module, "__version__", None)
    return str(version) if version is not None else None

"""The execution providers a command can ask for, by the names users type, and ONNX Runtime's names for them.

The runtime side (gpt2_onnx_runtimes.providers) proves a session really got the one asked for; the command line
offers these names without importing ONNX Runtime.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["PROVIDERS", "ProviderName"]

ProviderName = Literal["cpu", "cuda"]
PROVIDERS: dict[str, str] = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}

"""The execution providers a command can ask for, by the names users type, and ONNX Runtime's names for them.

The runtime side (gpt2_onnx_runtimes.providers) proves a session really got the one asked for; the command line
offers these names without importing ONNX Runtime.
"""

from __future__ import annotations

from typing import Literal, get_args

from gpt2_onnx_core.errors import OptionError

__all__ = ["PROVIDERS", "PROVIDER_NAMES", "ProviderName", "provider_name"]

ProviderName = Literal["cpu", "cuda"]
PROVIDER_NAMES: tuple[ProviderName, ...] = get_args(ProviderName)
PROVIDERS: dict[str, str] = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


def provider_name(value: str) -> ProviderName:
    """``value`` as a :data:`ProviderName`; :class:`OptionError` naming the choices for any other string."""
    for name in PROVIDER_NAMES:
        if value == name:
            return name
    raise OptionError(f"{{provider}} must be one of {', '.join(PROVIDER_NAMES)}, got '{value}'", "provider")

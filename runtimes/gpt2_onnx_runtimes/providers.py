"""Execution providers: what ``--provider cpu|cuda`` maps to, and proof that a session really got it.

ONNX Runtime lists CUDA as available whenever the GPU build is installed, even when the CUDA libraries cannot be
loaded; it then logs an error and quietly runs on the CPU. We diagnose first (load the provider library ourselves to
learn the missing dependency) and check ``session.get_providers()`` after creating each session, so asking for CUDA
either runs on CUDA or fails with a :class:`ProviderUnavailableError` that names the cause and the fix.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import logging
import sys
from pathlib import Path

from gpt2_onnx_core.errors import InvalidInputError, ProviderUnavailableError
from gpt2_onnx_core.providers import PROVIDERS, ProviderName

__all__ = ["PROVIDERS", "ProviderName", "check_session_provider", "ensure_provider_loadable", "provider_list"]

log = logging.getLogger(__name__)

CUDA_FIX = (
    "install the NVIDIA runtime wheels with pip install 'gpt2-onnx[cuda]' (CUDA 13, cuDNN 9) or put the CUDA "
    "libraries on the library path, or use --provider cpu"
)


def provider_list(name: str) -> list[str]:
    """The ONNX Runtime provider list for ``name``; ONNX Runtime adds the CPU provider for the few CPU-only ops."""
    if name not in PROVIDERS:
        raise InvalidInputError(f"unknown provider '{name}'; choose one of {', '.join(PROVIDERS)}")
    return [PROVIDERS[name]]


def _provider_library(capi: Path, name: str) -> Path:
    return capi / (
        f"onnxruntime_providers_{name}.dll" if sys.platform == "win32" else f"libonnxruntime_providers_{name}.so"
    )


def _load_error(capi: Path) -> str | None:
    """Why the CUDA provider library cannot be loaded (e.g. a missing libcublasLt), or None if it loads."""
    shared = _provider_library(capi, "shared")
    cuda = _provider_library(capi, "cuda")
    if not cuda.exists():
        return f"{cuda.name} is not installed"
    try:
        if shared.exists():
            ctypes.CDLL(str(shared), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
        ctypes.CDLL(str(cuda))
    except OSError as exc:
        return str(exc)
    return None


def ensure_provider_loadable(name: str) -> None:
    """Raise :class:`ProviderUnavailableError` before any session exists if ``name`` cannot run here."""
    if name == "cpu":
        return
    import onnxruntime as ort

    if PROVIDERS[name] not in ort.get_available_providers():
        raise ProviderUnavailableError(
            f"the installed onnxruntime {ort.__version__} has no {PROVIDERS[name]}; install onnxruntime-gpu "
            "(pip install 'gpt2-onnx[cuda]') or use --provider cpu"
        )
    preload = getattr(ort, "preload_dlls", None)  # onnxruntime >= 1.21 finds NVIDIA's pip wheels this way
    if preload is not None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            preload()
    reason = _load_error(Path(ort.__file__).parent / "capi")
    if reason is not None:
        raise ProviderUnavailableError(f"CUDA provider unavailable: {reason}; {CUDA_FIX}")


def check_session_provider(session_providers: list[str], name: str, what: str) -> None:
    """Raise unless the session's first provider is the one asked for (ONNX Runtime may silently drop it)."""
    wanted = PROVIDERS[name]
    if not session_providers or session_providers[0] != wanted:
        raise ProviderUnavailableError(
            f"{what}: asked for {wanted} but ONNX Runtime created the session with {session_providers} "
            f"(no usable GPU or CUDA libraries); {CUDA_FIX}"
        )

"""The PyTorch side (export, verify, bench's eager baseline) needs packages the runtime side does not: when they are
missing, the command says what to install in one line instead of failing on an import."""

from __future__ import annotations

import importlib.util

from gpt2_onnx_core.errors import MissingDependencyError

__all__ = ["PYTORCH_INSTALL_HINT", "PYTORCH_SIDE", "require_pytorch_side"]

# What to install for the PyTorch side: the one place that says it.
PYTORCH_INSTALL_HINT = 'pip install "torch==2.13.0" "gpt2-onnx[export]"'
PYTORCH_SIDE = ("torch", "transformers", "onnxscript", "safetensors")  # what exporters/ imports


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package is broken, or the module's spec is unset
        return True


def require_pytorch_side(what: str) -> None:
    """Raise :class:`MissingDependencyError` (exit 3) unless every package of the PyTorch side can be imported.

    ``what`` completes "... needs": e.g. "export", "verify (the source model)"."""
    missing = [name for name in PYTORCH_SIDE if _missing(name)]
    if missing:
        raise MissingDependencyError(
            f"{what} needs PyTorch's side of gpt2-onnx, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {PYTORCH_INSTALL_HINT}"
        )

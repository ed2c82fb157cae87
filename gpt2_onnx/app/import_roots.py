"""Where this installation's four import packages live, for child processes whose environment does not have it
installed (a bench worker in a peer's virtual environment, an ONNX Runtime release's venv in the matrix)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["import_roots"]

# The lower layers' packages in their repository folders (in a wheel all four sit side by side in site-packages).
_LAYER_FOLDERS = (("core", "gpt2_onnx_core"), ("exporters", "gpt2_onnx_exporters"), ("runtimes", "gpt2_onnx_runtimes"))


def import_roots() -> list[str]:
    """The folders to put on ``sys.path`` so that ``gpt2_onnx``, ``gpt2_onnx_core``, ``gpt2_onnx_exporters`` and
    ``gpt2_onnx_runtimes`` import: a checkout's root and its three layer folders, or the one folder an installed copy
    is in."""
    base = Path(__file__).resolve().parent.parent.parent  # gpt2_onnx/app/ → the checkout (or site-packages)
    roots = [base] + [base / folder for folder, package in _LAYER_FOLDERS if (base / folder / package).is_dir()]
    return [str(root) for root in roots]

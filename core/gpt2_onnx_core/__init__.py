"""The core of gpt2-onnx: names, configuration, errors, the manifest, precisions, tolerances and parity rules.

Both adapters (``gpt2_onnx_exporters``, the PyTorch side; ``gpt2_onnx_runtimes``, the ONNX Runtime side) build on it,
and it imports neither of them, nor torch, nor ONNX Runtime.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

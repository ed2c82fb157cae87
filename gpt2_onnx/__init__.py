"""gpt2-onnx: export GPT-2 checkpoints to ONNX, run them with ONNX Runtime, and prove parity.

This package is the product's top: the application layer (``gpt2_onnx.app``: export, verify, bench, serve) and the
command line (``gpt2_onnx.cli``). Below it: ``gpt2_onnx_exporters`` (the PyTorch side) and ``gpt2_onnx_runtimes``
(the ONNX Runtime side), and under both ``gpt2_onnx_core``. Importing this package imports nothing heavy.
"""

from gpt2_onnx_core import __version__

__all__ = ["__version__"]

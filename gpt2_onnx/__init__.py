"""gpt2-onnx: export GPT-2 checkpoints to ONNX, run them with ONNX Runtime, and prove parity.

The core package stays light: importing it pulls in neither torch nor onnxruntime. The PyTorch side lives in
``exporters``, the ONNX Runtime side in ``runtimes``; the CLI (``gpt2_onnx.cli``) imports them lazily.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

"""The PyTorch side of gpt2-onnx: load checkpoints, trace graphs, transform them, write them.

Importing this package imports torch. It never imports ``runtimes``.
"""

__all__: list[str] = []

"""The ONNX Runtime side of gpt2-onnx: load an export folder, generate text. Never imports torch.

Typical use::

    from gpt2_onnx_runtimes import Gpt2Onnx, GenerationOptions

    model = Gpt2Onnx.load("gpt2-onnx-out", provider="cpu")
    print(model.generate(["Hello"], GenerationOptions(max_new_tokens=20))[0].text)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["GenerationOptions", "GenerationResult", "Gpt2Onnx", "RuntimeOptions"]

if TYPE_CHECKING:
    from gpt2_onnx_runtimes.api import Gpt2Onnx
    from gpt2_onnx_runtimes.generation import GenerationOptions, GenerationResult
    from gpt2_onnx_runtimes.runtime_options import RuntimeOptions


def __getattr__(name: str) -> Any:  # lazy: importing runtimes costs nothing until used
    if name == "Gpt2Onnx":
        from gpt2_onnx_runtimes.api import Gpt2Onnx

        return Gpt2Onnx
    if name in ("GenerationOptions", "GenerationResult"):
        from gpt2_onnx_runtimes import generation

        return getattr(generation, name)
    if name == "RuntimeOptions":
        from gpt2_onnx_runtimes.runtime_options import RuntimeOptions

        return RuntimeOptions
    raise AttributeError(name)

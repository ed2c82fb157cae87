"""``gpt2-onnx run``'s work on the ONNX Runtime side: open an export for generation, then generate or stream.

The command line parses and prints; what it runs comes from here, so that it reaches the runtime through the
application layer (tests/test_layers.py). The names are the runtime's own API.
"""

from __future__ import annotations

from pathlib import Path

from gpt2_onnx_core.integrity import IntegrityCheck
from gpt2_onnx_core.layouts import InPlaceKv, KvCacheFormat, PromptKernel, SessionLayout
from gpt2_onnx_core.providers import ProviderName
from gpt2_onnx_runtimes.api import Gpt2Onnx
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.generation import GenerationOptions, GenerationResult
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults, ResolvedOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = [
    "CheckpointDefaults",
    "ExportFolder",
    "GenerationOptions",
    "GenerationResult",
    "Gpt2Onnx",
    "ResolvedOptions",
    "TextTokenizer",
    "load_for_generation",
    "open_export",
]


def open_export(folder: Path, integrity: IntegrityCheck) -> ExportFolder:
    """The export at ``folder``, opened once: manifest, files (presence, size and, unless ``integrity`` says
    otherwise, sha256), tokenizer and generation defaults, read before any session is created, so that options
    are resolved and bad ones refused before the model loads."""
    export = ExportFolder.open(folder, integrity)
    _ = export.tokenizer  # run needs it: a folder without one is refused now
    return export


def load_for_generation(
    export: ExportFolder,
    provider: ProviderName,
    threads: int | None,
    layout: SessionLayout,
    in_place_kv: InPlaceKv = "auto",
    kv_cache: KvCacheFormat = "float32",
    prompt_kernel: PromptKernel = "export",
    single_row_head: bool = True,
) -> Gpt2Onnx:
    """The opened export with its tokenizer, on ``provider`` (never another), in session ``layout``, its KV cache
    written in place or copied as ``in_place_kv`` says, in the format ``kv_cache`` names, its prompts multiplied
    by ``prompt_kernel``, a single row's tied head over a transposed copy of the table where ``single_row_head``
    (RuntimeOptions.single_row_head)."""
    options = RuntimeOptions(
        provider=provider,
        intra_op_threads=threads,
        layout=layout,
        in_place_kv=in_place_kv,
        kv_cache=kv_cache,
        prompt_kernel=prompt_kernel,
        single_row_head=single_row_head,
    )
    return Gpt2Onnx.open(export, options)

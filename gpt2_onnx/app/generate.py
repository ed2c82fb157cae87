"""``gpt2-onnx run``'s work on the ONNX Runtime side: load an export for generation, then generate or stream.

The command line parses and prints; what it runs comes from here, so that it reaches the runtime through the
application layer (tests/test_layers.py). The names are the runtime's own API.
"""

from __future__ import annotations

from pathlib import Path

from gpt2_onnx.integrity import IntegrityCheck, check_file_hashes
from gpt2_onnx.manifest import Manifest
from gpt2_onnx.names import TOKENIZER_FILE
from gpt2_onnx.providers import ProviderName
from gpt2_onnx_runtimes.api import Gpt2Onnx
from gpt2_onnx_runtimes.folder_checks import check_files
from gpt2_onnx_runtimes.generation import GenerationOptions, GenerationResult
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults, ResolvedOptions
from gpt2_onnx_runtimes.session import RuntimeOptions, SessionLayout
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = [
    "CheckpointDefaults",
    "GenerationOptions",
    "GenerationResult",
    "Gpt2Onnx",
    "ResolvedOptions",
    "TextTokenizer",
    "generation_setup",
    "load_for_generation",
]


def load_for_generation(
    folder: Path,
    provider: ProviderName,
    threads: int | None,
    layout: SessionLayout,
    integrity: IntegrityCheck,
) -> Gpt2Onnx:
    """The export at ``folder`` with its tokenizer, on ``provider`` (never another), in session ``layout``."""
    options = RuntimeOptions(provider=provider, intra_op_threads=threads, layout=layout, integrity=integrity)
    return Gpt2Onnx.load(folder, options=options)


def generation_setup(
    folder: Path, manifest: Manifest, integrity: IntegrityCheck
) -> tuple[CheckpointDefaults, TextTokenizer]:
    """The export's generation defaults and its tokenizer, read before any session is created, so that options
    are resolved and bad ones refused before the model loads. The folder's files are checked first (presence,
    size and, unless ``integrity`` says otherwise, sha256), as loading checks them: a changed file is reported as
    changed, never as whatever reading it would break (the load that follows finds their fingerprints cached)."""
    check_files(folder, manifest)
    check_file_hashes(folder, manifest, integrity)
    return CheckpointDefaults.read(folder), TextTokenizer(folder / TOKENIZER_FILE)

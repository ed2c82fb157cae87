"""An export folder opened once: its manifest read, its files checked against it, its tokenizer and generation
defaults read. Whatever runs the folder takes this object (``gpt2-onnx run``, ``serve``'s replicas,
:class:`~gpt2_onnx_runtimes.session.LoadedExport`, :class:`~gpt2_onnx_runtimes.api.Gpt2Onnx`) rather than a
path, so nothing reads or checks the folder twice.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from gpt2_onnx_core.integrity import IntegrityCheck, check_file_hashes
from gpt2_onnx_core.manifest import Manifest, read_manifest
from gpt2_onnx_core.names import TOKENIZER_FILE
from gpt2_onnx_runtimes.folder_checks import check_files, check_runtime_version
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults
from gpt2_onnx_runtimes.tokenizer import TextTokenizer

__all__ = ["ExportFolder"]


class ExportFolder:
    """A checked export folder (see the module docstring). The tokenizer is read on first use (verification and
    benchmarks run graphs without it); a folder without one raises ManifestError then."""

    def __init__(self, path: Path, manifest: Manifest, defaults: CheckpointDefaults) -> None:
        self.path, self.manifest, self.defaults = path, manifest, defaults

    @classmethod
    def open(cls, path: str | Path, integrity: IntegrityCheck | None = None) -> ExportFolder:
        """Read ``path``'s manifest and generation defaults and check its files: the installed ONNX Runtime
        against the export's minimum, every file's presence and size and, unless ``integrity`` says otherwise, its
        sha256 (a changed file is reported as changed, never as whatever reading it would break)."""
        folder = Path(path)
        manifest = read_manifest(folder)
        return cls.checked(folder, manifest, integrity)

    @classmethod
    def checked(cls, folder: Path, manifest: Manifest, integrity: IntegrityCheck | None = None) -> ExportFolder:
        """As :meth:`open`, against a manifest already in memory (an export checks its folder before writing)."""
        check_runtime_version(manifest)
        check_files(folder, manifest)
        check_file_hashes(folder, manifest, integrity or IntegrityCheck())
        return cls(folder, manifest, CheckpointDefaults.read(folder))

    @cached_property
    def tokenizer(self) -> TextTokenizer:
        return TextTokenizer(self.path / TOKENIZER_FILE)

    def encode_once(self, text: str) -> list[int]:
        """``text``'s ids with the folder's tokenizer, which stays loaded only if it already was: a folder run by
        ids (a benchmark, an application that tokenizes for itself) does not keep GPT-2's vocabulary, about 30 MiB,
        resident for one text (the int8 cache's calibration)."""
        if "tokenizer" in vars(self):  # cached_property's slot: already read
            return self.tokenizer.encode(text)
        return TextTokenizer(self.path / TOKENIZER_FILE).encode(text)

    def __repr__(self) -> str:
        return f"ExportFolder({str(self.path)!r})"

"""The typed errors of gpt2-onnx.

Library code raises these; only the CLI turns them into one-line messages and exit codes. Every message is written
to stand alone on one line: it names the problem and, where there is one, the fix.
"""

from __future__ import annotations

__all__ = [
    "BenchError",
    "ExportCheckError",
    "ExportError",
    "Gpt2OnnxError",
    "HubUnreachableError",
    "InferenceError",
    "InvalidInputError",
    "ManifestError",
    "ModelLoadError",
    "OutputPathError",
    "ParityError",
    "ProviderUnavailableError",
    "RuntimeVersionError",
    "ServerBusyError",
    "ServingError",
    "UnsupportedModelError",
    "UnsupportedOpsetError",
    "first_line",
]


def first_line(exc: BaseException) -> str:
    """The first line of a library's exception message (or its type's name when it has none), to quote in a
    one-line error."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Gpt2OnnxError(Exception):
    """Base class of every error gpt2-onnx raises on purpose."""

    exit_code = 1


class ModelLoadError(Gpt2OnnxError):
    """A checkpoint could not be found or read."""

    exit_code = 2


class HubUnreachableError(ModelLoadError):
    """A hub id was given but the Hugging Face Hub cannot be reached and the files are not cached."""


class UnsupportedModelError(ModelLoadError):
    """The checkpoint is not a GPT-2 language model this tool can export."""


class UnsupportedOpsetError(Gpt2OnnxError):
    """The requested ONNX opset is outside the supported range."""

    exit_code = 2


class OutputPathError(Gpt2OnnxError):
    """The output path cannot be used (a file, not writable, or a non-empty folder without --force)."""

    exit_code = 2


class ExportError(Gpt2OnnxError):
    """A stage of the export failed."""


class ExportCheckError(ExportError):
    """The exported graphs do not reproduce the source model within tolerance."""


class ParityError(Gpt2OnnxError):
    """verify found differences beyond tolerance."""


class ManifestError(Gpt2OnnxError):
    """An export folder or its manifest.json is missing, malformed, or does not match its files."""

    exit_code = 2


class ProviderUnavailableError(Gpt2OnnxError):
    """The requested ONNX Runtime execution provider cannot run here (never silently replaced by another)."""

    exit_code = 3


class RuntimeVersionError(Gpt2OnnxError):
    """The installed ONNX Runtime is older than the export needs."""

    exit_code = 3


class InferenceError(Gpt2OnnxError):
    """ONNX Runtime failed while running a graph (after loading it)."""


class InvalidInputError(Gpt2OnnxError):
    """Arguments or tensors given to the runtime are invalid (shapes, ranges, options)."""

    exit_code = 2


class BenchError(Gpt2OnnxError):
    """A benchmark could not run (a worker failed to start, load or measure)."""


class ServerBusyError(Gpt2OnnxError):
    """A server has no room for another request now (its queue is full); try again later."""


class ServingError(Gpt2OnnxError):
    """A server could not start, deploy or keep running (its cluster, its port, its replicas)."""

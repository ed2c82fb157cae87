"""The typed errors of gpt2-onnx.

Library code raises these; only the CLI turns them into one-line messages and exit codes. Every message is written
to stand alone on one line: it names the problem and, where there is one, the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "BenchError",
    "ExportCheckError",
    "ExportError",
    "Gpt2OnnxError",
    "HubUnreachableError",
    "InferenceError",
    "InvalidInputError",
    "ManifestError",
    "MissingDependencyError",
    "ModelLoadError",
    "OptionError",
    "OutputPathError",
    "ParityError",
    "ProviderUnavailableError",
    "RuntimeVersionError",
    "ServerBusyError",
    "ServingError",
    "SourceMismatchError",
    "UnsupportedModelError",
    "UnsupportedOpsetError",
    "first_line",
]


_QUOTE_LIMIT = 400  # characters of a library's message quoted in one line, cut only between sentences
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def first_line(exc: BaseException) -> str:
    """A library's exception message as one line to quote in an error (its type's name when it has none).

    Its lines are joined, not dropped: ONNX Runtime puts the sentence's end on the next line ("Got invalid
    dimensions for input: x for the following indices" / "index: 2 Got: 4 Expected: 2"). A long message keeps
    its first sentences up to about 400 characters, and always its whole first sentence: nothing is quoted
    cut off mid-sentence."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    if not text:
        return type(exc).__name__
    if len(text) <= _QUOTE_LIMIT:
        return text
    sentences = _SENTENCE_END.split(text)
    kept = sentences[0]
    for sentence in sentences[1:]:
        if len(kept) + 1 + len(sentence) > _QUOTE_LIMIT:
            return f"{kept} […]"
        kept = f"{kept} {sentence}"
    return kept


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


class OptionError(InvalidInputError):
    """An option has a value it cannot take, or has no effect where it was given.

    The message names options by placeholders (``{max_new_tokens} must be >= 1``): the Python API shows its
    parameter names, the command line its flags (``--max-new-tokens``), through :meth:`render`."""

    def __init__(self, template: str, *names: str) -> None:
        self.template, self.names = template, names
        super().__init__(self.render({}))

    def render(self, spelling: Mapping[str, str]) -> str:
        """The message with each option named as ``spelling`` says (its own name where it says nothing)."""
        text = self.template
        for name in self.names:
            text = text.replace("{" + name + "}", spelling.get(name, name))
        return text


class SourceMismatchError(InvalidInputError):
    """The source model given to compare an export with has other dimensions than the export."""


class MissingDependencyError(Gpt2OnnxError):
    """A package the command needs is not installed (the message says what to install)."""

    exit_code = 3


class BenchError(Gpt2OnnxError):
    """A benchmark could not run (a worker failed to start, load or measure)."""


class ServerBusyError(Gpt2OnnxError):
    """A server has no room for another request now (its queue is full); try again later."""


class ServingError(Gpt2OnnxError):
    """A server could not start, deploy or keep running (its cluster, its port, its replicas)."""

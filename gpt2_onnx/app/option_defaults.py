""":class:`GenerationOptions`' own defaults by field, for ``run --help``: read from the dataclass, where each is
written once. Importing this loads the options module alone (no ONNX Runtime), so the help stays quick."""

from __future__ import annotations

from dataclasses import MISSING, fields
from types import MappingProxyType

from gpt2_onnx_runtimes.options import GenerationOptions

__all__ = ["GENERATION_DEFAULTS"]

GENERATION_DEFAULTS: MappingProxyType[str, object] = MappingProxyType(
    {field.name: field.default for field in fields(GenerationOptions) if field.default is not MISSING}
)

""":class:`GenerationOptions`' and :class:`RuntimeOptions`' own defaults by field, for the commands' ``--help``:
read from the dataclasses, where each is written once. Importing this loads the two options modules alone (no ONNX
Runtime), so the help stays quick."""

from __future__ import annotations

from dataclasses import MISSING, fields
from types import MappingProxyType

from gpt2_onnx_runtimes.options import GenerationOptions
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions

__all__ = ["GENERATION_DEFAULTS", "RUNTIME_DEFAULTS"]

GENERATION_DEFAULTS: MappingProxyType[str, object] = MappingProxyType(
    {field.name: field.default for field in fields(GenerationOptions) if field.default is not MISSING}
)
RUNTIME_DEFAULTS: MappingProxyType[str, object] = MappingProxyType(
    {field.name: field.default for field in fields(RuntimeOptions) if field.default is not MISSING}
)

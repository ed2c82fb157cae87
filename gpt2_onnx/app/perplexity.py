"""Perplexity of a source model and of its export over the same windows of one text, compared.

The source's log-probabilities come from the PyTorch side (:mod:`gpt2_onnx_exporters.source_perplexity`), the
export's from ONNX Runtime (:mod:`gpt2_onnx_runtimes.perplexity`); this layer alone holds both and compares them.
``verify --perplexity`` and ``bench --perplexity`` run it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpt2_onnx_core.perplexity import Perplexity, PerplexityComparison, PerplexityText, perplexity_limit
from gpt2_onnx_core.precisions import int8_kv_cache_perplexity
from gpt2_onnx_exporters.source import load_source
from gpt2_onnx_exporters.source_perplexity import source_log_probs
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.perplexity import export_log_probs
from gpt2_onnx_runtimes.session import LoadedExport

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = [
    "checkpoint_perplexity",
    "compare_perplexity",
    "export_perplexity",
    "read_for_export",
    "source_perplexity",
]


def read_for_export(
    path: Path, export: ExportFolder, window: int | None = None, stride: int | None = None
) -> PerplexityText:
    """``path`` tokenized with the opened export's tokenizer, in windows that fit its model (checked before any
    model loads: a missing, empty or non-UTF-8 file, fewer than 2 tokens, a window or stride that cannot be)."""
    return PerplexityText.read(path, export.tokenizer.encode, export.manifest.dims.n_positions, window, stride)


def source_perplexity(model: GPT2LMHeadModel, text: PerplexityText) -> Perplexity:
    return Perplexity.of(text.plan, source_log_probs(model, text.ids, text.plan))


def checkpoint_perplexity(spec: str, seed: int | None, text: PerplexityText) -> Perplexity:
    """A checkpoint (folder, hub id or random:NAME with ``seed``) loaded as the parity reference is, scoring
    ``text``."""
    return source_perplexity(load_source(spec, seed).model, text)


def export_perplexity(loaded: LoadedExport, text: PerplexityText) -> Perplexity:
    return Perplexity.of(text.plan, export_log_probs(loaded, text.ids, text.plan))


def compare_perplexity(model: GPT2LMHeadModel, loaded: LoadedExport, text: PerplexityText) -> PerplexityComparison:
    """Both models over ``text``'s windows, judged by the export precision's limit (its ``perplexity`` in
    :mod:`gpt2_onnx_core.precisions`), with the int8 KV cache's added where ``loaded`` has one."""
    limit = perplexity_limit(loaded.manifest.precision)
    if loaded.options.kv_cache == "int8":
        limit = int8_kv_cache_perplexity(limit)
    return PerplexityComparison(str(text.path), source_perplexity(model, text), export_perplexity(loaded, text), limit)

"""``bench --perplexity``: each system's perplexity over the same windows of one text, beside its speed.

Measured in the bench's own process once every timed round is over, so that it never shares the machine with a
timed figure: the eager baseline's checkpoint through PyTorch (loaded as the parity reference is, eager attention),
each export folder through ONNX Runtime in the layout it was timed in. The text is tokenized once, by the first
folder's tokenizer, and every system scores those ids. Each folder is opened once (:func:`open_exports`), before
any model loads, and its sessions are created from that object. Torch is imported only where a baseline runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from gpt2_onnx.app.bench.report import BenchReport
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.perplexity import Perplexity, PerplexityRequest, PerplexityText
from gpt2_onnx_runtimes.export_folder import ExportFolder
from gpt2_onnx_runtimes.perplexity import export_log_probs
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["add_perplexity", "measure_perplexity", "open_exports", "read_text_for"]


def open_exports(folders: Sequence[Path], manifests: Sequence[Manifest]) -> dict[str, ExportFolder]:
    """Each export folder opened once against its manifest (every file's presence, size and sha256), keyed as its
    systems name it (:attr:`SystemSpec.folder`)."""
    return {
        str(folder): ExportFolder.checked(Path(folder), manifest)
        for folder, manifest in zip(folders, manifests, strict=True)
    }


def read_text_for(request: PerplexityRequest, export: ExportFolder) -> PerplexityText:
    """The text tokenized by the export's tokenizer and windowed for its model: every error before any model."""
    n_positions = export.manifest.dims.n_positions
    return PerplexityText.read(request.path, export.tokenizer.encode, n_positions, request.window, request.stride)


def _onnx_perplexity(
    spec: SystemSpec, export: ExportFolder, settings: BenchSettings, text: PerplexityText
) -> Perplexity:
    options = RuntimeOptions(
        provider=settings.provider,
        intra_op_threads=settings.threads,
        layout=spec.layout,
        share_weights=spec.share_weights,
        session_config=dict(spec.session_config),
        kv_cache=spec.kv_cache,
    )
    with LoadedExport.open(export, options) as loaded:
        return Perplexity.of(text.plan, export_log_probs(loaded, text.ids, text.plan))


def _system_perplexity(
    spec: SystemSpec, settings: BenchSettings, text: PerplexityText, exports: Mapping[str, ExportFolder]
) -> Perplexity | None:
    if spec.factory is not None:
        return None  # a system from outside this package speaks the timing protocol only
    if spec.kind == "eager" and spec.model is not None:
        from gpt2_onnx.app.perplexity import checkpoint_perplexity  # torch: only where a baseline runs

        return checkpoint_perplexity(spec.model, spec.seed, text)
    if spec.kind == "onnx" and spec.folder is not None:
        return _onnx_perplexity(spec, exports[spec.folder], settings, text)
    return None


def measure_perplexity(
    specs: Sequence[SystemSpec], settings: BenchSettings, text: PerplexityText, exports: Mapping[str, ExportFolder]
) -> dict[str, Perplexity]:
    """Each system's perplexity of ``text``, by label (systems from outside this package left out); an export
    folder's systems load from its opened ``exports`` entry."""
    found = {spec.label: _system_perplexity(spec, settings, text, exports) for spec in specs}
    return {label: value for label, value in found.items() if value is not None}


def add_perplexity(report: BenchReport, text: PerplexityText, found: dict[str, Perplexity]) -> BenchReport:
    """``report`` with each system's perplexity (``systems[label]["perplexity"]``), each ONNX system's over the
    baseline's as a ratio (``ratios[label]["perplexity"]``), and the text and its windows."""
    systems = {
        label: {**system, "perplexity": found[label].value} if label in found else system
        for label, system in report.systems.items()
    }
    base = found.get(report.baseline) if report.baseline else None
    ratios = {
        label: {**ratios, "perplexity": found[label].value / base.value} if base and label in found else ratios
        for label, ratios in report.ratios.items()
    }
    windows = {"text": str(text.path), **text.plan.to_json()}
    return replace(report, systems=systems, ratios=ratios, perplexity=windows)

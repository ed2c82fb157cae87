"""``gpt2-onnx export``: checkpoint → checked deployment folder, written atomically.

Stages: load model, trace prefill, trace decode, save weights, (simplify), save graphs, check graphs, save
tokenizer and configs, golden vectors, save manifest, check parity. Any failure, or an interrupt before the commit,
leaves no output folder behind; an interrupt that comes while the finished export is put in place leaves it there,
complete and checked, and the result says so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gpt2_onnx.app.environment import describe_environment
from gpt2_onnx.app.genai_config import write_genai_config
from gpt2_onnx.app.output_folder import StagedFolder, check_output_path
from gpt2_onnx.app.parity_suite import ParitySuite
from gpt2_onnx_core import __version__
from gpt2_onnx_core.compatibility import min_onnxruntime_for
from gpt2_onnx_core.config import ExportOptions, ModelDims
from gpt2_onnx_core.errors import ExportCheckError, ExportError
from gpt2_onnx_core.golden import GoldenSet, write_golden
from gpt2_onnx_core.integrity import IntegrityCheck
from gpt2_onnx_core.manifest import GraphRecord, Manifest, file_records, write_manifest
from gpt2_onnx_core.names import GRAPHS, graph_inputs, graph_outputs
from gpt2_onnx_core.parity import ParityReport
from gpt2_onnx_core.progress import StageReporter, Stages
from gpt2_onnx_core.prompts import check_prompt_ids
from gpt2_onnx_core.weights_index import ExternalTensorRef, index_of_graphs
from gpt2_onnx_exporters.golden import build_golden
from gpt2_onnx_exporters.graphs import ExportedGraphs, export_graphs
from gpt2_onnx_exporters.model_files import model_description, save_model_configs
from gpt2_onnx_exporters.reference import ReferenceModel
from gpt2_onnx_exporters.source import SourceModel, load_source
from gpt2_onnx_exporters.tokenizer_files import save_tokenizer_files
from gpt2_onnx_exporters.trace import TraceCache
from gpt2_onnx_exporters.variants import GraphVariant
from gpt2_onnx_runtimes.golden_check import golden_from_export
from gpt2_onnx_runtimes.runtime_options import RuntimeOptions
from gpt2_onnx_runtimes.session import LoadedExport

__all__ = ["ExportResult", "SharedExportWork", "export_model"]

log = logging.getLogger(__name__)

PARITY_PROMPTS = 3  # the export's own check runs the first three check prompts; verify runs them all


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    manifest: Manifest
    report: ParityReport | None
    timings: dict[str, float]
    interrupted_after_commit: bool = False  # an interrupt came once the export was in place: it is kept


class SharedExportWork:
    """Loaded source models and their traced graphs, shared by several exports in one process (scripts/make_fixtures.py
    exports one checkpoint at two precisions). Only loading and tracing are shared: each export still runs its
    precision's passes on its own copy of the traced graphs, and writes and checks its whole folder."""

    def __init__(self) -> None:
        self._loaded: dict[tuple[str, int | None, str | None, str | None], tuple[SourceModel, TraceCache]] = {}

    def load(self, options: ExportOptions) -> tuple[SourceModel, TraceCache]:
        key = (options.model, options.seed, options.tokenizer, options.revision)
        if key not in self._loaded:
            source = load_source(*key)
            self._loaded[key] = (source, self._trace_cache(source))
        return self._loaded[key]

    def _trace_cache(self, source: SourceModel) -> TraceCache:
        """Where one loaded model's traces are kept: in this process. A subclass may keep them elsewhere."""
        return TraceCache(source.model)


def _build_manifest(
    source: SourceModel,
    dims: ModelDims,
    graphs: ExportedGraphs,
    folder: Path,
    options: ExportOptions,
    export_id: str,
    other_files: list[str],
) -> Manifest:
    tokenizer, config = source.tokenizer, source.model.config
    records = {
        kind: GraphRecord(
            graphs.files[kind],
            tuple(graph_inputs(kind, dims)),
            tuple(graph_outputs(kind, dims, options.all_logits)),
        )
        for kind in GRAPHS
    }
    names = [*graphs.files.values(), graphs.weights.file_name, *other_files]
    return Manifest(
        dims=dims,
        graphs=records,
        weights_file=graphs.weights.file_name,
        weights_index=_weights_index(folder, list(graphs.files.values())),
        files=file_records(folder, names),
        opset=options.opset,
        ir_version=graphs.ir_version,
        precision=options.precision_info.name,
        min_onnxruntime=min_onnxruntime_for(options.opset, options.optimize, options.precision_info),
        model={
            "source": source.source,
            "seed": source.seed,
            "revision": source.revision,
            **model_description(source.model, graphs.tied_head),
        },
        tokens={
            "bos_token_id": _token_id(config.bos_token_id),
            "eos_token_id": _token_id(config.eos_token_id),
            "pad_token_id": tokenizer.pad_token_id,
        },
        export={
            "export_id": export_id,
            "options": options.to_json(),
            "weight_bytes": graphs.weights.parameter_bytes(),  # the tensors in the weights file, padding aside
            "quantization": graphs.quantization,
            "tool": {"gpt2-onnx": __version__},
            "environment": describe_environment(),
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        },
    )


def _weights_index(folder: Path, graph_files: list[str]) -> tuple[ExternalTensorRef, ...]:
    """The weights file's table of contents as the saved graphs state it (what the manifest repeats)."""
    import onnx  # the graphs only, without their weights

    graphs = [(onnx.load(str(folder / name), load_external_data=False), folder / name) for name in graph_files]
    return index_of_graphs(graphs)


def _token_id(value: object) -> int | None:
    """A config's special token id; configs may hold a list (several end tokens): the first one is the main one."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return int(value) if isinstance(value, int) else None


def _encoder(source: SourceModel) -> Callable[[str], list[int]]:
    return lambda text: [int(i) for i in source.tokenizer(text)["input_ids"]]


def _golden(source: SourceModel, loaded: LoadedExport | None, options: ExportOptions) -> GoldenSet:
    """golden.json's cases for every precision: the source model's greedy tokens and logits for fp32; the export's
    own for a reduced precision, which does not reproduce the source model's exactly but which a consumer's
    runtime should."""
    precision = options.precision_info
    rule = precision.tolerance.arithmetic
    if precision.golden_from == "source" or loaded is None:
        if rule is None:
            raise ExportError(f"{precision.flag} golden vectors from the source model need an arithmetic rule")
        return build_golden(ReferenceModel(source.model), _encoder(source), source.dims.n_positions, rule)
    if precision.golden_logits_atol is None:
        raise ExportError(f"{precision.flag} golden vectors from the export need a logits tolerance")
    return golden_from_export(loaded, _encoder(source), precision.golden_logits_atol)


def _check_parity(loaded: LoadedExport, source: SourceModel, options: ExportOptions) -> ParityReport:
    """The export's own parity check (CPU, the precision's tolerances): prefill, chained decode, empty past,
    padded batch."""
    steps = options.decode_check_steps
    prompts = check_prompt_ids(_encoder(source), source.dims.n_positions - steps - 1)[:PARITY_PROMPTS]
    tolerance = options.precision_info.tolerance
    suite = ParitySuite(loaded, ReferenceModel(source.model), tolerance, ParityReport())
    suite.prefill_and_decode_chain(prompts[0], steps)
    suite.decode_with_empty_past(prompts[0])
    suite.padded_batch(prompts, steps=2)
    return suite.report


def _runs_the_export(options: ExportOptions) -> bool:
    """The written graphs are loaded for the parity check, and for golden vectors made by the export itself."""
    return options.check or options.precision_info.golden_from == "export"


def export_model(
    options: ExportOptions, report: StageReporter | None = None, shared: SharedExportWork | None = None
) -> ExportResult:
    """Run the whole export; raises a :class:`~gpt2_onnx_core.errors.Gpt2OnnxError` and writes nothing on failure.

    One pass: the graphs and their weights file, the tokenizer and configs, then (against the manifest held in
    memory) golden vectors and the parity check, then genai_config.json and manifest.json, each written once, and
    the folder put in place. ``shared``: a source model loaded and traced before, reused."""
    check_output_path(options.output, options.force)  # fail before minutes of work
    stages = Stages(report)
    with stages.stage("load model"):
        if shared is not None:
            source, traces = shared.load(options)
        else:
            source, traces = load_source(options.model, options.seed, options.tokenizer, options.revision), None
    export_id = uuid.uuid4().hex
    parity: ParityReport | None = None
    with StagedFolder(options.output, options.force) as staged:
        folder = staged.path
        graphs = export_graphs(
            source.model,
            source.dims,
            folder,
            opset=options.opset,
            all_logits=options.all_logits,
            simplify=options.simplify,
            export_id=export_id,
            stages=stages,
            variant=GraphVariant(options.optimize, options.precision_info, options.quantization),
            traces=traces,
        )
        with stages.stage("save tokenizer and configs"):
            others = save_tokenizer_files(source.tokenizer, folder, source.dims.n_positions)
            others += save_model_configs(source.model, folder)
            contract = _build_manifest(source, source.dims, graphs, folder, options, export_id, others)
        # The folder's own two graphs (what C++, C# and onnxruntime-genai run), checked against the manifest held in
        # memory; its files were hashed just now, for it.
        written = RuntimeOptions(provider="cpu", layout="split", integrity=IntegrityCheck(sha256=False))
        runs = _runs_the_export(options)
        with LoadedExport.from_manifest(folder, contract, written) if runs else contextlib.nullcontext() as loaded:
            with stages.stage("golden vectors"):
                golden = write_golden(folder, _golden(source, loaded, options))
            if options.check and loaded is not None:
                with stages.stage("check parity"):
                    parity = _check_parity(loaded, source, options)
                if not parity.ok:
                    raise ExportCheckError(f"the export does not match the source model: {parity.summary()}")
        with stages.stage("save manifest"):
            genai = write_genai_config(folder, contract)  # from the I/O contract
            manifest = replace(contract, files={**contract.files, **file_records(folder, [golden, genai])})
            write_manifest(folder, manifest)
        try:
            target = staged.commit()
        except KeyboardInterrupt:  # delivered once the swap is done: the export is in place, complete and checked
            if not staged.committed:
                raise
            return ExportResult(staged.target, manifest, parity, dict(stages.timings), interrupted_after_commit=True)
    return ExportResult(target, manifest, parity, dict(stages.timings))

"""``gpt2-onnx export``: checkpoint → checked deployment folder, written atomically.

Stages: load model, trace prefill, trace decode, save weights, (simplify), save graphs, check graphs, save
tokenizer and configs, golden vectors, save manifest, check parity. Any failure, or an interrupt before the commit,
leaves no output folder behind; an interrupt that comes while the finished export is put in place leaves it there,
complete and checked, and the result says so.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpt2_onnx import __version__
from gpt2_onnx.config import ExportOptions, ModelDims
from gpt2_onnx.dependencies import require_pytorch_side
from gpt2_onnx.environment import describe_environment
from gpt2_onnx.errors import ExportCheckError
from gpt2_onnx.genai_config import write_genai_config
from gpt2_onnx.golden import write_golden
from gpt2_onnx.integrity import IntegrityCheck
from gpt2_onnx.manifest import GraphRecord, Manifest, file_records, write_manifest
from gpt2_onnx.names import GRAPHS, graph_inputs, graph_outputs
from gpt2_onnx.output_folder import StagedFolder, check_output_path
from gpt2_onnx.parity import ParityReport
from gpt2_onnx.progress import StageReporter, Stages
from gpt2_onnx.tolerances import tolerance_for
from gpt2_onnx.versions import version_tuple
from gpt2_onnx.weights_index import ExternalTensorRef, index_of_graphs

if TYPE_CHECKING:
    from exporters.graphs import ExportedGraphs
    from exporters.source import SourceModel
    from runtimes.session import LoadedExport

__all__ = ["ExportResult", "export_model", "min_onnxruntime_for"]

log = logging.getLogger(__name__)

CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
    "In a shocking finding, scientists discovered",
)
FP32 = tolerance_for("float32")
# Oldest onnxruntime release per opset that loads the fp32 export and reproduces its golden tokens, as measured by
# scripts/ort_matrix.py --all (docs/compatibility.md). 1.15.0 is the oldest release with Python 3.11 wheels, so
# opsets 17 and 18 were not tried on older ones. 1.15 lacks Shape-19, 1.16 refuses opset 20 ("under development"),
# 1.17 refuses IR 10, which opset 21 needs.
_MIN_ORT = {17: "1.15.0", 18: "1.15.0", 19: "1.16.0", 20: "1.17.0", 21: "1.18.0"}
# golden.json of a reduced precision holds the export's own outputs; its logits tolerance covers other kernels: fp16
# CUDA's, whose accumulation order differs most; int8 and int4 MatMulNBits' (accuracy level 4 quantizes activations),
# whose single-row decode and multi-row prompt paths already differ on one CPU: GPT-2-small's logits at the same
# position through the KV cache and recomputed by prefill differ by up to 0.045, a padded batch row by up to 0.017
# (measured with the C++ sample, ONNX Runtime 1.31.1). 0.1 covers that with headroom; tiny models differ by < 1e-5.
_GOLDEN_ATOL = {"float16": 5e-2, "int8": 0.1, "int4": 0.1}
# Oldest ONNX Runtime whose CPU provider loads each variant and reproduces its golden vectors, measured by
# scripts/ort_matrix.py --all (docs/compatibility.md): fp16 runs on 1.15.0 (the oldest tried); 4-bit MatMulNBits
# runs from 1.17.0 (its kernels there give logits up to 0.03 from 1.31's on GPT-2-small, as 1.19 to 1.30 do: within
# int4's golden tolerance); 8-bit MatMulNBits runs from 1.22.0 (1.21.1 fails); --optimize's MultiHeadAttention fails
# at run time before 1.20.0.
_MIN_ORT_VARIANT = {"optimize": "1.20.0", "float16": "1.15.0", "int8": "1.22.0", "int4": "1.17.0"}


def min_onnxruntime_for(opset: int, optimize: bool = False, precision: str = "float32") -> str:
    """The oldest ONNX Runtime that loads the export: the opset's minimum, raised by the variant's operators."""
    needs = [_MIN_ORT[opset], _MIN_ORT_VARIANT.get(precision, "0"), _MIN_ORT_VARIANT["optimize"] if optimize else "0"]
    return max(needs, key=version_tuple)


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    manifest: Manifest
    report: ParityReport | None
    timings: dict[str, float]
    interrupted_after_commit: bool = False  # an interrupt came once the export was in place: it is kept

    @property
    def graph_and_weight_bytes(self) -> int:
        names = [record.file for record in self.manifest.graphs.values()] + [self.manifest.weights_file]
        return sum(self.manifest.files[name].size for name in names)


def _build_manifest(
    source: SourceModel,
    dims: ModelDims,
    graphs: ExportedGraphs,
    folder: Path,
    options: ExportOptions,
    export_id: str,
    other_files: list[str],
) -> Manifest:
    from exporters.model_files import model_description

    tokenizer, config = source.tokenizer, source.model.config
    records = {
        kind: GraphRecord(
            graphs.files[kind],
            tuple(graph_inputs(kind, dims.n_layer, dims.n_head, dims.head_dim)),
            tuple(graph_outputs(kind, dims.n_layer, dims.n_head, dims.head_dim, dims.vocab_size, options.all_logits)),
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
        precision=options.precision_name,
        min_onnxruntime=min_onnxruntime_for(options.opset, options.optimize, options.precision_name),
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
    import onnx

    graphs = [(onnx.load(str(folder / name), load_external_data=False), folder / name) for name in graph_files]
    return index_of_graphs(graphs)


def _token_id(value: object) -> int | None:
    """A config's special token id; configs may hold a list (several end tokens): the first one is the main one."""
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return int(value) if isinstance(value, int) else None


def _check_prompts(source: SourceModel, dims: ModelDims, steps: int) -> tuple[tuple[int, ...], ...]:
    longest = dims.n_positions - steps - 1
    prompts = []
    for text in CHECK_TEXTS:
        ids = tuple(_encoder(source)(text)[:longest])
        prompts.append(ids or (0,))
    return tuple(prompts)


def _encoder(source: SourceModel) -> Callable[[str], list[int]]:
    return lambda text: [int(i) for i in source.tokenizer(text)["input_ids"]]


def _check_parity(
    loaded: LoadedExport, source: SourceModel, prompts: tuple[tuple[int, ...], ...], steps: int, precision: str
) -> ParityReport:
    """The export's own parity check (CPU, the precision's tolerances): prefill, chained decode, empty past,
    padded batch."""
    from exporters.reference import ReferenceModel
    from gpt2_onnx.checks import ParitySuite

    suite = ParitySuite(loaded, ReferenceModel(source.model), tolerance_for(precision), ParityReport())
    suite.prefill_and_decode_chain(prompts[0], steps)
    suite.decode_with_empty_past(prompts[0])
    suite.padded_batch(prompts, steps=2)
    return suite.report


def _golden_from_export(loaded: LoadedExport, manifest: Manifest, source: SourceModel) -> Manifest:
    """Write golden.json from the export's own greedy tokens and logits (ONNX Runtime, CPU): a reduced precision
    does not reproduce the source model's tokens exactly, but a consumer's runtime should reproduce the export's.
    Returns the manifest with golden.json's record, written."""
    from runtimes.golden_check import golden_from_export

    golden = golden_from_export(loaded, _encoder(source), _GOLDEN_ATOL[manifest.precision])
    name = write_golden(loaded.folder, golden)
    manifest = replace(manifest, files={**manifest.files, **file_records(loaded.folder, [name])})
    write_manifest(loaded.folder, manifest)
    return manifest


def _save_files(
    source: SourceModel, graphs: ExportedGraphs, folder: Path, options: ExportOptions, export_id: str, stages: Stages
) -> Manifest:
    """Beside the graphs: the tokenizer and configs, fp32's golden vectors, genai_config.json, the manifest."""
    from exporters.golden import build_golden
    from exporters.model_files import save_model_configs
    from exporters.reference import ReferenceModel
    from exporters.tokenizer_files import save_tokenizer_files

    dims = source.dims
    with stages.stage("save tokenizer and configs"):
        others = save_tokenizer_files(source.tokenizer, folder, dims.n_positions)
        others += save_model_configs(source.model, folder)
    if options.precision_name == "float32":  # a reduced precision's golden vectors are the export's own
        with stages.stage("golden vectors"):
            golden = build_golden(
                ReferenceModel(source.model), _encoder(source), dims.n_positions, FP32.logits_atol or 0.0
            )
            others.append(write_golden(folder, golden))
    with stages.stage("save manifest"):
        manifest = _build_manifest(source, dims, graphs, folder, options, export_id, others)
        genai = write_genai_config(folder, manifest)  # from the manifest, then listed in it
        manifest = replace(manifest, files={**manifest.files, **file_records(folder, [genai])})
        write_manifest(folder, manifest)
    return manifest


def export_model(options: ExportOptions, report: StageReporter | None = None) -> ExportResult:
    """Run the whole export; raises a :class:`~gpt2_onnx.errors.Gpt2OnnxError` and writes nothing on failure."""
    check_output_path(options.output, options.force)  # fail before minutes of work
    require_pytorch_side("export")  # before the imports below, which need it

    from exporters.graphs import export_graphs
    from exporters.source import load_source
    from exporters.variants import GraphVariant
    from runtimes.session import LoadedExport, RuntimeOptions

    stages = Stages(report)
    with stages.stage("load model"):
        source = load_source(options.model, options.seed, options.tokenizer, options.revision)
    dims = source.dims
    reduced = options.precision_name != "float32"
    export_id = uuid.uuid4().hex
    parity: ParityReport | None = None
    with StagedFolder(options.output, options.force) as staged:
        graphs = export_graphs(
            source.model,
            dims,
            staged.path,
            opset=options.opset,
            all_logits=options.all_logits,
            simplify=options.simplify,
            export_id=export_id,
            stages=stages,
            variant=GraphVariant(options.optimize, options.precision_name, options.block_size),
        )
        manifest = _save_files(source, graphs, staged.path, options, export_id, stages)
        # One CPU load of the written export serves its golden vectors and its parity check (its files were hashed
        # just now, for the manifest): the folder's own two graphs, what C++, C# and onnxruntime-genai run.
        written = RuntimeOptions(provider="cpu", layout="split", integrity=IntegrityCheck(sha256=False))
        loaded = LoadedExport.load(staged.path, written) if reduced or options.check else None
        if reduced and loaded is not None:
            with stages.stage("golden vectors of the export"):
                manifest = _golden_from_export(loaded, manifest, source)
        if options.check and loaded is not None:
            with stages.stage("check parity"):
                steps = options.decode_check_steps
                prompts = _check_prompts(source, dims, steps)
                parity = _check_parity(loaded, source, prompts, steps, options.precision_name)
            if not parity.ok:
                raise ExportCheckError(f"the export does not match the source model: {parity.summary()}")
        del loaded  # its sessions map the weights file
        try:
            folder = staged.commit()
        except KeyboardInterrupt:  # delivered once the swap is done: the export is in place, complete and checked
            if not staged.committed:
                raise
            return ExportResult(staged.target, manifest, parity, dict(stages.timings), interrupted_after_commit=True)
    return ExportResult(folder, manifest, parity, dict(stages.timings))

"""From a checkpoint to prefill.onnx + decode.onnx + one shared weights file, checked structurally."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir

from gpt2_onnx_core import __version__
from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ExportError, first_line
from gpt2_onnx_core.names import EMBEDDING, GRAPH_FILES, GRAPHS, WEIGHTS_FILE, GraphKind, graph_inputs, graph_outputs
from gpt2_onnx_core.progress import Stages
from gpt2_onnx_exporters.simplify import simplify_graph
from gpt2_onnx_exporters.source import is_tied
from gpt2_onnx_exporters.trace import TraceCache, trace_graph
from gpt2_onnx_exporters.transforms import (
    check_io,
    check_opset,
    name_dimensions,
    set_min_ir_version,
    strip_metadata,
)
from gpt2_onnx_exporters.variants import GraphVariant, apply_variant, check_variant_tie, model_for_tracing
from gpt2_onnx_exporters.weights import WrittenWeights, externalize_shared_weights

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["ExportedGraphs", "export_graphs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExportedGraphs:
    """What :func:`export_graphs` wrote: file names per graph, the weights index and the IR version."""

    files: dict[GraphKind, str]
    weights: WrittenWeights
    ir_version: int
    tied_head: bool
    quantization: dict[str, int] | None = None  # int8/int4: bits, block size, MatMulNBits accuracy level


def _finalize(
    proto: onnx.ModelProto, kind: GraphKind, dims: ModelDims, all_logits: bool, export_id: str
) -> onnx.ModelProto:
    inputs = graph_inputs(kind, dims)
    outputs = graph_outputs(kind, dims, all_logits)
    proto = set_min_ir_version(name_dimensions(strip_metadata(proto), inputs, outputs))
    proto.producer_name, proto.producer_version = "gpt2-onnx", __version__
    del proto.metadata_props[:]
    for key, value in {"gpt2_onnx.graph": kind, "gpt2_onnx.export_id": export_id}.items():
        proto.metadata_props.add(key=key, value=value)
    check_io(proto, inputs, outputs, kind)
    return proto


def _check_structure(
    proto: onnx.ModelProto, kind: GraphKind, dims: ModelDims, opset: int, tied: bool, variant: GraphVariant
) -> None:
    check_opset(proto, opset, kind)
    check_variant_tie(proto, dims, tied, EMBEDDING, variant, kind)


def export_graphs(
    model: GPT2LMHeadModel,
    dims: ModelDims,
    folder: Path,
    *,
    opset: int,
    all_logits: bool,
    simplify: bool,
    export_id: str,
    stages: Stages,
    variant: GraphVariant | None = None,
    traces: TraceCache | None = None,
) -> ExportedGraphs:
    """Trace both graphs, write the shared weights file and both graphs into ``folder``, and check each graph.

    Checks: the I/O contract, the opset import, one tied [vocab × d] initializer read by Gather and Gemm(transB=1),
    and ``onnx.checker.check_model(full_check=True)``. ``traces``: graphs traced before for this model, reused.
    """
    variant = variant or GraphVariant()
    if simplify and not variant.plain:
        raise ExportError("--simplify runs on plain fp32 graphs only; drop it with --optimize or --precision")
    tied = is_tied(model)
    traceable = model_for_tracing(model, variant)
    traced: dict[GraphKind, ir.Model] = {}
    for kind in GRAPHS:
        with stages.stage(f"trace {kind}"):
            trace = traces.trace if traces is not None else trace_graph
            traced[kind] = trace(traceable, kind, dims, opset, all_logits)
    del traceable
    if not variant.plain:
        with stages.stage(f"{'optimize, ' if variant.optimize else ''}{variant.precision.name}"):
            apply_variant(traced, variant, EMBEDDING)
    with stages.stage("save weights"):
        weights = externalize_shared_weights(list(traced.values()), folder, WEIGHTS_FILE)
        protos = {
            kind: _finalize(ir.serde.serialize_model(m), kind, dims, all_logits, export_id)
            for kind, m in traced.items()
        }
        del traced
    for kind, proto in protos.items():
        _check_structure(proto, kind, dims, opset, tied, variant)  # before simplify too: the trace itself must be right
    if simplify:
        with stages.stage("simplify"):
            protos = {kind: simplify_graph(proto, folder, weights) for kind, proto in protos.items()}
    with stages.stage("save graphs"):
        for kind, proto in protos.items():
            _check_structure(proto, kind, dims, opset, tied, variant)
            onnx.save_model(proto, folder / GRAPH_FILES[kind])
    with stages.stage("check graphs"):
        for kind in GRAPHS:
            try:
                onnx.checker.check_model(str(folder / GRAPH_FILES[kind]), full_check=True)
            except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
                raise ExportError(f"{GRAPH_FILES[kind]} fails onnx.checker: {first_line(exc)}") from exc
    ir_version = next(iter(protos.values())).ir_version
    quantization = asdict(variant.quantization) if variant.quantization else None
    return ExportedGraphs(dict(GRAPH_FILES), weights, ir_version, tied, quantization)

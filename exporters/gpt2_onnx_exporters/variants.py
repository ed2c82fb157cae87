"""Graph variants beyond the plain fp32 trace: ``--optimize`` (ONNX Runtime fusions) and ``--precision``.

Each is an ir pass over the traced graphs, run before the weights are written, so any tensor it makes lands in the
one shared weights file; each keeps the tie and is followed by the structural checks of its kind:

    fp32, fp16        one [V × d] table (float32 or float16) read by the embedding Gather and the head Gemm(transB=1)
    int8, int4        one quantized table and one scales tensor, read by the embedding Gathers and MatMulNBits

fp16 is traced from a float16 copy of the model (see graph_module: inputs and outputs stay float32).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ExportError
from gpt2_onnx_core.names import CONTRIB_DOMAIN, GraphKind
from gpt2_onnx_core.precisions import FP32, Precision, Quantization
from gpt2_onnx_exporters.quantize_graph import QuantizedTables, quantize_weights
from gpt2_onnx_exporters.transforms import check_tied_head, head_initializers

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["GraphVariant", "apply_variant", "check_variant_tie", "model_for_tracing"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphVariant:
    """What to do to the traced graphs: fuse for ONNX Runtime, and at which precision to store the weights."""

    optimize: bool = False
    precision: Precision = FP32
    quantization: Quantization | None = None  # int8/int4: the precision's, or with another block size

    @property
    def plain(self) -> bool:
        return not self.optimize and self.precision.float32


def model_for_tracing(model: GPT2LMHeadModel, variant: GraphVariant) -> GPT2LMHeadModel:
    """The model to trace: itself, or a float16 copy (the tie is kept: deepcopy keeps shared parameters shared)."""
    if variant.precision.name != "float16":
        return model
    return copy.deepcopy(model).half().eval()


# --optimize is slower than the plain graph on the CPU provider (benchmarks/runtime_modes.sh and op_profile.py;
# figures in docs/performance.md): the CPU MultiHeadAttention and SkipLayerNormalization kernels are slower than what
# ONNX Runtime makes of the plain graph itself (FusedMatMul, FastGelu). Kept for CUDA, where fused attention kernels
# are the point; not measured there (no GPU was available). Measured again one fusion at a time (GPT-2-small, 128-token
# prefill, ONNX Runtime 1.31.1, AMD EPYC): SkipLayerNormalization alone takes 13.3 ms of kernel time where the Adds and
# LayerNormalizations it replaces took about 3 ms, and the prefill is no faster (1.00×, paired). Nothing but MatMul
# matters much there: the projections are 93 % of the fp32 prefill's kernel time, the head's Gemm 4-5 %, every other
# operator together under 3 %, so no fusion can bring the exact fp32 prefill down by more than that.
def _fuse(model: ir.Model) -> dict[str, int]:
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    _, counts = optimize_for_ort(model)  # in place
    return {name: count for name, count in counts.items() if count}


def apply_variant(
    traced: Mapping[GraphKind, ir.Model], variant: GraphVariant, embedding: str
) -> dict[GraphKind, dict[str, int]]:
    """Run the variant's passes over every traced graph, in place; returns what each pass changed, per graph."""
    done: dict[GraphKind, dict[str, int]] = {kind: {} for kind in traced}
    if variant.optimize:
        for kind, model in traced.items():
            done[kind].update(_fuse(model))
            if not done[kind]:
                raise ExportError(f"--optimize fused nothing in the {kind} graph")
    settings = variant.quantization
    if settings is not None:
        tables = QuantizedTables(settings)  # both graphs get the very same quantized tensors
        for kind, model in traced.items():
            done[kind].update(quantize_weights(model, tables, embedding))
    for kind, counts in done.items():
        log.info("%s: %s", kind, counts)
    return done


def check_variant_tie(
    proto: onnx.ModelProto, dims: ModelDims, tied: bool, embedding: str, variant: GraphVariant, what: str
) -> None:
    """The tie check of the variant's kind (see the module docstring)."""
    if variant.quantization is None:
        check_tied_head(proto, dims, tied, embedding, what)
        return
    bits = variant.quantization.bits
    table, scales = f"{embedding}.int{bits}", f"{embedding}.scales"
    floats = head_initializers(proto, dims)
    if floats:
        raise ExportError(f"{what}: float [vocab × d] initializers {floats} remain beside the quantized table")
    for name in (table, scales):
        readers = {(n.domain, n.op_type) for n in proto.graph.node if name in n.input}
        heads = {("", "Gather"), (CONTRIB_DOMAIN, "MatMulNBits")} if tied else {("", "Gather")}
        if not heads <= readers:
            raise ExportError(
                f"{what}: the quantized table '{name}' is read by {sorted(readers)}, not the embedding and the head"
            )
    names = {t.name for t in proto.graph.initializer}
    if table not in names or scales not in names:
        raise ExportError(f"{what}: the quantized table '{table}' or its scales are missing")

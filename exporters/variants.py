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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import onnx
import onnx_ir as ir

from exporters.quantize_graph import CONTRIB_DOMAIN, QuantizedTables, QuantSettings, quantize_weights
from exporters.transforms import check_tied_head, head_initializers
from gpt2_onnx.config import ModelDims
from gpt2_onnx.errors import ExportError
from gpt2_onnx.names import GraphKind

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = ["QUANTIZATION", "GraphVariant", "apply_variant", "check_variant_tie", "model_for_tracing"]

log = logging.getLogger(__name__)

# Per precision, the default MatMulNBits settings. Accuracy level 4 lets ONNX Runtime quantize activations to int8
# for its VNNI/AMX kernels. Measured on GPT-2-small (seeded random weights, 2 threads, decode after 128 tokens):
#   int4 block 32: decode 8.4 ms, max KL 0.016   block 64: 7.6 ms, 0.018   block 128: 7.0 ms, 0.023
#   int8 block 128: decode 9.2 ms, max KL 1.4e-4   block 32: 10.7 ms, 8.6e-5
# int4 keeps block 32 (quality first: GPT-2-small is small enough to feel int4); --block-size 128 trades for speed.
QUANTIZATION: dict[str, QuantSettings] = {
    "int8": QuantSettings(bits=8, block_size=128, accuracy_level=4),
    "int4": QuantSettings(bits=4, block_size=32, accuracy_level=4),
}


@dataclass(frozen=True)
class GraphVariant:
    """What to do to the traced graphs: fuse for ONNX Runtime, and at which precision to store the weights."""

    optimize: bool = False
    precision: str = "float32"  # the manifest's name: float32, float16, int8, int4
    block_size: int | None = None  # int8/int4: overrides the precision's default block size

    @property
    def quantization(self) -> QuantSettings | None:
        settings = QUANTIZATION.get(self.precision)
        if settings is None or self.block_size is None:
            return settings
        return replace(settings, block_size=self.block_size)

    @property
    def plain(self) -> bool:
        return not self.optimize and self.precision == "float32"


def model_for_tracing(model: GPT2LMHeadModel, variant: GraphVariant) -> GPT2LMHeadModel:
    """The model to trace: itself, or a float16 copy (the tie is kept: deepcopy keeps shared parameters shared)."""
    if variant.precision != "float16":
        return model
    return copy.deepcopy(model).half().eval()


# --optimize measured on the CPU provider (GPT-2-small, 2 threads, one interleaved run): decode 27.1 vs 23.9 ms,
# prefill of 128 tokens 168 vs 141 ms unfused; with int4, decode 10.3 vs 8.9 ms. The CPU MultiHeadAttention kernel
# is slower than what ONNX Runtime makes of the plain graph itself (FusedMatMul, FastGelu). Kept for CUDA, where
# fused attention kernels are the point; not measured there (no GPU was available).
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

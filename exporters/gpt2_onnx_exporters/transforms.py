"""Pure graph transforms and structural checks: ModelProto in, ModelProto out (or an error).

They run on graphs whose weights are external, so the protos stay small whatever the model size.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import onnx
from onnx import helper

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ExportError
from gpt2_onnx_core.names import TensorSpec

__all__ = [
    "check_io",
    "check_opset",
    "check_tied_head",
    "head_initializers",
    "name_dimensions",
    "set_min_ir_version",
    "strip_metadata",
]

log = logging.getLogger(__name__)

_ELEM_TYPES = {
    "int64": onnx.TensorProto.INT64,
    "float32": onnx.TensorProto.FLOAT,
    "float16": onnx.TensorProto.FLOAT16,
}


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def set_min_ir_version(model: onnx.ModelProto) -> onnx.ModelProto:
    """Lower the IR version to the lowest the opset imports allow (opset 17 → IR 8), so older runtimes load it.

    torch.onnx writes IR 10 whatever the opset; ONNX Runtime before 1.18 refuses IR 10.
    """
    out = _copy(model)
    out.ir_version = helper.find_min_ir_version_for(list(out.opset_import), ignore_unknown=True)
    return out


def strip_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop per-node metadata (an IR 10 field torch.onnx fills with tracing details), doc strings and value_info.

    The intermediate value_info carries torch's symbolic sizes (``s43``); ONNX Runtime infers shapes itself.
    """
    out = _copy(model)
    out.doc_string = ""
    out.graph.doc_string = ""
    del out.graph.value_info[:]
    for node in out.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    return out


def name_dimensions(
    model: onnx.ModelProto, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> onnx.ModelProto:
    """Set every graph input's and output's shape from the I/O contract (names for dynamic axes)."""
    out = _copy(model)
    for values, specs in ((out.graph.input, inputs), (out.graph.output, outputs)):
        by_name = {spec.name: spec for spec in specs}
        for value in values:
            spec = by_name[value.name]
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for dim in spec.dims:
                entry = shape.dim.add()
                if isinstance(dim, int):
                    entry.dim_value = dim
                else:
                    entry.dim_param = dim
    return out


def check_io(model: onnx.ModelProto, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], what: str) -> None:
    """Raise unless the graph's inputs and outputs are exactly the contract's, in order, with its dtypes."""
    for label, values, specs in (
        ("inputs", model.graph.input, inputs),
        ("outputs", model.graph.output, outputs),
    ):
        got = [(v.name, v.type.tensor_type.elem_type) for v in values]
        want = [(s.name, _ELEM_TYPES[s.dtype]) for s in specs]
        if got != want:
            raise ExportError(f"{what}: graph {label} {got[:4]}… differ from the contract {want[:4]}…")


def check_opset(model: onnx.ModelProto, opset: int, what: str) -> None:
    """Raise unless the default-domain opset import is exactly ``opset``."""
    found = [entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")]
    if found != [opset]:
        raise ExportError(f"{what}: ai.onnx opset import is {found}, not [{opset}]")


def head_initializers(model: onnx.ModelProto, dims: ModelDims) -> list[str]:
    """Names of every initializer shaped like the embedding or its transpose ([V, d] or [d, V])."""
    shapes = {(dims.vocab_size, dims.n_embd), (dims.n_embd, dims.vocab_size)}
    return [init.name for init in model.graph.initializer if tuple(init.dims) in shapes]


def check_tied_head(model: onnx.ModelProto, dims: ModelDims, tied: bool, embedding: str, what: str) -> None:
    """Raise unless the LM head reads the embedding initializer itself through Gemm(transB=1).

    Tied: exactly one [V, d] initializer, used by both the embedding Gather and the head Gemm. Untied: the
    embedding plus one head, and still no transposed [d, V] copy.
    """
    found = head_initializers(model, dims)
    expected = 1 if tied else 2
    transposed = [name for name in found if tuple(_dims_of(model, name)) == (dims.n_embd, dims.vocab_size)]
    if len(found) != expected or transposed:
        raise ExportError(
            f"{what}: expected {expected} [vocab × d] initializer(s), found {found} (transposed: {transposed})"
        )
    gemms = [
        node for node in model.graph.node if node.op_type == "Gemm" and len(node.input) > 1 and node.input[1] in found
    ]
    head_ok = any(helper.get_node_attr_value(node, "transB") == 1 for node in gemms if _has_attr(node, "transB"))
    if not head_ok:
        raise ExportError(f"{what}: the LM head is not a Gemm(transB=1) over {found}")
    if tied:
        readers = {node.op_type for node in model.graph.node if embedding in node.input}
        if readers != {"Gather", "Gemm"}:
            raise ExportError(
                f"{what}: the tied embedding '{embedding}' is read by {sorted(readers)}, not Gather and Gemm"
            )


def _dims_of(model: onnx.ModelProto, name: str) -> list[int]:
    return next(list(init.dims) for init in model.graph.initializer if init.name == name)


def _has_attr(node: onnx.NodeProto, name: str) -> bool:
    return any(attr.name == name for attr in node.attribute)

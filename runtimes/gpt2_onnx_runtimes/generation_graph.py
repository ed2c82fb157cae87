"""The generation graph: one graph, built at load time from ``decode.onnx``, that serves both prefill and decode.

Why: two ONNX Runtime sessions (prefill and decode) each prepack their own copy of the weights and each keep a
pool of intra-op threads that spin after a run, taking a core from the other session's next run. One session over
one graph holds the packed weights once and has one thread pool. ``decode.onnx`` already accepts an empty past, so
it computes prefill too; what it lacks for generation is prefill's economy at the head, so two pure transforms
make it the generation graph (the files on disk and their I/O contract are left as they are):

    decode.onnx ... ─ LayerNorm(ln_f) ─ Reshape ─ Gemm(wte, transB=1) ─ Reshape ─ logits (B, T, V)
    generation  ... ─ LayerNorm(ln_f) ─ Slice(last position) ─ Reshape ─ Gemm ─ Unsqueeze(1) ─ logits (B, 1, V)

1. :func:`last_position_logits`: the head multiplies only the last position (left padding puts every row's last
   real token there), so a 128-token prompt costs one row of the head, not 128.
2. :func:`initializer_as_input`: the tied embedding becomes a graph input that the runtime binds on every run to
   one read-only map of the weights file. ONNX Runtime then cannot prepack it for the head's Gemm, which would keep
   a packed copy beside the table the embedding's Gather reads: the largest matrix twice. The head's single-row
   products read the table as stored about as fast as packed ones would: both stream it once per step.

Both are ModelProto in, ModelProto out; the input is not modified.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import LOGITS

__all__ = ["initializer_as_input", "last_position_logits"]

# Ops between the final LayerNorm and the logits output in our graphs: the head's Gemm (MatMulNBits when quantized;
# MatMul when traced otherwise), an untied head's bias Add, the Reshapes around it and fp16's Cast to float32.
_HEAD_CHAIN = frozenset({"Reshape", "Cast", "Gemm", "MatMul", "MatMulNBits", "Add"})
_NORMS = frozenset({"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization"})
_PREFIX = "/generation/last_position"  # node and initializer names of what the transform adds


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {output: node for node in graph.node for output in node.output}


def _head_chain(graph: onnx.GraphProto, what: str) -> tuple[onnx.NodeProto, list[onnx.NodeProto]]:
    """The final norm and the nodes from it to ``logits`` (logits' producer first), following first inputs."""
    producers = _producers(graph)
    node = producers.get(LOGITS)
    chain: list[onnx.NodeProto] = []
    while node is not None and node.op_type not in _NORMS:
        if node.op_type not in _HEAD_CHAIN or len(chain) > 8:
            raise ManifestError(f"{what}: unexpected {node.op_type} node between the final LayerNorm and logits")
        chain.append(node)
        node = producers.get(node.input[0])
    if node is None:
        raise ManifestError(f"{what}: no LayerNormalization found before the logits output")
    return node, chain


def last_position_logits(model: onnx.ModelProto, what: str = "decode.onnx") -> onnx.ModelProto:
    """``model`` with logits (B, 1, V) of the last position only: the head runs on (B, d), not (B·T, d).

    Raises :class:`ManifestError` when the graph is not shaped as this tool exports it.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    norm, chain = _head_chain(graph, what)
    reshapes = [node for node in chain if node.op_type == "Reshape"]
    if not reshapes:
        raise ManifestError(f"{what}: the logits are not reshaped to (batch, sequence, vocab) after the head")
    hidden = norm.output[0]  # (B, T, d)
    last = f"{hidden}{_PREFIX}"
    consts = {"starts": [-1], "ends": [2**63 - 1], "axes": [1]}  # Slice(hidden, -1:, axis 1)
    names = {key: f"{_PREFIX}/{key}" for key in consts}
    graph.initializer.extend(
        numpy_helper.from_array(np.array(values, dtype=np.int64), names[key]) for key, values in consts.items()
    )
    for node in chain:
        node.input[:] = [last if name == hidden else name for name in node.input]
    final = reshapes[0]  # the one nearest the output: (B·T, V) → (B, T, V) becomes (B, V) → (B, 1, V)
    final.op_type = "Unsqueeze"
    final.input[:] = [final.input[0], names["axes"]]
    del final.attribute[:]
    index = list(graph.node).index(norm) + 1
    slice_node = helper.make_node(
        "Slice", [hidden, names["starts"], names["ends"], names["axes"]], [last], name=f"{_PREFIX}/Slice"
    )  # (B, T, d) → (B, 1, d)
    graph.node.insert(index, slice_node)
    logits = next(value for value in graph.output if value.name == LOGITS)
    position_dim = logits.type.tensor_type.shape.dim[1]
    position_dim.Clear()
    position_dim.dim_value = 1
    return out


def initializer_as_input(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """``model`` with initializer ``name`` turned into a graph input of the same type and shape."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    tensor = next((t for t in graph.initializer if t.name == name), None)
    if tensor is None:
        raise ManifestError(f"the graph has no initializer '{name}'")
    graph.input.append(helper.make_tensor_value_info(name, tensor.data_type, list(tensor.dims)))
    graph.initializer.remove(tensor)
    return out

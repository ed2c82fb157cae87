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
   a packed copy beside the table the embedding's Gather reads: the largest matrix twice.
3. :func:`last_layer_at_last_position`: past the last layer's attention no position reads another, and only the
   last position's logits are output, so the last layer's output projection, MLP and norms run on that position
   alone (the attention itself keeps every position: they are the cache's keys and values). On GPT-2-small that is
   three quarters of a layer's projections, ~6 % of a 128-token prompt's multiplications.
4. :func:`single_row_head`: a batch of one row multiplies a transposed copy of the tied table, (d, V), which
   the runtime makes once at load (:meth:`~gpt2_onnx_runtimes.shared_weights.SharedWeights.transposed`), instead of
   the table itself: ``If(rows == 1, MatMul(x, tableᵀ), Gemm(x, table, transB=1))``. For one row MLAS has a kernel
   per layout: over (d, V) it streams the rows of the matrix into the whole output row, over (V, d) it takes
   50,257 dot products of 768, which costs more than the memory it reads. GPT-2-small, 2 threads (AMD EPYC):
   the head's product took 4.2-5.1 ms against 5.5-6.7 ms, of a decode step's ~18 ms. For more rows the
   transposed product is the slower one (MLAS packs the whole matrix per call): 12-24 ms against 8-15 ms at 2-16
   rows, so batches keep the Gemm.

All are ModelProto in, ModelProto out; the input is not modified.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import LOGITS
from gpt2_onnx_runtimes.attention_pattern import GraphIndex, InPlaceRefused, find_attention

__all__ = [
    "TRANSPOSED_TABLE",
    "initializer_as_input",
    "last_layer_at_last_position",
    "last_position_logits",
    "single_row_head",
]

# Ops between the final LayerNorm and the logits output in our graphs: the head's Gemm (MatMulNBits when quantized;
# MatMul when traced otherwise), an untied head's bias Add, the Reshapes around it and fp16's Cast to float32.
_HEAD_CHAIN = frozenset({"Reshape", "Cast", "Gemm", "MatMul", "MatMulNBits", "Add"})
_NORMS = frozenset({"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization"})
_PREFIX = "/generation/last_position"  # node and initializer names of what the transform adds
_HEAD = "/generation/single_row_head"  # the same, for single_row_head
TRANSPOSED_TABLE = f"{_HEAD}/table_t"  # the graph input single_row_head adds: the tied table transposed, (d, V)


def _head_chain(graph: onnx.GraphProto, what: str) -> tuple[onnx.NodeProto, list[onnx.NodeProto]]:
    """The final norm and the nodes from it to ``logits`` (logits' producer first), following first inputs."""
    producers = GraphIndex(graph, what).producer
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


def _between(g: GraphIndex, source: str, target: str) -> list[onnx.NodeProto]:
    """The nodes on a path from tensor ``source`` to tensor ``target`` (``target``'s producer included), in graph
    order."""
    after: set[str] = set()  # first outputs of the nodes that read source, directly or not
    names, seen = [source], {source}
    while names:
        for reader in g.consumers.get(names.pop(), []):
            if reader.output[0] not in after:
                after.add(reader.output[0])
                fresh = [name for name in reader.output if name not in seen]
                seen.update(fresh)
                names.extend(fresh)
    before: set[str] = set()  # first outputs of the nodes that target reads, directly or not
    pending = [target]
    while pending:
        node = g.producer.get(pending.pop())
        if node is not None and node.output[0] not in before:
            before.add(node.output[0])
            pending.extend(name for name in node.input if name)
    return [node for node in g.graph.node if node.output[0] in after and node.output[0] in before]


def last_layer_at_last_position(
    model: onnx.ModelProto, dims: ModelDims, what: str = "decode.onnx"
) -> onnx.ModelProto | None:
    """``model``, made by :func:`last_position_logits`, whose last layer takes the last position only from its
    attention's output on: that output and the residual stream are sliced to (B, 1, d) where the output projection
    and the residual Add read them, so the projection, the MLP and the norms after them run on one position.

    None (the model as it is does the same work) where the last layer's attention is not found, or where the nodes
    between it and the final norm read any activation besides the attention's output and one residual tensor, or
    any of their tensors is read elsewhere.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    g = GraphIndex(graph, what)
    final_slice = next((node for node in graph.node if node.name == f"{_PREFIX}/Slice"), None)
    if final_slice is None:
        raise ManifestError(f"{what}: the logits are not the last position's (last_position_logits comes first)")
    try:
        attention = find_attention(g, dims.n_layer - 1, dims.head_dim).output  # (B, S, d)
    except InPlaceRefused:
        return None
    region = _between(g, attention, final_slice.input[0])
    made = {name for node in region for name in node.output}
    outside = {
        name
        for node in region
        for name in node.input
        if name and name != attention and name not in made and not g.is_constant(name)
    }
    readers = {node.output[0] for node in region} | {final_slice.output[0]}  # nodes by their first output
    read_elsewhere = any(consumer.output[0] not in readers for name in made for consumer in g.consumers.get(name, []))
    outputs = {value.name for value in graph.output}
    if not region or len(outside) != 1 or read_elsewhere or made & outputs:
        return None
    sliced = {name: f"{name}{_PREFIX}" for name in (attention, *outside)}
    for node in region:
        node.input[:] = [sliced.get(name, name) for name in node.input]
    index = list(graph.node).index(region[0])
    bounds = [f"{_PREFIX}/{key}" for key in ("starts", "ends", "axes")]  # last_position_logits' Slice's
    for name, last in sliced.items():  # (B, S, d) → (B, 1, d); both exist before the region's first node
        graph.node.insert(index, helper.make_node("Slice", [name, *bounds], [last], name=f"{_PREFIX}/{name}/Slice"))
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


def _tied_head(graph: onnx.GraphProto, table: str) -> onnx.NodeProto | None:
    """The head's Gemm(x, ``table``, transB=1) without bias, alpha 1 or transA, where the graph has one."""
    for node in graph.node:
        if node.op_type == "Gemm" and len(node.input) == 2 and node.input[1] == table:
            attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if attributes.get("transB") == 1 and not attributes.get("transA") and attributes.get("alpha", 1.0) == 1.0:
                return node
    return None


def single_row_head(model: onnx.ModelProto, table: str) -> onnx.ModelProto | None:
    """``model`` whose head Gemm(x, ``table``, transB=1) multiplies a batch of one row by the new graph input
    :data:`TRANSPOSED_TABLE` (d, V) instead, and larger batches by ``table`` as before; None where the graph has
    no such Gemm (an untied head, whose weight ONNX Runtime prepacks)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    head = _tied_head(graph, table)
    source = next((value for value in graph.input if value.name == table), None)
    if head is None or source is None:
        return None
    dims = [d.dim_value for d in source.type.tensor_type.shape.dim]  # (V, d)
    element = source.type.tensor_type.elem_type
    x, logits = head.input[0], head.output[0]  # (B, d), (B, V)
    names = {key: f"{_HEAD}/{key}" for key in ("shape", "zero", "one", "rows", "single", "then", "else")}
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, dtype=np.int64), names["zero"]),
            numpy_helper.from_array(np.array(1, dtype=np.int64), names["one"]),
        ]
    )
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", [x, TRANSPOSED_TABLE], [names["then"]], name=f"{_HEAD}/MatMul")],
        "single_row",
        [],
        [helper.make_tensor_value_info(names["then"], element, None)],
    )  # (1, d) · (d, V) → (1, V)
    batched = onnx.NodeProto()
    batched.CopyFrom(head)
    batched.output[:] = [names["else"]]
    else_branch = helper.make_graph(
        [batched], "rows", [], [helper.make_tensor_value_info(names["else"], element, None)]
    )  # (B, d) · (V, d)ᵀ → (B, V)
    nodes = [
        helper.make_node("Shape", [x], [names["shape"]], name=f"{_HEAD}/Shape"),  # (2,)
        helper.make_node("Gather", [names["shape"], names["zero"]], [names["rows"]], name=f"{_HEAD}/Rows"),  # ()
        helper.make_node("Equal", [names["rows"], names["one"]], [names["single"]], name=f"{_HEAD}/Single"),  # ()
        helper.make_node(
            "If", [names["single"]], [logits], name=f"{_HEAD}/If", then_branch=then_branch, else_branch=else_branch
        ),
    ]
    index = list(graph.node).index(head)
    graph.node.remove(head)
    for offset, node in enumerate(nodes):
        graph.node.insert(index + offset, node)
    graph.input.append(helper.make_tensor_value_info(TRANSPOSED_TABLE, element, [dims[1], dims[0]]))
    return out

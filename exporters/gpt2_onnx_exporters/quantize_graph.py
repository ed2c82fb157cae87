"""Weight-only quantization of a traced graph for the CPU: ``--precision int8|int4``.

An ir pass (it changes the model in place, like onnx_ir's own passes) run before the weights are written:

    MatMul(x, W[K, N])             →  MatMulNBits(x, Wq, Ws)             Wq: blocks of Wᵀ, (N, K/b, b·bits/8)
                                   or DynamicQuantizeMatMul(x, Wq, Ws)   kernel "dynamic": Wq int8 (K, N), Ws (N,)
    Gemm(h, wte[V, d], transB=1)   →  MatMulNBits(h, wte.q, wte.scales)  the tied head: wte already is (N, K)
    Gather(wte, ids)               →  Gather(wte.q, ids) ─ unpack ─ Cast ─ Sub(z) ─ Mul(Gather(wte.scales, ids))

The tie survives: one quantized table and one scales tensor, read by the embedding's Gathers and the head's
MatMulNBits. (``GatherBlockQuantized`` cannot share them: it needs scales of the table's rank, which
``MatMulNBits`` refuses.) Only the gathered rows are dequantized, (B, T, d) per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from gpt2_onnx_core.block_quant import quantize_blocks, quantize_columns
from gpt2_onnx_core.errors import ExportError
from gpt2_onnx_core.names import CONTRIB_DOMAIN
from gpt2_onnx_core.precisions import Quantization

__all__ = ["QuantizedTable", "QuantizedTables", "quantize_weights"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QuantizedTable:
    """One weight, quantized: its initializers' tensors and the block size they were cut with."""

    packed: ir.TensorProtocol  # uint8 (N, K / block, block · bits / 8)
    scales: ir.TensorProtocol  # float32 (N, K / block)
    block_size: int


class QuantizedTables:
    """Quantized weights by source name, shared by the graphs of one export: both get the very same tensors."""

    def __init__(self, settings: Quantization) -> None:
        self.settings = settings
        self._tables: dict[str, QuantizedTable] = {}
        self._columns: dict[str, tuple[ir.TensorProtocol, ir.TensorProtocol]] = {}

    def get(self, name: str, weight_nk: np.ndarray) -> QuantizedTable:
        """``weight_nk`` (N, K) quantized along K, once per name."""
        if name not in self._tables:
            s = self.settings
            quantized = quantize_blocks(weight_nk, s.bits, s.block_for(weight_nk.shape[1]))
            self._tables[name] = QuantizedTable(
                ir.tensor(quantized.packed, name=f"{name}.int{s.bits}"),
                ir.tensor(quantized.scales, name=f"{name}.scales"),
                quantized.block_size,
            )
        table = self._tables[name]
        if tuple(table.scales.shape) != (weight_nk.shape[0], weight_nk.shape[1] // table.block_size):
            raise ExportError(f"weight '{name}' is read both as (K, N) and as (N, K); cannot quantize it once")
        return table

    def columns(self, name: str, weight_kn: np.ndarray) -> tuple[ir.TensorProtocol, ir.TensorProtocol]:
        """``weight_kn`` (K, N) as int8 with a scale per column (kernel "dynamic"), once per name."""
        if name not in self._columns:
            quantized = quantize_columns(weight_kn)
            self._columns[name] = (
                ir.tensor(quantized.values, name=f"{name}.int8"),
                ir.tensor(quantized.scales, name=f"{name}.scales"),
            )
        return self._columns[name]


def _initializer(graph: ir.Graph, tensor: ir.TensorProtocol) -> ir.Value:
    name = tensor.name or ""
    if name in graph.initializers:
        return graph.initializers[name]
    value = ir.Value(
        name=name, shape=ir.Shape(tensor.shape.numpy()), type=ir.TensorType(tensor.dtype), const_value=tensor
    )
    graph.register_initializer(value)
    return value


def _const(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    return _initializer(graph, ir.tensor(array, name=name))


def _weight(value: ir.Value | None) -> tuple[str, np.ndarray] | None:
    """A float32 2-D initializer's name and values, or None if ``value`` is anything else."""
    if value is None or not value.is_initializer() or value.const_value is None:
        return None
    tensor = value.const_value
    if tensor.dtype != ir.DataType.FLOAT or len(tensor.shape) != 2:
        return None
    return value.name or "", tensor.numpy()


def _replace(graph: ir.Graph, old: ir.Node, new_nodes: list[ir.Node]) -> None:
    """Put ``new_nodes`` where ``old`` was; the last new node's output takes over ``old``'s output."""
    ir.convenience.replace_nodes_and_values(graph, old, [old], new_nodes, list(old.outputs), [new_nodes[-1].outputs[0]])


def _matmul_nbits(
    graph: ir.Graph, x: ir.Value, table: QuantizedTable, n: int, k: int, bits: int, level: int
) -> ir.Node:
    packed, scales = _initializer(graph, table.packed), _initializer(graph, table.scales)
    attributes = {"K": k, "N": n, "bits": bits, "block_size": table.block_size, "accuracy_level": level}
    return ir.node("MatMulNBits", [x, packed, scales], attributes, domain=CONTRIB_DOMAIN)


def _quantize_matmul(graph: ir.Graph, node: ir.Node, tables: QuantizedTables) -> bool:
    found = _weight(node.inputs[1])
    if found is None or node.inputs[0] is None:
        return False
    name, weight = found  # (K, N): Conv1D stores (in, out)
    s = tables.settings
    if s.kernel == "dynamic":
        values, scales = (_initializer(graph, tensor) for tensor in tables.columns(name, weight))
        _replace(
            graph, node, [ir.node("DynamicQuantizeMatMul", [node.inputs[0], values, scales], domain=CONTRIB_DOMAIN)]
        )
        return True
    table = tables.get(name, np.ascontiguousarray(weight.T))  # (N, K): blocks along K
    _replace(
        graph,
        node,
        [_matmul_nbits(graph, node.inputs[0], table, weight.shape[1], weight.shape[0], s.bits, s.accuracy_level)],
    )
    return True


def _quantize_head(graph: ir.Graph, node: ir.Node, tables: QuantizedTables) -> bool:
    """Gemm(h (M, d), W (V, d), transB=1), no bias → MatMulNBits over the same (V, d) table."""
    attrs = {name: attr.value for name, attr in node.attributes.items()}
    plain = attrs.get("transA", 0) == 0 and attrs.get("transB", 0) == 1 and attrs.get("alpha", 1.0) == 1.0
    found = _weight(node.inputs[1])
    if not plain or found is None or len(node.inputs) > 2 or node.inputs[0] is None:
        return False
    name, weight = found
    table = tables.get(name, weight)  # (V, d) already is (N, K)
    s = tables.settings
    _replace(
        graph,
        node,
        [_matmul_nbits(graph, node.inputs[0], table, weight.shape[0], weight.shape[1], s.bits, s.accuracy_level)],
    )
    return True


def _dequantized_rows(graph: ir.Graph, ids: ir.Value, table: QuantizedTable, bits: int, dim: int) -> list[ir.Node]:
    """Nodes computing the rows ``ids`` (B, T) of ``table`` as float32 (B, T, d); the last node's output is it.

    ids ─ Gather(q) ─ Cast(int32) ┬ Mod 16 ─ Unsqueeze ┬ Concat ─ Reshape ─ Cast ─ Sub z ─ Mul ─ Reshape
                                  └ Div 16 ─ Unsqueeze ┘      (4 bits only)              │
    ids ─ Gather(scales) ─ Unsqueeze ────────────────────────────────────────────────────┘
    """
    block = table.block_size
    last = _const(graph, "quantized_embedding.last_axis", np.array([-1], dtype=np.int64))
    rows = ir.node("Gather", [_initializer(graph, table.packed), ids], {"axis": 0})  # (B, T, d/b, b·bits/8) uint8
    nodes = [rows]
    if bits == 4:
        sixteen = _const(graph, "quantized_embedding.sixteen", np.array(16, dtype=np.int32))
        wide = ir.node("Cast", [rows.outputs[0]], {"to": ir.DataType.INT32})
        low = ir.node("Mod", [wide.outputs[0], sixteen])  # the first value of each byte
        high = ir.node("Div", [wide.outputs[0], sixteen])
        low_u, high_u = (ir.node("Unsqueeze", [n.outputs[0], last]) for n in (low, high))
        pairs = ir.node("Concat", [low_u.outputs[0], high_u.outputs[0]], {"axis": -1})  # (B, T, d/b, b/2, 2)
        shape = _const(graph, f"quantized_embedding.blocks{block}", np.array([0, 0, dim // block, block], np.int64))
        nodes += [wide, low, high, low_u, high_u, pairs, ir.node("Reshape", [pairs.outputs[0], shape])]
    as_float = ir.node("Cast", [nodes[-1].outputs[0]], {"to": ir.DataType.FLOAT})  # (B, T, d/b, b)
    zero = _const(graph, f"quantized_embedding.zero_point{bits}", np.array(1 << (bits - 1), dtype=np.float32))
    centered = ir.node("Sub", [as_float.outputs[0], zero])
    row_scales = ir.node("Gather", [_initializer(graph, table.scales), ids], {"axis": 0})  # (B, T, d/b)
    scales_u = ir.node("Unsqueeze", [row_scales.outputs[0], last])  # (B, T, d/b, 1)
    scaled = ir.node("Mul", [centered.outputs[0], scales_u.outputs[0]])  # (B, T, d/b, b)
    row_shape = _const(graph, "quantized_embedding.row_shape", np.array([0, 0, dim], dtype=np.int64))
    return [
        *nodes,
        as_float,
        centered,
        row_scales,
        scales_u,
        scaled,
        ir.node("Reshape", [scaled.outputs[0], row_shape]),
    ]


def _quantize_embedding(graph: ir.Graph, node: ir.Node, tables: QuantizedTables) -> bool:
    """Gather(table (V, d), ids (B, T)) on axis 0 → the same rows of the quantized table, dequantized."""
    found = _weight(node.inputs[0])
    axis = node.attributes["axis"].value if "axis" in node.attributes else 0
    ids = node.inputs[1]
    if found is None or axis != 0 or ids is None:
        return False
    name, weight = found
    if ids.shape is None or len(ids.shape) != 2:
        raise ExportError(f"the embedding Gather takes ids of shape {ids.shape}, expected (batch, sequence)")
    table = tables.get(name, weight)
    _replace(graph, node, _dequantized_rows(graph, ids, table, tables.settings.bits, weight.shape[1]))
    return True


def quantize_weights(model: ir.Model, tables: QuantizedTables, embedding: str) -> dict[str, int]:
    """Quantize ``model`` in place: every MatMul over a constant 2-D weight, the LM head, and the embedding
    lookups of the table ``embedding``. Returns how many nodes of each kind changed; unused float weights go."""
    graph = model.graph
    counts = {"matmul": 0, "head": 0, "embedding": 0}
    for node in list(graph):
        if node.domain != "":
            continue
        if node.op_type == "MatMul":
            counts["matmul"] += _quantize_matmul(graph, node, tables)
        elif node.op_type == "Gemm":
            counts["head"] += _quantize_head(graph, node, tables)
        elif node.op_type == "Gather" and node.inputs[0] is not None and node.inputs[0].name == embedding:
            counts["embedding"] += _quantize_embedding(graph, node, tables)
    for name, value in list(graph.initializers.items()):
        if not value.uses() and not value.is_graph_output():
            del graph.initializers[name]
    model.opset_imports.setdefault(CONTRIB_DOMAIN, 1)
    log.info("quantized to %d bits: %s", tables.settings.bits, counts)
    return counts

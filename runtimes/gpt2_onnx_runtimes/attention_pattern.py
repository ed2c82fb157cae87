"""Finding each layer's attention in a graph this tool exported, for :mod:`gpt2_onnx_runtimes.inplace_attention`
to rewrite: the tensors its GroupQueryAttention takes (the query, the new keys and values, the mask bias, the scale)
and the nodes it replaces, in decode.onnx's plain attention or ``--optimize``'s MultiHeadAttention; and whether the
query, keys and values are three Slices of one packed projection. A graph shaped otherwise is refused
(:class:`InPlaceRefused`, the reason in its message). Nothing here changes a graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import CONTRIB_DOMAIN, KvKind, past_name, present_name

__all__ = ["Attention", "GraphIndex", "InPlaceRefused", "find_attention", "packed_qkv"]


class InPlaceRefused(ManifestError):
    """The graph's attention cannot be rewritten to write the cache in place (the reason is the message)."""


@dataclass(frozen=True)
class Attention:
    """One layer's attention as decode.onnx computes it: what GroupQueryAttention takes and what it replaces."""

    query: str  # (B, S, d)
    key: str  # (B, S, d), before the heads are split
    value: str  # (B, S, d)
    bias: str  # (B, 1, S, W): 0 where attended, the float32 minimum elsewhere
    output: str  # (B, S, d): what the output projection reads
    scale: float
    replaced: tuple[onnx.NodeProto, ...]  # the nodes producing output and the presents


class GraphIndex:
    """Lookups over a graph: producers and consumers by tensor name, constants by name."""

    def __init__(self, graph: onnx.GraphProto, what: str) -> None:
        self.graph, self.what = graph, what
        self.producer = {name: node for node in graph.node for name in node.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        self.initializers = {tensor.name: tensor for tensor in graph.initializer}

    def refuse(self, layer: int, why: str) -> InPlaceRefused:
        return InPlaceRefused(f"{self.what}: layer {layer}'s attention cannot write the cache in place: {why}")

    def made_by(self, name: str, op: str, layer: int) -> onnx.NodeProto:
        node = self.producer.get(name)
        if node is None or node.op_type != op:
            found = "a graph input" if node is None else f"a {node.op_type} node"
            raise self.refuse(layer, f"'{name}' comes from {found}, not {op}")
        return node

    def consumer(self, name: str, op: str, layer: int, index: int | None = None) -> onnx.NodeProto:
        found = [
            n for n in self.consumers.get(name, []) if n.op_type == op and (index is None or n.input[index] == name)
        ]
        if len(found) != 1:
            raise self.refuse(layer, f"'{name}' feeds {len(found)} {op} nodes, not one")
        return found[0]

    def is_constant(self, name: str) -> bool:
        """Whether ``name`` is an initializer or a Constant node's output (its value is not read)."""
        return name in self.initializers or getattr(self.producer.get(name), "op_type", "") == "Constant"

    def constant(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant":
            return numpy_helper.to_array(node.attribute[0].t)
        return None


def _perm(node: onnx.NodeProto) -> list[int]:
    return next((list(helper.get_attribute_value(a)) for a in node.attribute if a.name == "perm"), [])


def _heads_input(g: GraphIndex, name: str, layer: int) -> str:
    """The (B, S, d) tensor that Reshape and Transpose(0, 2, 1, 3) turn into ``name`` (B, nh, S, hs)."""
    transpose = g.made_by(name, "Transpose", layer)
    if _perm(transpose) != [0, 2, 1, 3]:
        raise g.refuse(layer, f"'{name}' is not a heads-first Transpose")
    return g.made_by(transpose.input[0], "Reshape", layer).input[0]


def _cache_input(g: GraphIndex, layer: int, kind: KvKind) -> tuple[str, onnx.NodeProto]:
    """The new positions' (B, S, d) keys or values, and the Concat that makes ``present.{layer}.{kind}``."""
    concat = g.made_by(present_name(layer, kind), "Concat", layer)
    if list(concat.input)[:1] != [past_name(layer, kind)] or len(concat.input) != 2:
        raise g.refuse(layer, f"present.{layer}.{kind} is not the past followed by the new positions")
    return _heads_input(g, concat.input[1], layer), concat


def _plain_attention(g: GraphIndex, layer: int, head_size: int) -> tuple[str, str, str, float, onnx.NodeProto]:
    """MatMul ─ Mul ─ Add ─ Softmax ─ MatMul ─ Transpose ─ Reshape: (query, bias, output, scale, the Reshape)."""
    del head_size  # the scale is the graph's own constant
    probs_v = g.consumer(present_name(layer, "value"), "MatMul", layer, index=1)
    add = g.made_by(g.made_by(probs_v.input[0], "Softmax", layer).input[0], "Add", layer)
    mul_side = [i for i, name in enumerate(add.input) if getattr(g.producer.get(name), "op_type", "") == "Mul"]
    if len(mul_side) != 1:
        raise g.refuse(layer, "the mask bias is not added to one scaled product")
    mul, bias = g.producer[add.input[mul_side[0]]], add.input[1 - mul_side[0]]
    constants = [(name, g.constant(name)) for name in mul.input]
    scale = next((value for _, value in constants if value is not None and value.size == 1), None)
    scores_name = next((name for name, value in constants if value is None), "")
    if scale is None or not scores_name:
        raise g.refuse(layer, "the attention scale is not a constant")
    scores = g.made_by(scores_name, "MatMul", layer)
    key_t = g.made_by(scores.input[1], "Transpose", layer)
    if key_t.input[0] != present_name(layer, "key") or _perm(key_t) != [0, 1, 3, 2]:
        raise g.refuse(layer, "the scores do not read the present keys")
    transpose = g.consumer(probs_v.output[0], "Transpose", layer)
    if _perm(transpose) != [0, 2, 1, 3]:
        raise g.refuse(layer, "the attention's output is not transposed back to (B, S, nh, hs)")
    reshape = g.consumer(transpose.output[0], "Reshape", layer)
    return _heads_input(g, scores.input[0], layer), bias, reshape.output[0], float(scale.reshape(())), reshape


def _fused_attention(g: GraphIndex, layer: int, head_size: int) -> tuple[str, str, str, float, onnx.NodeProto] | None:
    """--optimize's MultiHeadAttention reading the presents: (query, bias, output, scale, the node), or None."""
    for node in g.graph.node:
        if node.op_type == "MultiHeadAttention" and node.domain == CONTRIB_DOMAIN and len(node.input) >= 6:
            reads = {_source(g, node.input[1]), _source(g, node.input[2])}
            if reads == {present_name(layer, "key"), present_name(layer, "value")}:
                if node.input[3] or node.input[4]:
                    raise g.refuse(layer, "its MultiHeadAttention takes a bias or a key padding mask")
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                scale = float(attrs.get("scale", 0.0)) or head_size**-0.5
                return node.input[0], node.input[5], node.output[0], scale, node
    return None


def _source(g: GraphIndex, name: str) -> str:
    """The tensor that Transposes and Reshapes (layout changes only) made ``name`` from."""
    node = g.producer.get(name)
    while node is not None and node.op_type in ("Transpose", "Reshape"):
        name = node.input[0]
        node = g.producer.get(name)
    return name


def find_attention(g: GraphIndex, layer: int, head_size: int) -> Attention:
    key, concat_k = _cache_input(g, layer, "key")
    value, concat_v = _cache_input(g, layer, "value")
    found = _fused_attention(g, layer, head_size) or _plain_attention(g, layer, head_size)
    query, bias, output, scale, last = found
    return Attention(query, key, value, bias, output, scale, (concat_k, concat_v, last))


_TO_THE_END = 2**62  # a Slice end at least this large reads to the end of its axis (exporters write INT64_MAX)


def packed_qkv(g: GraphIndex, found: Attention, width: int) -> str | None:
    """The (B, S, 3d) projection whose last axis the query, keys and values are three consecutive d-wide Slices
    of (0:d, d:2d, 2d:end), each read by the replaced attention only, or None where they are anything else.

    GroupQueryAttention takes that tensor itself as its packed query (key and value left empty) and splits it as it
    reads it: the graph then has no Split (ONNX Runtime fuses the three Slices into one) that writes the q, k and v
    out again before each layer's attention. The same values go in, so the outputs are the same to the bit."""
    producers = [g.producer.get(name) for name in (found.query, found.key, found.value)]
    slices = [node for node in producers if node is not None and node.op_type == "Slice" and len(node.input) >= 4]
    if len(slices) != 3 or len({node.input[0] for node in slices}) != 1:
        return None
    bounds = []
    for node in slices:
        starts, ends, axes = (g.constant(name) for name in node.input[1:4])
        steps = g.constant(node.input[4]) if len(node.input) > 4 and node.input[4] else np.array([1])
        if starts is None or ends is None or axes is None or steps is None:
            return None
        if starts.size != 1 or ends.size != 1 or int(axes.reshape(())) not in (2, -1) or int(steps.reshape(())) != 1:
            return None
        if len(g.consumers.get(node.output[0], [])) != 1:  # read by the replaced attention only
            return None
        bounds.append((int(starts.reshape(())), int(ends.reshape(()))))
    (q0, q1), (k0, k1), (v0, v1) = bounds
    if (q0, q1, k0, k1, v0) != (0, width, width, 2 * width, 2 * width) or v1 < _TO_THE_END:
        return None  # an end of exactly 3d could leave columns after it; only "to the end" proves the width
    return slices[0].input[0]

"""The in-place KV cache's graph: each layer's attention of the generation graph becomes one GroupQueryAttention
whose past and present are the same fixed-capacity buffer, so a step writes only its new positions.

decode.onnx concatenates the past with the new keys and values and returns the whole result as ``present.*``: each
token copies the entire cache (at 1,000 positions, GPT-2-small's float32 cache is 75 MB), so decode slows down as
the context grows. ONNX Runtime's com.microsoft GroupQueryAttention (kv_num_heads = num_heads: plain multi-head
attention) takes a past of ``capacity`` positions and, when the present is bound to the same memory, writes the
new positions into it and reads only the first ``total_sequence_length`` positions of each row
(onnxruntime-genai's past-present buffer sharing):

    q (B, S, d) ─ Reshape ─ Transpose ─ MatMul ─ Mul(scale) ─ Add(mask bias) ─ Softmax ─ MatMul ─ Transpose ─ Reshape
    k (B, S, d) ─ Reshape ─ Transpose ─ Concat(past_key) ─ present.{i}.key ─ Transpose ┘            │        (B, S, d)
    v (B, S, d) ─ Reshape ─ Transpose ─ Concat(past_value) ─ present.{i}.value ───────────────────────┘
                                          becomes
    GroupQueryAttention(q, k, v, past_key, past_value, seqlens_k, total_sequence_length, attention_bias=mask bias)
        ─► (B, S, d), present.{i}.key, present.{i}.value      (past and present bound to one (B, nh, C, hs) buffer)

Where q, k and v are the Slices 0:d, d:2d and 2d:end of one (B, S, 3d) projection (every graph this tool exports),
GroupQueryAttention reads that projection itself as its packed query, with no key and no value inputs: the Slices
(which ONNX Runtime fuses into one Split that writes all three out again) go, and the outputs are the same to the
bit. The kernel splits a packed query itself, so a prompt gains nothing (its GroupQueryAttention takes about what
the Split took); a decode step saves the Split's ~0.15 ms over 12 layers. On GPT-2-small (AMD EPYC, 2 threads, ONNX
Runtime 1.31.1; results/20261203T034537Z-packed-qkv) decode ran 0.97-1.00x and time to first token 0.99-1.02x the
graph with the Slices: at this machine's noise. The int8 cache reads the packed projection too (its probes are then
that projection, whose key and value columns the calibration takes).

The cache keeps the runtime's layout: rows left-padded to one width W (the attention mask's), every row's new token
at column W - 1. So every row's ``seqlens_k`` is W - 1 and ``total_sequence_length`` is W (both computed in the
graph from the mask's shape), and the padding is masked by the graph's own additive bias (B, 1, S, W), the same
tensor the replaced nodes added: a masked position scores the float32 minimum and gets probability 0, as before.
The inputs keep decode.onnx's names; only the past and present now have ``capacity`` positions (dimension 2), of
which the first W - S are the past. With a past, the kernel takes S > 1 new positions only in a batch of one.

fp32, int8 and int4 graphs compute attention in float32 and are rewritten; ``--optimize``'s MultiHeadAttention
too. With ``int8_cache`` the cache itself is int8 (``kv_cache`` 'int8'): GroupQueryAttention quantizes each new
key and value with a fixed per-channel scale as it writes it (q = round(x / scale), clipped to ±127) and
dequantizes the past as it reads it, so the cache tensors become int8 inputs and outputs of the same shapes, a
quarter of float32's bytes. The scales are graph inputs (``cache_scale.{i}.key`` and ``.value``, (1, nh, 1, hs),
bound on every run like the mapped embedding), and each layer's new keys and values float32 before quantization
are graph outputs too (:func:`probe_names`, under the names they have inside the graph: the packed (B, S, 3d)
projection where the attention reads it, else the keys and the values, (B, S, d) each): the session
that runs the graph measures its own scales (:mod:`gpt2_onnx_runtimes.kv_scales`), no second session needed. A run
that does not fetch them copies nothing.

fp16 graphs cast the float32 cache to float16 and back around the attention, so their present is a Cast's output
that cannot share the past's buffer: they are refused (:class:`InPlaceRefused`), like any graph whose
attention is not shaped as this tool exports it. ModelProto in, ModelProto out; the input is not modified.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gpt2_onnx_core import compatibility
from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import Gpt2OnnxError, InvalidInputError, RuntimeVersionError
from gpt2_onnx_core.names import ATTENTION_MASK, CONTRIB_DOMAIN, INPUT_IDS, KV_KINDS, KvKind, past_name, present_name
from gpt2_onnx_core.versions import version_tuple
from gpt2_onnx_runtimes.attention_pattern import Attention, GraphIndex, InPlaceRefused, find_attention, packed_qkv

__all__ = [
    "CacheScales",
    "InPlaceRefused",
    "in_place_attention",
    "in_place_graph",
    "probe_names",
    "refuse_in_place_split",
    "scale_name",
]

log = logging.getLogger(__name__)

_PREFIX = "/generation/in_place"  # names of what the transform adds


@dataclass(frozen=True)
class CacheScales:
    """The fixed scales of an int8 KV cache, one per layer, head and channel: ``key`` and ``value`` are
    (n_layer, n_head, head_dim) float32, and a stored q stands for q · scale (symmetric, no zero point)."""

    key: np.ndarray
    value: np.ndarray

    def feeds(self) -> dict[str, np.ndarray]:
        """The graph's scale inputs: ``cache_scale.{i}.key`` and ``.value``, (1, nh, 1, hs) each."""
        layers, heads, dim = self.key.shape
        found = {}
        for layer in range(layers):
            for kind, scales in zip(KV_KINDS, (self.key, self.value), strict=True):
                found[scale_name(layer, kind)] = np.ascontiguousarray(scales[layer].reshape(1, heads, 1, dim))
        return found

    def __post_init__(self) -> None:
        for name in ("key", "value"):
            scales = getattr(self, name)
            if scales.ndim != 3 or scales.dtype != np.float32 or not np.all(np.isfinite(scales) & (scales > 0)):
                raise InvalidInputError(f"{name} cache scales must be positive float32 (layers, heads, head_dim)")
        if self.key.shape != self.value.shape:
            raise InvalidInputError(f"key scales {self.key.shape} and value scales {self.value.shape} differ")


def _lengths(graph: onnx.GraphProto) -> tuple[str, str]:
    """Nodes computing ``total_sequence_length`` = W (the mask's width) and ``seqlens_k`` = W - 1 for every row,
    both int32: the runtime's rows are left-padded to one width."""
    p = _PREFIX
    consts = {"one": np.array([1], np.int64), "last": np.array([1], np.int64), "first": np.array([0], np.int64)}
    graph.initializer.extend(numpy_helper.from_array(v, f"{p}/{k}") for k, v in consts.items())
    nodes = [
        helper.make_node("Shape", [ATTENTION_MASK], [f"{p}/mask_shape"], name=f"{p}/mask_shape"),  # (2,): B, W
        helper.make_node("Gather", [f"{p}/mask_shape", f"{p}/last"], [f"{p}/width"], name=f"{p}/width", axis=0),
        helper.make_node("Shape", [INPUT_IDS], [f"{p}/ids_shape"], name=f"{p}/ids_shape"),
        helper.make_node("Gather", [f"{p}/ids_shape", f"{p}/first"], [f"{p}/batch"], name=f"{p}/batch", axis=0),
        helper.make_node("Sub", [f"{p}/width", f"{p}/one"], [f"{p}/past"], name=f"{p}/past"),  # (1,): W - 1
        helper.make_node("Expand", [f"{p}/past", f"{p}/batch"], [f"{p}/seqlens64"], name=f"{p}/seqlens64"),  # (B,)
        helper.make_node("Cast", [f"{p}/seqlens64"], [f"{p}/seqlens_k"], name=f"{p}/seqlens_k", to=TensorProto.INT32),
        helper.make_node("Squeeze", [f"{p}/width"], [f"{p}/width_scalar"], name=f"{p}/width_scalar"),  # ()
        helper.make_node("Cast", [f"{p}/width_scalar"], [f"{p}/total"], name=f"{p}/total", to=TensorProto.INT32),
    ]
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend([*nodes, *existing])  # graph inputs only: they may come first
    return f"{p}/seqlens_k", f"{p}/total"


def _live_only(graph: onnx.GraphProto) -> None:
    """Drop the nodes and initializers no graph output depends on any more."""
    producer = {name: node for node in graph.node for name in node.output}
    needed = [value.name for value in graph.output]
    seen: set[str] = set()
    while needed:
        name = needed.pop()
        if name in seen:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is not None:
            needed.extend(n for n in node.input if n)
    kept = [node for node in graph.node if any(name in seen for name in node.output)]
    del graph.node[:]
    graph.node.extend(kept)
    unused = [tensor for tensor in graph.initializer if tensor.name not in seen]
    for tensor in unused:
        graph.initializer.remove(tensor)


def scale_name(layer: int, kind: KvKind) -> str:
    """The int8 cache's scale input of one layer's keys or values, (1, nh, 1, hs) float32."""
    return f"cache_scale.{layer}.{kind}"


def probe_names(model: onnx.ModelProto) -> list[str]:
    """The int8-cache graph's new keys and values before quantization, graph outputs under the names they have
    inside it, layer by layer: a layer's packed (B, S, 3d) projection where its attention reads one, else its keys
    and its values, (B, S, d) each."""
    outputs = {value.name for value in model.graph.output}
    nodes = {node.name: node for node in model.graph.node if node.op_type == "GroupQueryAttention"}
    layers = [nodes[f"{_PREFIX}/layers.{layer}/GroupQueryAttention"] for layer in range(len(nodes))]
    return [name for node in layers for name in _probed(node) if name in outputs]


def _probed(node: onnx.NodeProto) -> list[str]:
    """What a GroupQueryAttention's new keys and values are read from: its packed query, or its key and value."""
    return list(node.input[1:3]) if node.input[1] else [node.input[0]]


def in_place_attention(
    model: onnx.ModelProto, dims: ModelDims, what: str = "decode.onnx", int8_cache: bool = False
) -> onnx.ModelProto:
    """``model`` (the generation graph) with every layer's attention a GroupQueryAttention whose past and present
    can share one buffer (see the module docstring); with ``int8_cache``, over an int8 cache.

    Raises :class:`InPlaceRefused` when a layer's attention is not shaped as this tool's fp32, int8, int4 or
    --optimize graphs shape it (fp16's casts around the cache among them).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    g = GraphIndex(graph, what)
    if any(node.op_type == "Cast" for node in g.consumers.get(past_name(0, "key"), [])):
        raise g.refuse(
            0,
            "the cache is cast to another type around it (fp16), so its present cannot be written "
            "into the past's buffer",
        )
    layers = [find_attention(g, layer, dims.head_dim) for layer in range(dims.n_layer)]
    seqlens, total = _lengths(graph)
    # Nodes are known by their first output (graphs are SSA; protobuf hands out a new wrapper at each access).
    packed = [packed_qkv(g, found, dims.n_embd) for found in layers]
    gqa = {
        found.output: _gqa_node(layer, found, dims.n_head, seqlens, total, packed[layer])
        for layer, found in enumerate(layers)
    }
    if int8_cache:
        _quantize_cache(graph, list(gqa.values()), dims)
    gone = {node.output[0] for found in layers for node in found.replaced[:-1]}
    nodes = [gqa.get(node.output[0], node) for node in graph.node if node.output[0] not in gone]  # in place
    del graph.node[:]
    graph.node.extend(nodes)
    _live_only(graph)
    if not any(opset.domain == CONTRIB_DOMAIN for opset in out.opset_import):
        out.opset_import.append(helper.make_opsetid(CONTRIB_DOMAIN, 1))
    return out


def _gqa_node(
    layer: int, found: Attention, n_head: int, seqlens: str, total: str, packed: str | None = None
) -> onnx.NodeProto:
    """The layer's GroupQueryAttention; reading ``packed`` (B, S, 3d) as its query where given (no key, no value)."""
    qkv = [packed, "", ""] if packed is not None else [found.query, found.key, found.value]
    inputs = [*qkv, past_name(layer, "key"), past_name(layer, "value"), seqlens, total]
    return helper.make_node(
        "GroupQueryAttention",
        [*inputs, "", "", "", found.bias],  # no rotary cos/sin, no position ids; the mask bias
        [found.output, present_name(layer, "key"), present_name(layer, "value")],
        name=f"{_PREFIX}/layers.{layer}/GroupQueryAttention",
        domain=CONTRIB_DOMAIN,
        num_heads=n_head,
        kv_num_heads=n_head,  # every head has its own keys and values: plain multi-head attention
        scale=found.scale,
    )


def _quantize_cache(graph: onnx.GraphProto, nodes: list[onnx.NodeProto], dims: ModelDims) -> None:
    """Make every GroupQueryAttention's cache int8 with per-channel scales from graph inputs, its new keys and
    values graph outputs (the probes: the packed projection, or the keys and the values), and the cache's graph
    inputs and outputs int8."""
    scale_shape = [1, dims.n_head, 1, dims.head_dim]
    for layer, node in enumerate(nodes):
        scales = [scale_name(layer, kind) for kind in KV_KINDS]
        graph.input.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, scale_shape) for name in scales)
        node.input.extend(["", *scales])  # after the attention bias: no head sink, then k_scale and v_scale
        node.attribute.extend(
            [
                helper.make_attribute("k_quant_type", "PER_CHANNEL"),
                helper.make_attribute("v_quant_type", "PER_CHANNEL"),
                helper.make_attribute("kv_cache_bit_width", 8),
            ]
        )
        for tensor in _probed(node):  # (B, S, 3d) or (B, S, d): outputs as they are, no copy
            graph.output.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, ["batch", "sequence", None]))
    cache = {f(layer, kind) for layer in range(dims.n_layer) for kind in KV_KINDS for f in (past_name, present_name)}
    for value in [*graph.input, *graph.output]:
        if value.name in cache:
            value.type.tensor_type.elem_type = TensorProto.INT8


def refuse_in_place_split(mode: str, kv_cache: str = "float32") -> None:
    """``in_place_kv`` 'on', or an int8 cache, in the split layout: refused (InvalidInputError); 'auto' there means
    off."""
    if kv_cache != "float32":
        raise InvalidInputError(
            f"kv_cache '{kv_cache}' needs the merged layout: the split layout runs the folder's two graphs as "
            "shipped, whose cache is float32"
        )
    if mode == "on":
        raise InvalidInputError(
            "in_place_kv 'on' needs the merged layout: the split layout runs the folder's two graphs as shipped, "
            "which concatenate the past into a new present every step"
        )


def in_place_graph(
    graph: onnx.ModelProto,
    dims: ModelDims,
    mode: str,
    provider: str,
    what: str = "decode.onnx",
    int8_cache: bool = False,
) -> onnx.ModelProto | None:
    """The generation graph rewritten to write the cache in place (int8 with ``int8_cache``), or None where
    ``mode`` (``in_place_kv``) is 'off', or 'auto' and it does not apply; 'on' where it does not apply raises the
    reason, and so does an int8 cache, which exists only in place."""
    import onnxruntime as ort

    if mode == "off":
        if int8_cache:
            raise InvalidInputError(
                "kv_cache 'int8' is written in place only; it cannot be used with in_place_kv 'off'"
            )
        return None
    wanted = "kv_cache 'int8'" if int8_cache else "in_place_kv 'on'"
    minimum = compatibility.IN_PLACE_KV_MIN_ONNXRUNTIME
    if provider != "cpu":
        reason: Gpt2OnnxError = InvalidInputError(
            f"{wanted} runs on the CPU provider only, not {provider}: the runtime's fixed-capacity cache "
            "buffers are host memory, and CUDA's GroupQueryAttention takes no float32"
        )
    elif version_tuple(ort.__version__) < version_tuple(minimum):
        reason = RuntimeVersionError(
            f"{wanted} needs onnxruntime >= {minimum} (GroupQueryAttention with an attention bias on the "
            f"CPU), but {ort.__version__} is installed"
        )
    else:
        try:
            return in_place_attention(graph, dims, what, int8_cache)
        except InPlaceRefused as exc:
            reason = exc
    if mode == "on" or int8_cache:
        raise reason
    log.info("the KV cache is copied every step, not written in place: %s", reason)
    return None

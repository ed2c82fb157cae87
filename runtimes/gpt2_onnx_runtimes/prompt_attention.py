"""The int8 cache's prompt graph: a prompt attends over a float32 cache of its own, and each run returns its new
keys and values quantized for the runtime to write into the int8 cache, instead of GroupQueryAttention quantizing
them into the int8 cache and reading the prompt's past back dequantized.

Why: with an int8 cache, ONNX Runtime's GroupQueryAttention dequantizes the cache element by element inside its
dot products; over a prompt that is every query against every key. GPT-2-small, a 128-token prompt, 2 threads
(Intel Xeon, ONNX Runtime 1.31.1): its 12 attentions took about 26 ms against about 9 ms over a float32 cache, and
the int4 prompt kernel's whole prefill 45 ms against 29 ms. A prompt's keys and values are its own projections, in
float32 before they are quantized, so attending over them in float32 loses nothing the float32 cache would keep.

How: each layer's GroupQueryAttention of the in-place int8-cache graph
(:func:`gpt2_onnx_runtimes.inplace_attention.in_place_attention` with ``int8_cache``) loses its scales and becomes
the float32 cache's in-place attention again: the past and present ``*.{i}.key`` and ``.value`` are float32, bound
by the runtime to a float32 buffer that holds the prompt while it is prefilled (in chunks, each after the ones
before it, as over any in-place cache). The new keys and values the attention reads, (B, S, d) each (the key and
value columns of the packed projection where it reads one), are quantized as the int8 cache stores them, with the
same per-channel scale inputs (q = round(x / scale), half to even, clipped to ±127), and returned in the cache's
layout as ``new_cache.{i}.key`` and ``.value`` (:func:`new_cache_name`), which the runtime writes into the int8
cache:

    GroupQueryAttention(qkv, past_key, past_value, ..., k_scale, v_scale) ─► out, present (int8, in place)
                                          becomes
    GroupQueryAttention(qkv, past_key, past_value, ...) ─► out, present (float32, in place)
    qkv[..., d:2d] (B, S, d) ─ Div(k_scale, (d,)) ─ QuantizeLinear(1, 0) ─ Clip(±127) ─ Reshape (B, S, nh, hs)
        ─ Transpose ─► new_cache.{i}.key (B, nh, S, hs) int8

QuantizeLinear with one scale of 1 rounds and casts in one pass; with the per-channel scale itself it cannot, at
ONNX Runtime's speed: over the channels of the last axis it takes a channel at a time (6.5 ms a layer for a
128-token prompt's packed projection, Intel Xeon, 2 threads, against a fraction of a millisecond here).

Decode steps run the int8 graph over the int8 cache. The prompt's logits are those of the float32 cache; the int8
cache then holds what the int8 graph would have written for the same keys and values, up to the rounding of a value
that lies on a step's half (the kernel's own quantization may round it the other way). ModelProto in, ModelProto
out; the input is not modified.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gpt2_onnx_core.config import ModelDims
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.names import CONTRIB_DOMAIN, KV_KINDS, KvKind, past_name, present_name
from gpt2_onnx_runtimes.inplace_attention import scale_name

__all__ = ["float_prompt_attention", "new_cache_name", "new_cache_names"]

_PREFIX = "/generation/prompt_attention"  # names of what the transform adds
_QUANTIZING = ("k_quant_type", "v_quant_type", "kv_cache_bit_width")  # the int8 cache's attributes
_BIAS_INPUT = 10  # GroupQueryAttention's attention bias; what follows (head sink, k_scale, v_scale) goes


def new_cache_name(layer: int, kind: KvKind) -> str:
    """The prompt graph's output of one layer's new keys or values, quantized: (B, nh, S, hs) int8."""
    return f"new_cache.{layer}.{kind}"


def new_cache_names(n_layer: int) -> list[str]:
    """Every such output, in the cache's (layer, key/value) order."""
    return [new_cache_name(layer, kind) for layer in range(n_layer) for kind in KV_KINDS]


def float_prompt_attention(model: onnx.ModelProto, dims: ModelDims) -> onnx.ModelProto:
    """The in-place int8-cache generation graph ``model`` for prompts (see the module docstring): in-place
    attention over a float32 cache, and each run's new keys and values quantized as outputs
    ``new_cache.{i}.key`` and ``.value``, (B, nh, S, hs) int8.

    Raises :class:`ManifestError` when ``model`` is not an int8-cache graph as the runtime builds it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    layers = [node for node in graph.node if node.op_type == "GroupQueryAttention" and node.domain == CONTRIB_DOMAIN]
    if len(layers) != dims.n_layer or any(not _quantizes(node) for node in layers):
        raise ManifestError("the prompt attention applies to the int8 cache's generation graph only")
    d = dims.n_embd
    constants: dict[str, np.ndarray] = {"one": np.array(1, np.float32), "zero": np.array(0, np.int8)}
    constants |= {"low": np.array(-127, np.int8), "high": np.array(127, np.int8)}
    constants |= {"channels": np.array([d], np.int64), "heads": np.array([0, 0, dims.n_head, dims.head_dim], np.int64)}
    constants |= {"axis": np.array([2], np.int64)}  # the packed projection's key and value columns, (B, S, d) each
    constants |= {"key_start": np.array([d], np.int64), "key_end": np.array([2 * d], np.int64)}
    constants |= {"value_start": np.array([2 * d], np.int64), "value_end": np.array([3 * d], np.int64)}
    graph.initializer.extend(numpy_helper.from_array(value, f"{_PREFIX}/{name}") for name, value in constants.items())
    added: dict[str, list[onnx.NodeProto]] = {}  # by the attention's output: the nodes that follow it
    for layer, node in enumerate(layers):
        if list(node.output[1:3]) != [present_name(layer, kind) for kind in KV_KINDS]:
            raise ManifestError(f"{node.name}: its presents are not layer {layer}'s cache outputs")
        added[node.output[0]] = _new_cache(node, layer)
        del node.input[_BIAS_INPUT + 1 :]
        kept = [attribute for attribute in node.attribute if attribute.name not in _QUANTIZING]
        del node.attribute[:]
        node.attribute.extend(kept)
    nodes = [new for node in graph.node for new in (node, *added.get(node.output[0], []))]  # each after its attention
    del graph.node[:]
    graph.node.extend(nodes)
    cache = {f(layer, kind) for layer in range(dims.n_layer) for kind in KV_KINDS for f in (past_name, present_name)}
    for value in [*graph.input, *graph.output]:
        if value.name in cache:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    shape: list[str | int] = ["batch", dims.n_head, "sequence", dims.head_dim]
    graph.output.extend(
        helper.make_tensor_value_info(name, TensorProto.INT8, shape) for name in new_cache_names(dims.n_layer)
    )
    return out


def _quantizes(node: onnx.NodeProto) -> bool:
    return any(attribute.name == "kv_cache_bit_width" for attribute in node.attribute)


def _new_cache(node: onnx.NodeProto, layer: int) -> list[onnx.NodeProto]:
    """The nodes from the new keys and values ``node`` reads to the layer's ``new_cache`` outputs."""
    p = _PREFIX
    nodes = []
    for index, kind in enumerate(KV_KINDS):
        base = f"{p}/layers.{layer}/{kind}"
        source = node.input[1 + index]  # (B, S, d)
        if not source:  # the packed (B, S, 3d) projection: its key or value columns
            source = f"{base}/new"
            bounds = [f"{p}/{kind}_start", f"{p}/{kind}_end", f"{p}/axis"]
            nodes.append(helper.make_node("Slice", [node.input[0], *bounds], [source], name=source))
        nodes += [
            helper.make_node(
                "Reshape", [scale_name(layer, kind), f"{p}/channels"], [f"{base}/scale"], name=f"{base}/scale"
            ),  # (1, nh, 1, hs) -> (d,)
            helper.make_node("Div", [source, f"{base}/scale"], [f"{base}/scaled"], name=f"{base}/div"),
            helper.make_node(
                "QuantizeLinear", [f"{base}/scaled", f"{p}/one", f"{p}/zero"], [f"{base}/q"], name=f"{base}/q"
            ),
            helper.make_node("Clip", [f"{base}/q", f"{p}/low", f"{p}/high"], [f"{base}/int8"], name=f"{base}/clip"),
            helper.make_node("Reshape", [f"{base}/int8", f"{p}/heads"], [f"{base}/heads"], name=f"{base}/heads"),
            helper.make_node(
                "Transpose", [f"{base}/heads"], [new_cache_name(layer, kind)], name=f"{base}/cache", perm=[0, 2, 1, 3]
            ),  # (B, nh, S, hs)
        ]
    return nodes

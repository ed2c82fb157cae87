"""A second generation graph for prompts (``RuntimeOptions.prompt_kernel='dynamic'``): an int8 or int4 export's
block-quantized projections multiplied by ONNX Runtime's u8s8 QGEMM instead of MatMulNBits.

Why: a prompt's projections are matrix-matrix products (M = the prompt's tokens), where MatMulNBits unpacks its
blocks and applies one scale per block inside the product. ``DynamicQuantizeMatMul`` (int8 weights with one scale
per output column, the activations quantized to uint8 per call) runs ONNX Runtime's QGEMM over them. GPT-2-small's 48
projections over a 128-token prompt, 2 threads (benchmarks/matmul_kernels.py, AVX-512 AMD EPYC): QGEMM 44.5 ms
against 73.1 ms for 4-bit blocks of 128 and 103.6 ms for blocks of 32 (results/20261202T185202Z-kernels). A decode
step (M = 1) reads every weight once and is bound by memory, where 4-bit blocks are the fastest: the decode steps
keep the export's own graph.

How: every ``MatMulNBits`` of the generation graph whose weight only projections read (not the tied table, which the
embedding lookup reads too: the head multiplies one row per prompt) is replaced by ``DynamicQuantizeMatMul`` over
int8 weights made when the export loads: the blocks dequantized as the export stores them (one projection at a
time, in float32) and quantized again per column, W[k, n] ≈ q[k, n] · scale[n] (:mod:`gpt2_onnx_core.block_quant`). So
the prompt graph computes the export's own quantized weights up to int8 rounding (a 4-bit block's step is 1/7 of
its largest weight, the column's int8 step 1/127 of the column's), plus the per-call quantization of the
activations. Both sessions write the same in-place cache; the inputs, outputs and constant inputs are the same
(with the int8 cache, the prompt graph is first given a float32 cache of the prompt's own and returns each run's new
positions quantized: :mod:`gpt2_onnx_runtimes.prompt_attention`).

The int8 weights reach ONNX Runtime as the contents of a weights file held in memory
(``SessionOptions.add_external_initializers_from_files_in_memory``, file :data:`PROMPT_WEIGHTS_FILE`): ONNX Runtime
copies what it needs while the session is created and prepacks it, so the buffer (:class:`PromptGraph`) is dropped
as soon as the session exists. The graph's other initializers (the tied table, the norms, the biases) are handed to
the session as views of one read-only map of the export's weights file (``add_initializer``,
:class:`gpt2_onnx_runtimes.shared_weights.SharedWeights`), so they are not copied again.

What it costs: the int8 weights, prepacked, and a second prepacked copy of the head (for GPT-2-small int4 about
110 MiB more RSS once loaded); while the prompt session is created, the in-memory file and ONNX Runtime's copy of it
besides (a load peak of about 360 MiB against 207 for GPT-2-small int4); a second session's setup at load (about
1 s); and a prompt's logits (its perplexity change is in docs/performance.md).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gpt2_onnx_core.block_quant import BlockQuantized, dequantize, quantize_columns
from gpt2_onnx_core.errors import InvalidInputError, ManifestError
from gpt2_onnx_core.layouts import PromptKernel
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.names import CONTRIB_DOMAIN
from gpt2_onnx_core.precisions import precision_named
from gpt2_onnx_core.weights_index import ExternalTensorRef, external_tensors

__all__ = ["PROMPT_WEIGHTS_FILE", "PromptGraph", "check_prompt_kernel", "dynamic_prompt_graph", "prompt_kernel_applies"]

log = logging.getLogger(__name__)

_SUFFIX = ".prompt_int8"
_ALIGN = 64  # bytes: every tensor of the in-memory file starts on a cache line
PROMPT_WEIGHTS_FILE = "prompt_kernel.int8.data"  # the in-memory file's name, as the graph's initializers give it


@dataclass
class PromptGraph:
    """The prompt graph and the contents of the weights file its new initializers point into."""

    model: onnx.ModelProto
    weights: np.ndarray  # uint8 (bytes,): the in-memory file PROMPT_WEIGHTS_FILE
    names: frozenset[str]  # the initializers that lie in it

    def add_to(self, options: object, files: dict[str, np.ndarray]) -> None:
        """Hand the in-memory file, and ``files`` (the other files the graph's initializers lie in, by name), to
        ONNX Runtime ``SessionOptions`` ``options``; keep them alive until the session exists."""
        found = {PROMPT_WEIGHTS_FILE: self.weights, **files}
        options.add_external_initializers_from_files_in_memory(  # type: ignore[attr-defined]
            list(found), list(found.values()), [int(array.nbytes) for array in found.values()]
        )


_NEEDS = (
    "prompt_kernel 'dynamic' needs an export whose projections are MatMulNBits blocks (--precision int8 or int4 "
    "with the default --matmul-kernel)"
)


def prompt_kernel_applies(manifest: Manifest) -> bool:
    """Whether the export's projections are MatMulNBits blocks (int8 or int4 with the default kernel)."""
    quantization = manifest.export.get("quantization") or {}
    flag = precision_named(manifest.precision).flag
    return flag in ("int8", "int4") and quantization.get("kernel", "matmulnbits") == "matmulnbits"


def check_prompt_kernel(manifest: Manifest, kernel: PromptKernel) -> None:
    """Refuse ``kernel`` for an export it cannot apply to, from its manifest alone (before any graph is read): a
    precision without blocks, or int8 exported with ``--matmul-kernel dynamic`` (its projections are
    DynamicQuantizeMatMul already)."""
    if kernel == "export" or prompt_kernel_applies(manifest):
        return
    kind = (manifest.export.get("quantization") or {}).get("kernel")
    flag = precision_named(manifest.precision).flag
    raise InvalidInputError(f"{_NEEDS}; this one is {flag}" + (f" with {kind}" if kind else ""))


def _aligned(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


def _external(name: str, array: np.ndarray, offset: int) -> TensorProto:
    """An initializer ``name`` of ``array``'s type and shape, whose bytes lie at ``offset`` of the in-memory file."""
    tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype), dims=array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", PROMPT_WEIGHTS_FILE), ("offset", str(offset)), ("length", str(array.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _read(data: np.ndarray, ref: ExternalTensorRef) -> np.ndarray:
    """The tensor ``ref`` names, a read-only view into the mapped weights file."""
    return data[ref.offset : ref.offset + ref.length].view(ref.dtype).reshape(ref.shape)


def _attribute(node: onnx.NodeProto, name: str) -> int:
    found = next((a for a in node.attribute if a.name == name), None)
    if found is None:
        raise ManifestError(f"{node.name}: MatMulNBits without its '{name}' attribute")
    return int(found.i)


def _requantized(node: onnx.NodeProto, weight: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The int8 (K, N) weight and (N,) scales that stand for MatMulNBits ``node``'s blocks (packed uint8 and their
    float32 scales)."""
    k, n = _attribute(node, "K"), _attribute(node, "N")
    bits, block = _attribute(node, "bits"), _attribute(node, "block_size")
    blocks = -(-k // block)
    if blocks * block != k:
        raise ManifestError(f"{node.name}: K = {k} is not a whole number of blocks of {block}")
    packed = weight.reshape(n, blocks, block * bits // 8)  # (N, K/b, b·bits/8)
    float_weight = dequantize(BlockQuantized(packed, scales.reshape(n, blocks), bits, block))  # (N, K)
    columns = quantize_columns(np.ascontiguousarray(float_weight.T))  # (K, N) int8, (N,)
    return columns.values, columns.scales


def dynamic_prompt_graph(model: onnx.ModelProto, weights: Path, graph_path: Path) -> PromptGraph:
    """``model`` (the generation graph, external data in ``weights``) with its projections' MatMulNBits replaced by
    DynamicQuantizeMatMul over int8 weights in an in-memory file; ``model`` is not modified.

    Raises :class:`InvalidInputError` when the graph has no such projection (an fp32 or fp16 export, or an int8
    one exported with ``--matmul-kernel dynamic``, whose projections are DynamicQuantizeMatMul already)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            readers[name].append(node)
    refs = {ref.name: ref for ref in external_tensors(model, graph_path)}
    inline = {tensor.name: tensor for tensor in graph.initializer if tensor.name not in refs}  # small ones
    stored = refs.keys() | inline.keys()
    chosen = []  # (index, node): the projections, in graph order
    for index, node in enumerate(graph.node):
        if node.op_type != "MatMulNBits" or node.domain != CONTRIB_DOMAIN:
            continue
        weight, scales = node.input[1:3]
        if any(name for name in node.input[3:]) or weight not in stored or scales not in stored:
            continue  # zero points, a bias, or weights computed in the graph: not as this tool exports projections
        if any(reader.op_type != "MatMulNBits" for reader in readers[weight]):
            continue  # the tied table: the lookup gathers its rows
        chosen.append((index, node))
    offsets, size = [], 0  # each projection's int8 (K, N) and then its (N,) float32 scales, each _ALIGN-aligned
    for _, node in chosen:
        k, n = _attribute(node, "K"), _attribute(node, "N")
        offsets.append((size, size + _aligned(k * n)))
        size += _aligned(k * n) + _aligned(4 * n)
    contents = np.zeros(size, dtype=np.uint8)  # the in-memory file, written one projection at a time
    data = np.memmap(weights, dtype=np.uint8, mode="r")
    added: list[onnx.TensorProto] = []
    replaced: set[str] = set()
    for (index, node), starts in zip(chosen, offsets, strict=True):
        source, weight, scales = node.input[:3]
        read = [
            _read(data, refs[name]) if name in refs else numpy_helper.to_array(inline[name])
            for name in (weight, scales)
        ]
        values, column_scales = _requantized(node, *read)
        names = (weight + _SUFFIX, scales + _SUFFIX)
        for name, array, start in zip(names, (values, column_scales), starts, strict=True):
            contents[start : start + array.nbytes] = array.reshape(-1).view(np.uint8)
            added.append(_external(name, array, start))
        graph.node[index].CopyFrom(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [source, *names],
                list(node.output),
                name=f"{node.name}/prompt",
                domain=CONTRIB_DOMAIN,
            )
        )
        replaced.update((weight, scales))
    del data
    if not chosen:
        raise InvalidInputError(f"{_NEEDS}; this graph has none")
    still_read = {name for node in graph.node for name in node.input}
    kept = [tensor for tensor in graph.initializer if tensor.name not in replaced or tensor.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    log.debug("prompt graph: %d projections through DynamicQuantizeMatMul, %d bytes", len(chosen), size)
    return PromptGraph(out, contents, frozenset(tensor.name for tensor in added))

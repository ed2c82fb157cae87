"""The floor under a GPT-2 forward on this machine, as ``bench`` systems: only the matrix products, nothing else.

A GPT-2 forward multiplies its activations by every weight matrix: four per block (``c_attn``, ``attn.c_proj``,
``c_fc``, ``mlp.c_proj``) and the tied head (the token embedding, last position only). A decode step has one row
per sequence, so it must stream every weight from memory once: no runtime's decode step can be faster than this
pass, whatever it fuses. A prefill has ``batch × prompt`` rows: its pass is the products' compute, without
attention, layer norms or GELU.

Two systems time that pass on the checkpoint's own weights, with random activations:

- ``TorchWeightPass``: ``torch.nn.functional.linear`` on contiguous ``[out, in]`` copies (torch's own GEMV/GEMM
  layout), ``settings.threads`` threads.
- ``OrtWeightPass``: one ONNX graph of ``MatMul`` nodes over ``[in, out]`` initializers plus the head as ``Gemm``
  ``transB=1`` over the ``[vocab, d]`` embedding (the layout gpt2-onnx exports), run through IO binding into
  preallocated outputs. ``spec.share_weights`` chooses as gpt2-onnx's runtime does: True leaves the weights
  unpacked (``session.disable_prepacking``), False lets ONNX Runtime prepack them.

``generate(ids, n)`` times a prefill pass, then ``n - 1`` decode passes, as one token each. Memory figures of these
systems are not meaningful (each process holds torch and the model); only the timings are compared.
Used by ``benchmarks/weight_pass_floor.py`` through ``SystemSpec(factory="benchmarks.weight_pass_system:...")``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper, numpy_helper

from gpt2_onnx_core.bench_protocol import GenerationTiming
from gpt2_onnx_core.bench_settings import BenchSettings, SystemSpec
from gpt2_onnx_exporters.source import load_source

__all__ = ["OrtWeightPass", "TorchWeightPass", "block_matrices"]

# Conv1D modules of a GPT-2 block: their weights are stored [in, out].
_BLOCK_MATRICES = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def block_matrices(spec: SystemSpec) -> tuple[list[np.ndarray], np.ndarray]:
    """Every block's weight matrices ``[in, out]`` in forward order, and the token embedding ``[vocab, d]``."""
    if spec.model is None:
        raise ValueError("a weight-pass system needs the checkpoint (SystemSpec.model)")
    model = load_source(spec.model, spec.seed or 0).model
    modules = dict(model.named_modules())
    matrices = [
        modules[f"transformer.h.{i}.{name}"].weight.detach().float().numpy().copy()  # (in, out)
        for i in range(model.config.n_layer)
        for name in _BLOCK_MATRICES
    ]
    embedding = model.transformer.wte.weight.detach().float().numpy().copy()  # (V, d)
    del model, modules
    return matrices, embedding


class _WeightPass:
    """The timing loop both systems share; subclasses give ``_pass(rows, head_rows)``."""

    def __init__(self, spec: SystemSpec, settings: BenchSettings) -> None:
        if settings.provider != "cpu":
            raise ValueError("the weight-pass floor is measured on the CPU only")
        self.spec, self.threads = spec, settings.threads
        self._run: Callable[[int, int], None] | None = None

    def _build(self, matrices: list[np.ndarray], embedding: np.ndarray) -> Callable[[int, int], None]:
        raise NotImplementedError

    def load(self) -> None:
        self._run = self._build(*block_matrices(self.spec))

    def _pass(self, rows: int, head_rows: int) -> None:
        if self._run is None:
            raise RuntimeError("weight-pass system used before load()")
        self._run(rows, head_rows)

    def prefill(self, input_ids: np.ndarray) -> float:
        start = time.perf_counter()
        self._pass(input_ids.size, input_ids.shape[0])  # every prompt row; the head on the last position only
        return time.perf_counter() - start

    def generate(self, input_ids: np.ndarray, new_tokens: int) -> GenerationTiming:
        batch = input_ids.shape[0]
        start = time.perf_counter()
        self._pass(input_ids.size, batch)
        marks = [time.perf_counter()]
        for _ in range(new_tokens - 1):
            self._pass(batch, batch)  # one row per sequence: every weight streamed once
            marks.append(time.perf_counter())
        return GenerationTiming.from_marks(start, marks)


class TorchWeightPass(_WeightPass):
    """The products with torch (``F.linear`` over ``[out, in]`` weights)."""

    def _build(self, matrices: list[np.ndarray], embedding: np.ndarray) -> Callable[[int, int], None]:
        torch.set_num_threads(self.threads)
        weights = [torch.from_numpy(np.ascontiguousarray(m.T)) for m in matrices]  # (out, in) each
        head = torch.from_numpy(embedding)  # (V, d)
        generator = torch.Generator().manual_seed(0)
        inputs: dict[tuple[int, int], torch.Tensor] = {}

        def activations(rows: int, width: int) -> torch.Tensor:
            if (rows, width) not in inputs:
                inputs[(rows, width)] = torch.randn(rows, width, generator=generator)  # (rows, in)
            return inputs[(rows, width)]

        @torch.inference_mode()
        def run(rows: int, head_rows: int) -> None:
            for weight in weights:
                torch.nn.functional.linear(activations(rows, weight.shape[1]), weight)  # (rows, out)
            torch.nn.functional.linear(activations(head_rows, head.shape[1]), head)  # (head_rows, V)

        return run


def weight_pass_graph(matrices: list[np.ndarray], embedding: np.ndarray) -> onnx.ModelProto:
    """``MatMul`` per block matrix (inputs grouped by width) and the head as ``Gemm(transB=1)``; every product an
    output, so nothing is pruned."""
    rows = "rows"
    widths = sorted({m.shape[0] for m in matrices})
    inputs = [helper.make_tensor_value_info(f"x_{w}", TensorProto.FLOAT, [rows, w]) for w in widths]
    inputs.append(helper.make_tensor_value_info("x_head", TensorProto.FLOAT, ["head_rows", embedding.shape[1]]))
    initializers = [numpy_helper.from_array(m, f"w_{i}") for i, m in enumerate(matrices)]
    initializers.append(numpy_helper.from_array(embedding, "wte"))
    nodes = [helper.make_node("MatMul", [f"x_{m.shape[0]}", f"w_{i}"], [f"y_{i}"]) for i, m in enumerate(matrices)]
    nodes.append(helper.make_node("Gemm", ["x_head", "wte"], ["logits"], transB=1))
    outputs = [
        helper.make_tensor_value_info(f"y_{i}", TensorProto.FLOAT, [rows, m.shape[1]]) for i, m in enumerate(matrices)
    ]
    outputs.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["head_rows", embedding.shape[0]]))
    graph = helper.make_graph(nodes, "weight_pass", inputs, outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class OrtWeightPass(_WeightPass):
    """The products with ONNX Runtime, prepacked or not (``spec.share_weights``), through IO binding."""

    def _build(self, matrices: list[np.ndarray], embedding: np.ndarray) -> Callable[[int, int], None]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        if self.spec.share_weights:
            options.add_session_config_entry("session.disable_prepacking", "1")
        model = weight_pass_graph(matrices, embedding)
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        del model
        widths = sorted({m.shape[0] for m in matrices})
        out_widths = [m.shape[1] for m in matrices]
        rng = np.random.default_rng(0)
        bindings: dict[tuple[int, int], ort.IOBinding] = {}

        def binding(rows: int, head_rows: int) -> ort.IOBinding:
            if (rows, head_rows) in bindings:
                return bindings[(rows, head_rows)]
            bound = session.io_binding()
            for w in widths:
                x = rng.standard_normal((rows, w), dtype=np.float32)  # (rows, in)
                bound.bind_ortvalue_input(f"x_{w}", ort.OrtValue.ortvalue_from_numpy(x))
            head_x = rng.standard_normal((head_rows, embedding.shape[1]), dtype=np.float32)  # (head_rows, d)
            bound.bind_ortvalue_input("x_head", ort.OrtValue.ortvalue_from_numpy(head_x))
            for i, out in enumerate(out_widths):
                bound.bind_ortvalue_output(f"y_{i}", ort.OrtValue.ortvalue_from_shape_and_type((rows, out), np.float32))
            logits = ort.OrtValue.ortvalue_from_shape_and_type((head_rows, embedding.shape[0]), np.float32)
            bound.bind_ortvalue_output("logits", logits)
            bindings[(rows, head_rows)] = bound
            return bound

        def run(rows: int, head_rows: int) -> None:
            session.run_with_iobinding(binding(rows, head_rows))

        return run

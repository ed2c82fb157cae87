"""Reordering a KV cache held in ONNX Runtime ``OrtValue``\\ s without a trip through the host.

Beam search continues some beams twice and drops others, so between steps row r of the cache must become row
``rows[r]`` of the old one. On CUDA the cache stays in GPU memory: a tiny ONNX graph of one ``Gather`` (axis 0) per
cache tensor, all sharing one index input, runs on the same provider with IO binding, reading the past OrtValues
where they are and leaving the reordered ones on the device; only the (R,) row indices go in from the host.

    past_key_values.0.key (B, nh, P, hs) ──Gather(axis 0, rows (R,))──► reordered.0 (R, nh, P, hs)
    …                                       one per cache tensor, one session run

The same graph runs on the CPU provider for a cache that ONNX Runtime allocated itself (the CPU path with the
runtime's own buffers reorders in numpy instead, :meth:`gpt2_onnx_runtimes.kv_buffers.KvBuffers.reorder`).
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING

import numpy as np

from gpt2_onnx_runtimes.ort_sessions import onnxruntime_errors
from gpt2_onnx_runtimes.providers import check_session_provider, provider_list

if TYPE_CHECKING:
    import onnxruntime as ort

__all__ = ["gather_graph", "reorder_past"]

ROWS = "rows"
_ELEMENT_TYPES = {"tensor(float)": 1, "tensor(float16)": 10}  # ONNX TensorProto codes
_lock = threading.Lock()


def gather_graph(count: int, element_type: int) -> bytes:
    """The serialized graph: ``count`` tensors in (``past.{i}``), each gathered along axis 0 by ``rows``."""
    from onnx import TensorProto, helper

    shape = ["batch", "n_head", "past", "head_dim"]
    inputs = [helper.make_tensor_value_info(f"past.{i}", element_type, shape) for i in range(count)]
    inputs.append(helper.make_tensor_value_info(ROWS, TensorProto.INT64, ["rows"]))
    outputs = [
        helper.make_tensor_value_info(f"reordered.{i}", element_type, ["rows", *shape[1:]]) for i in range(count)
    ]
    nodes = [
        helper.make_node("Gather", [f"past.{i}", ROWS], [f"reordered.{i}"], axis=0, name=f"/reorder/{i}/Gather")
        for i in range(count)
    ]
    graph = helper.make_graph(nodes, "kv_reorder", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every ONNX Runtime the exports support (1.15+)
    return bytes(model.SerializeToString())


@functools.lru_cache(maxsize=8)
def _session(provider: str, device_id: int, count: int, element_type: int) -> ort.InferenceSession:
    """One small session per provider, device, cache layout and dtype, created once per process."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    provider_options = [{"device_id": str(device_id)}] if provider == "cuda" else None
    session = ort.InferenceSession(
        gather_graph(count, element_type), options, providers=provider_list(provider), provider_options=provider_options
    )
    check_session_provider(session.get_providers(), provider, "the KV-cache reorder graph")
    return session


def reorder_past(past: list[ort.OrtValue], rows: np.ndarray, provider: str, device_id: int) -> list[ort.OrtValue]:
    """``past`` with its rows reordered (row r ← row ``rows[r]``), computed and left on ``provider``'s device."""
    element_type = _ELEMENT_TYPES[past[0].data_type()]
    with _lock, onnxruntime_errors("the KV-cache reorder graph"):  # one build even when two threads ask at once
        session = _session(provider, device_id, len(past), element_type)
    binding = session.io_binding()
    for index, value in enumerate(past):
        binding.bind_ortvalue_input(f"past.{index}", value)  # (B, nh, P, hs), where it already is
    binding.bind_cpu_input(ROWS, np.ascontiguousarray(rows, dtype=np.int64))  # (R,)
    for index in range(len(past)):
        binding.bind_output(f"reordered.{index}", provider, device_id)  # (R, nh, P, hs), on the device
    with onnxruntime_errors("the KV-cache reorder graph"):
        session.run_with_iobinding(binding)
    return list(binding.get_outputs())

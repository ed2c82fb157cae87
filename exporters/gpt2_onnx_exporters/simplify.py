"""``--simplify``: onnxsim over a graph, keeping the weights in the shared file and the tie intact.

onnxsim works on in-memory protos, so the weights are loaded into a copy, simplified, then pointed back at the
shared file. Any large initializer onnxsim creates (a folded copy such as Transpose(wte)) is refused: it would
store weights twice.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import onnx
from onnx import external_data_helper

from gpt2_onnx_core.errors import ExportError, first_line
from gpt2_onnx_exporters.weights import MIN_EXTERNAL_BYTES, WrittenWeights

__all__ = ["simplify_graph"]

log = logging.getLogger(__name__)

_PROTOBUF_LIMIT = 2**31 - 1
_HEADROOM = 64 << 20  # the graph itself besides the weights


def _tensor_bytes(tensor: onnx.TensorProto) -> bytes:
    if tensor.HasField("raw_data"):
        return tensor.raw_data
    return onnx.numpy_helper.to_array(tensor).tobytes()


def _point_at_shared_file(model: onnx.ModelProto, weights: WrittenWeights) -> onnx.ModelProto:
    for tensor in model.graph.initializer:
        data = _tensor_bytes(tensor)
        if len(data) < MIN_EXTERNAL_BYTES:
            continue
        entry = weights.entries.get(tensor.name)
        if entry is None or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise ExportError(
                f"simplify created a new weight tensor '{tensor.name}' {list(tensor.dims)}: "
                "the weights would be stored twice; export without --simplify"
            )
        tensor.ClearField("raw_data")
        del tensor.float_data[:]
        tensor.data_location = onnx.TensorProto.EXTERNAL
        del tensor.external_data[:]
        for key, value in (
            ("location", weights.file_name),
            ("offset", entry.offset),
            ("length", entry.length),
        ):
            tensor.external_data.add(key=key, value=str(value))
    return model


def simplify_graph(model: onnx.ModelProto, folder: Path, weights: WrittenWeights) -> onnx.ModelProto:
    """Run onnxsim on ``model`` (whose weights lie in ``folder``) and return it with external weights again."""
    import onnxsim

    if weights.size + _HEADROOM > _PROTOBUF_LIMIT:
        raise ExportError(
            "--simplify needs the whole graph in one protobuf (< 2 GB) but the weights are "
            f"{weights.size / 2**30:.1f} GiB; export without --simplify"
        )
    full = onnx.ModelProto()
    full.CopyFrom(model)
    external_data_helper.load_external_data_for_model(full, str(folder))
    metadata = list(full.metadata_props)
    try:
        simplified, ok = onnxsim.simplify(full, check_n=0, skip_shape_inference=False)
    except Exception as exc:  # onnxsim raises RuntimeError, ValueError and its own types alike
        raise ExportError(f"onnxsim failed: {first_line(exc)}") from exc
    if not ok:
        raise ExportError("onnxsim could not validate the simplified graph")
    del simplified.metadata_props[:]
    simplified.metadata_props.extend(metadata)
    simplified.ir_version = model.ir_version
    return _point_at_shared_file(simplified, weights)

"""A transformers.js model folder made from one or more exports (``gpt2-onnx transformers-js``).

transformers.js (v3/v4) loads a decoder-only model as one session named ``model``: ``onnx/model{suffix}.onnx`` with
its external data in ``onnx/model{suffix}.onnx_data``, where the suffix names the dtype (``''`` fp32, ``_fp16``,
``_quantized`` q8, ``_q4``). Its decoder forward feeds ``input_ids``, ``attention_mask``, ``position_ids`` and
``past_key_values.{i}.{key,value}`` and reads ``logits`` and ``present.{i}.*``: our decode graph's contract, which
accepts an empty past, so it serves as the merged decoder as it is (no ``use_cache_branch`` input is needed; the
library feeds one only when the graph declares it). Two things are rewritten in the copy, never in the export:

- every external-data ``location`` becomes ``model{suffix}.onnx_data``: in the browser transformers.js hands ONNX
  Runtime the data under that name, and ONNX Runtime matches it against the graph's locations;
- the batch dimension's name becomes ``batch_size``: for the first call transformers.js builds an empty past from
  the graph's input shapes, resolving ``batch_size`` to the batch and any other name to 0 (a past of batch 0).

``config.json`` gains ``transformers.js_config`` with ``use_external_data_format`` per file, so the library fetches
the data files (it does not read the graphs' locations).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from gpt2_onnx.app.output_folder import StagedFolder
from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_core.integrity import IntegrityCheck, check_file_hashes
from gpt2_onnx_core.manifest import read_manifest
from gpt2_onnx_core.names import BATCH, DECODE, GENERATION_CONFIG_FILE, MODEL_CONFIG_FILE, TOKENIZER_FILES

__all__ = ["DTYPE_OF_PRECISION", "TransformersJsModel", "transformers_js_folder"]

log = logging.getLogger(__name__)

# Our precision -> (transformers.js dtype, its file-name suffix). int8 and int4 are weight-only MatMulNBits blocks,
# which is what transformers.js's q8 ("_quantized") and q4 ("_q4") files hold for its own exports too.
DTYPE_OF_PRECISION: dict[str, tuple[str, str]] = {
    "float32": ("fp32", ""),
    "float16": ("fp16", "_fp16"),
    "int8": ("q8", "_quantized"),
    "int4": ("q4", "_q4"),
}
TRANSFORMERS_JS_BATCH = "batch_size"  # the one dimension name transformers.js resolves when it builds an empty past
ONNX_FOLDER = "onnx"


@dataclass(frozen=True)
class TransformersJsModel:
    folder: Path
    dtypes: dict[str, str]  # transformers.js dtype -> its model file, relative to the folder


def transformers_js_folder(exports: list[Path], output: Path, force: bool = False) -> TransformersJsModel:
    """Write ``output`` from ``exports`` (one per precision, of one source model), each checked against its
    manifest first. The first export's precision becomes the folder's default dtype."""
    if not exports:
        raise InvalidInputError("give at least one export folder")
    manifests = [read_manifest(folder) for folder in exports]
    for folder, manifest in zip(exports, manifests, strict=True):
        check_file_hashes(folder, manifest, IntegrityCheck())
    _check_same_model(exports, manifests)
    dtypes: dict[str, str] = {}
    with StagedFolder(output, force) as staged:
        (staged.path / ONNX_FOLDER).mkdir()
        for folder, manifest in zip(exports, manifests, strict=True):
            dtype, suffix = _dtype(folder, manifest.precision)
            if dtype in dtypes:
                raise InvalidInputError(f"two exports have precision {manifest.precision}; give one of each")
            dtypes[dtype] = _write_graph(
                folder, manifest.graphs[DECODE].file, manifest.weights_file, staged.path, suffix
            )
        first = exports[0]
        for name in (*TOKENIZER_FILES, GENERATION_CONFIG_FILE):
            shutil.copyfile(first / name, staged.path / name)
        config = json.loads((first / MODEL_CONFIG_FILE).read_text(encoding="utf-8"))
        (staged.path / MODEL_CONFIG_FILE).write_text(json.dumps(_config(config, dtypes), indent=2) + "\n", "utf-8")
        staged.commit()
    log.info("wrote the transformers.js folder %s (%s)", output, ", ".join(dtypes))
    return TransformersJsModel(output, dtypes)


def _dtype(folder: Path, precision: str) -> tuple[str, str]:
    if precision not in DTYPE_OF_PRECISION:
        raise InvalidInputError(f"'{folder}' has precision {precision}, which transformers.js has no file name for")
    return DTYPE_OF_PRECISION[precision]


def _check_same_model(exports: list[Path], manifests: list[Any]) -> None:
    sources = {(m.model.get("source"), m.dims) for m in manifests}
    if len(sources) > 1:
        raise InvalidInputError(f"the exports {', '.join(map(str, exports))} come from different models")


def _write_graph(folder: Path, graph_file: str, weights_file: str, out: Path, suffix: str) -> str:
    """Copy the decode graph as ``onnx/model{suffix}.onnx`` and its weights as ``..._data``; return the graph's path."""
    name = f"model{suffix}.onnx"
    model = transformers_js_graph(onnx.load(folder / graph_file, load_external_data=False), f"{name}_data")
    onnx.save(model, out / ONNX_FOLDER / name)
    shutil.copyfile(folder / weights_file, out / ONNX_FOLDER / f"{name}_data")
    return f"{ONNX_FOLDER}/{name}"


def transformers_js_graph(model: onnx.ModelProto, data_file: str) -> onnx.ModelProto:
    """The graph with its external data at ``data_file`` and its batch dimension named ``batch_size`` (a copy)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for tensor in out.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = data_file
    for value in [*out.graph.input, *out.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param == BATCH:
                dim.dim_param = TRANSFORMERS_JS_BATCH
    return out


def _config(config: dict[str, Any], dtypes: dict[str, str]) -> dict[str, Any]:
    files = {Path(path).name: 1 for path in dtypes.values()}  # one external-data chunk per model file
    return {**config, "transformers.js_config": {"dtype": next(iter(dtypes)), "use_external_data_format": files}}

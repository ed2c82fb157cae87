"""Which ONNX Runtime releases run what: the oldest release per opset, per variant and for the merged session layout.

All measured by scripts/ort_matrix.py (``--all`` for every release; docs/compatibility.md), which checks each
minimum from both sides: the release at the minimum passes, the one below fails. 1.15.0 is the oldest release with
Python 3.11 wheels, so nothing older was tried.
"""

from __future__ import annotations

from gpt2_onnx_core.precisions import Precision
from gpt2_onnx_core.versions import version_tuple

__all__ = [
    "IN_PLACE_KV_MIN_ONNXRUNTIME",
    "MERGED_LAYOUT_MIN_ONNXRUNTIME",
    "OPSET_MIN_ONNXRUNTIME",
    "OPTIMIZE_MIN_ONNXRUNTIME",
    "min_onnxruntime_for",
]

# The fp32 export per opset: 1.15 lacks Shape-19, 1.16 refuses opset 20 ("under development"), 1.17 refuses IR 10,
# which opset 21 needs.
OPSET_MIN_ONNXRUNTIME = {17: "1.15.0", 18: "1.15.0", 19: "1.16.0", 20: "1.17.0", 21: "1.18.0"}
# --optimize's MultiHeadAttention fails at run time before 1.20.0.
OPTIMIZE_MIN_ONNXRUNTIME = "1.20.0"
# The merged layout loads its generation graph from memory with the weights file beside it
# (session.model_external_initializers_file_folder_path); older releases cannot find the weights.
MERGED_LAYOUT_MIN_ONNXRUNTIME = "1.21.0"
# The in-place KV cache (RuntimeOptions.in_place_kv): the CPU's GroupQueryAttention with an attention bias input,
# which left-padded batches need.
IN_PLACE_KV_MIN_ONNXRUNTIME = "1.22.0"


def min_onnxruntime_for(opset: int, optimize: bool, precision: Precision) -> str:
    """The oldest ONNX Runtime that loads the export: the opset's minimum, raised by the variant's operators."""
    needs = [OPSET_MIN_ONNXRUNTIME[opset], precision.min_onnxruntime, OPTIMIZE_MIN_ONNXRUNTIME if optimize else "0"]
    return max(needs, key=version_tuple)

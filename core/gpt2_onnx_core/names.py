"""One source of truth for file names, graph input/output names and dynamic dimension names.

The tensor names follow the convention that Optimum, transformers.js and onnxruntime-genai share:
``past_key_values.{i}.key`` goes in, ``present.{i}.key`` comes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from gpt2_onnx_core.config import ModelDims

__all__ = [
    "ATTENTION_MASK",
    "BATCH",
    "CONTRIB_DOMAIN",
    "DECODE",
    "EMBEDDING",
    "GENAI_CONFIG_FILE",
    "GENERATION_CONFIG_FILE",
    "GOLDEN_FILE",
    "GRAPHS",
    "GRAPH_FILES",
    "INPUT_IDS",
    "KV_KINDS",
    "LOGITS",
    "MANIFEST_FILE",
    "MODEL_CONFIG_FILE",
    "PAST_PREFIX",
    "PAST_SEQUENCE",
    "POSITION_IDS",
    "POSITION_IDS_RULE",
    "PREFILL",
    "SEQUENCE",
    "TOKENIZER_CONFIG_FILE",
    "TOKENIZER_FILE",
    "TOKENIZER_FILES",
    "TOTAL_SEQUENCE",
    "WEIGHTS_FILE",
    "GraphKind",
    "KvDtype",
    "KvKind",
    "TensorDtype",
    "TensorSpec",
    "graph_inputs",
    "graph_outputs",
    "past_name",
    "past_name_pattern",
    "past_names",
    "present_name",
    "present_name_pattern",
    "present_names",
]

GraphKind = Literal["prefill", "decode"]
KvKind = Literal["key", "value"]
TensorDtype = Literal["int64", "float32", "float16"]  # element types of the graphs' inputs and outputs
KvDtype = Literal["float32", "float16"]  # the KV cache's

PREFILL: GraphKind = "prefill"
DECODE: GraphKind = "decode"
GRAPHS: tuple[GraphKind, ...] = (PREFILL, DECODE)
GRAPH_FILES: dict[GraphKind, str] = {PREFILL: "prefill.onnx", DECODE: "decode.onnx"}
WEIGHTS_FILE = "model.onnx.data"  # the one external-data file both graphs read
CONTRIB_DOMAIN = "com.microsoft"  # ONNX Runtime's contrib operators' domain (MatMulNBits, GroupQueryAttention, ...)
MANIFEST_FILE = "manifest.json"
GOLDEN_FILE = "golden.json"
GENAI_CONFIG_FILE = "genai_config.json"
TOKENIZER_FILE = "tokenizer.json"  # what the runtime tokenizes with (tokenizers' format)
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_FILES = (TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, "vocab.json", "merges.txt")  # all an export ships
MODEL_CONFIG_FILE = "config.json"  # the checkpoint's own configuration, as transformers writes it
GENERATION_CONFIG_FILE = "generation_config.json"
# The token embedding's initializer: the embedding Gather and, when tied, the head's Gemm read it (the checkpoint's
# own parameter name, which tracing keeps).
EMBEDDING = "transformer.wte.weight"

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
POSITION_IDS = "position_ids"
LOGITS = "logits"
KV_KINDS: tuple[KvKind, ...] = ("key", "value")

# Dynamic dimensions. In decode, total_sequence = past_sequence + sequence.
BATCH = "batch"
SEQUENCE = "sequence"  # prompt tokens in prefill, new tokens in decode
PAST_SEQUENCE = "past_sequence"
TOTAL_SEQUENCE = "total_sequence"

POSITION_IDS_RULE = (
    "position_ids = cumsum(attention_mask, axis=-1) - 1 over the whole sequence (past and new tokens); "
    "left padding: padded positions have attention_mask 0 and their position_ids are ignored (feed 0)"
)


def past_name_pattern(kind: KvKind) -> str:
    """printf pattern of the past KV inputs over layers, for onnxruntime-genai: ``past_key_values.%d.key``."""
    return f"past_key_values.%d.{kind}"


def present_name_pattern(kind: KvKind) -> str:
    """printf pattern of the KV outputs over layers: ``present.%d.value``."""
    return f"present.%d.{kind}"


PAST_PREFIX = "past_key_values."  # every past input's name starts so


def past_name(layer: int, kind: KvKind) -> str:
    """Name of a decode graph's past KV input, e.g. ``past_key_values.0.key``."""
    return past_name_pattern(kind) % layer


def present_name(layer: int, kind: KvKind) -> str:
    """Name of a graph's KV output, e.g. ``present.0.value``."""
    return present_name_pattern(kind) % layer


def past_names(n_layer: int) -> list[str]:
    """Every past input's name in (layer, key/value) order: the order the graphs list them and the cache keeps."""
    return [past_name(layer, kind) for layer in range(n_layer) for kind in KV_KINDS]


def present_names(n_layer: int) -> list[str]:
    """Every KV output's name in (layer, key/value) order."""
    return [present_name(layer, kind) for layer in range(n_layer) for kind in KV_KINDS]


Dim = str | int


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: its name, element type, dimensions (names or sizes) and meaning."""

    name: str
    dtype: TensorDtype
    dims: tuple[Dim, ...]
    meaning: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dtype": self.dtype, "dims": list(self.dims), "meaning": self.meaning}


def _token_inputs(kind: GraphKind) -> list[TensorSpec]:
    mask_len = SEQUENCE if kind == PREFILL else TOTAL_SEQUENCE
    return [
        TensorSpec(INPUT_IDS, "int64", (BATCH, SEQUENCE), "token ids, left-padded"),
        TensorSpec(ATTENTION_MASK, "int64", (BATCH, mask_len), "1 for real tokens, 0 for padding"),
        TensorSpec(POSITION_IDS, "int64", (BATCH, SEQUENCE), POSITION_IDS_RULE),
    ]


def graph_inputs(kind: GraphKind, dims: ModelDims, kv_dtype: KvDtype = "float32") -> list[TensorSpec]:
    """The inputs of a graph, in order."""
    specs = _token_inputs(kind)
    if kind == DECODE:
        for layer in range(dims.n_layer):
            for kv in KV_KINDS:
                specs.append(
                    TensorSpec(
                        past_name(layer, kv),
                        kv_dtype,
                        (BATCH, dims.n_head, PAST_SEQUENCE, dims.head_dim),
                        f"layer {layer} attention {kv}s of the earlier tokens (past_sequence may be 0)",
                    )
                )
    return specs


def graph_outputs(
    kind: GraphKind, dims: ModelDims, all_logits: bool, kv_dtype: KvDtype = "float32"
) -> list[TensorSpec]:
    """The outputs of a graph, in order. Prefill returns the last position's logits unless ``all_logits``."""
    logits_len: Dim = SEQUENCE if (kind == DECODE or all_logits) else 1
    kv_len = SEQUENCE if kind == PREFILL else TOTAL_SEQUENCE
    specs = [TensorSpec(LOGITS, "float32", (BATCH, logits_len, dims.vocab_size), "next-token logits")]
    for layer in range(dims.n_layer):
        for kv in KV_KINDS:
            specs.append(
                TensorSpec(
                    present_name(layer, kv),
                    kv_dtype,
                    (BATCH, dims.n_head, kv_len, dims.head_dim),
                    f"layer {layer} attention {kv}s of all tokens so far",
                )
            )
    return specs

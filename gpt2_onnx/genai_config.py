"""``genai_config.json``: lets onnxruntime-genai run an export folder as it is.

onnxruntime-genai (the generate() API for C, C++, C#, Java and Python) reads this file, ``tokenizer.json`` and
``tokenizer_config.json`` from the folder. What it needs, measured with onnxruntime-genai 0.18.0:

- model type ``"decoder"``, its generic decoder-only path, which takes per-layer KV names such as ours
  (``past_key_values.%d.key`` → ``present.%d.key``); type ``"gpt2"`` wants one stacked ``past_%d`` tensor;
- one graph, which it also runs for the prompt with an empty past (past_sequence = 0): ``decode.onnx``, whose
  logits cover every new position; ``prefill.onnx`` (last-position logits only) is for our own KV loops;
- ``attention_mask`` and ``position_ids`` of one integer type (both int64 here), ``context_length`` > 0, and
  ``past_present_share_buffer`` false, because our past and present tensors grow by one position per step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpt2_onnx.errors import ManifestError
from gpt2_onnx.manifest import Manifest
from gpt2_onnx.names import (
    ATTENTION_MASK,
    DECODE,
    GENAI_CONFIG_FILE,
    INPUT_IDS,
    LOGITS,
    POSITION_IDS,
    past_name_pattern,
    past_names,
    present_name_pattern,
    present_names,
)

__all__ = ["GENAI_MODEL_TYPE", "genai_config", "write_genai_config"]

GENAI_MODEL_TYPE = "decoder"


def _special_tokens(manifest: Manifest) -> dict[str, int]:
    """bos/eos/pad ids; GPT-2 has no pad token, so end-of-text pads (as transformers' generate does)."""
    eos = manifest.tokens.get("eos_token_id")
    if eos is None:
        raise ManifestError("the manifest names no eos_token_id; onnxruntime-genai needs one to stop")
    bos = manifest.tokens.get("bos_token_id")
    pad = manifest.tokens.get("pad_token_id")
    return {
        "bos_token_id": int(eos if bos is None else bos),
        "eos_token_id": int(eos),
        "pad_token_id": int(eos if pad is None else pad),
    }


def _check_decode_names(manifest: Manifest) -> None:
    """The names genai will bind must be the decode graph's, as the manifest lists them."""
    record = manifest.graphs[DECODE]
    inputs = {spec.name for spec in record.inputs}
    outputs = {spec.name for spec in record.outputs}
    wanted_inputs = {INPUT_IDS, ATTENTION_MASK, POSITION_IDS, *past_names(manifest.dims.n_layer)}
    wanted_outputs = {LOGITS, *present_names(manifest.dims.n_layer)}
    missing = sorted((wanted_inputs - inputs) | (wanted_outputs - outputs))
    if missing:
        raise ManifestError(f"the decode graph lacks what onnxruntime-genai binds: {', '.join(missing)}")


def genai_config(manifest: Manifest) -> dict[str, Any]:
    """The ``genai_config.json`` content for an export described by ``manifest``."""
    _check_decode_names(manifest)
    dims = manifest.dims
    decoder = {
        "filename": manifest.graphs[DECODE].file,
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},  # [] = CPU
        "head_size": dims.head_dim,
        "hidden_size": dims.n_embd,
        "num_attention_heads": dims.n_head,
        "num_key_value_heads": dims.n_head,  # GPT-2 has no grouped-query attention
        "num_hidden_layers": dims.n_layer,
        "inputs": {
            "input_ids": INPUT_IDS,
            "attention_mask": ATTENTION_MASK,
            "position_ids": POSITION_IDS,
            "past_key_names": past_name_pattern("key"),
            "past_value_names": past_name_pattern("value"),
        },
        "outputs": {
            "logits": LOGITS,
            "present_key_names": present_name_pattern("key"),
            "present_value_names": present_name_pattern("value"),
        },
    }
    return {
        "model": {
            "type": GENAI_MODEL_TYPE,
            **_special_tokens(manifest),
            "context_length": dims.n_positions,  # the position embedding's length bounds prompt + output
            "vocab_size": dims.vocab_size,
            "decoder": decoder,
        },
        "search": {
            # Greedy by default, like transformers' generate for GPT-2; callers change it per request.
            "do_sample": False,
            "num_beams": 1,
            "max_length": dims.n_positions,
            "past_present_share_buffer": False,  # past (B, nh, P, hs) → present (B, nh, P + N, hs) grows
        },
    }


def write_genai_config(folder: Path, manifest: Manifest) -> str:
    """Write ``genai_config.json`` into ``folder``; return its name."""
    text = json.dumps(genai_config(manifest), indent=2) + "\n"
    (folder / GENAI_CONFIG_FILE).write_text(text, encoding="utf-8")
    return GENAI_CONFIG_FILE

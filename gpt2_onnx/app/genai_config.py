"""``genai_config.json``: lets onnxruntime-genai run an export folder as it is.

onnxruntime-genai (the generate() API for C, C++, C#, Java and Python) reads this file, ``tokenizer.json`` and
``tokenizer_config.json`` from the folder. What it needs, measured with onnxruntime-genai 0.18.0:

- model type ``"decoder"``, its generic decoder-only path, which takes per-layer KV names such as ours
  (``past_key_values.%d.key`` → ``present.%d.key``); type ``"gpt2"`` wants one stacked ``past_%d`` tensor;
- one graph, which it also runs for the prompt with an empty past (past_sequence = 0): ``decode.onnx``, whose
  logits cover every new position; ``prefill.onnx`` (last-position logits only) is for our own KV loops;
- ``attention_mask`` and ``position_ids`` of one integer type (both int64 here), ``context_length`` > 0, and
  ``past_present_share_buffer`` false, because our past and present tensors grow by one position per step.

Its ``search`` section carries the checkpoint's own defaults from ``generation_config.json`` where genai has the
same option with the same meaning (:data:`GENAI_SEARCH`): ``do_sample``, ``num_beams``, ``num_return_sequences``,
``length_penalty``, ``early_stopping`` (True/False; genai has no "never"), ``no_repeat_ngram_size``,
``repetition_penalty``, ``temperature``, ``top_k``, ``top_p``. genai counts ``max_length`` and ``min_length`` over
prompt and output together, so ``max_new_tokens`` and ``min_new_tokens`` have no equivalent there; nor do
``bad_words_ids``, ``forced_eos_token_id`` and ``min_p``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.manifest import Manifest
from gpt2_onnx_core.names import (
    ATTENTION_MASK,
    DECODE,
    GENAI_CONFIG_FILE,
    GENERATION_CONFIG_FILE,
    INPUT_IDS,
    LOGITS,
    POSITION_IDS,
    past_name_pattern,
    past_names,
    present_name_pattern,
    present_names,
)

__all__ = [
    "GENAI_MODEL_TYPE",
    "GENAI_SEARCH",
    "genai_config",
    "read_generation_config",
    "search_defaults",
    "write_genai_config",
]

GENAI_MODEL_TYPE = "decoder"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# generation_config.json keys that genai's "search" section takes with the same meaning, and the values it takes.
GENAI_SEARCH: dict[str, Callable[[Any], bool]] = {
    "do_sample": _is_bool,
    "num_beams": _is_int,
    "num_return_sequences": _is_int,
    "length_penalty": _is_number,
    "early_stopping": _is_bool,  # genai's is a boolean: transformers' "never" stays out
    "no_repeat_ngram_size": _is_int,
    "repetition_penalty": _is_number,
    "temperature": _is_number,
    "top_k": _is_int,
    "top_p": _is_number,
}


def search_defaults(generation: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint's ``generation_config.json`` values that genai's ``search`` section can carry."""
    return {key: generation[key] for key, fits in GENAI_SEARCH.items() if key in generation and fits(generation[key])}


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


def genai_config(manifest: Manifest, generation: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``genai_config.json`` content for an export described by ``manifest`` whose checkpoint's
    ``generation_config.json`` holds ``generation``."""
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
            # Greedy unless the checkpoint says otherwise, like transformers' generate; callers change it per request.
            "do_sample": False,
            "num_beams": 1,
            **search_defaults(generation or {}),
            "max_length": dims.n_positions,
            "past_present_share_buffer": False,  # past (B, nh, P, hs) → present (B, nh, P + N, hs) grows
        },
    }


def read_generation_config(folder: Path) -> dict[str, Any]:
    """The checkpoint's ``generation_config.json`` in ``folder`` ({} when there is none)."""
    path = folder / GENERATION_CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def write_genai_config(folder: Path, manifest: Manifest) -> str:
    """Write ``genai_config.json`` into ``folder`` (with the search defaults of its ``generation_config.json``);
    return its name."""
    text = json.dumps(genai_config(manifest, read_generation_config(folder)), indent=2) + "\n"
    (folder / GENAI_CONFIG_FILE).write_text(text, encoding="utf-8")
    return GENAI_CONFIG_FILE

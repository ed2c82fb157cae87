"""genai_config.json: written by export, listed in the manifest, derived from the manifest alone.

These tests need no onnxruntime-genai; tests/test_genai.py runs it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpt2_onnx.app.genai_config import genai_config, read_generation_config, search_defaults
from gpt2_onnx_core.errors import ManifestError
from gpt2_onnx_core.hashing import sha256_file
from gpt2_onnx_core.manifest import GraphRecord, read_manifest
from gpt2_onnx_core.names import DECODE, GENAI_CONFIG_FILE, GRAPH_FILES


def test_export_writes_genai_config_listed_in_manifest(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    path = tiny_export / GENAI_CONFIG_FILE
    assert manifest.files[GENAI_CONFIG_FILE].sha256 == sha256_file(path)
    assert json.loads(path.read_text(encoding="utf-8")) == genai_config(manifest, read_generation_config(tiny_export))


def test_search_section_carries_the_checkpoints_defaults_genai_understands(tiny_export: Path) -> None:
    generation = {
        "num_beams": 4,
        "num_return_sequences": 2,
        "length_penalty": 0.5,
        "early_stopping": "never",  # genai's early_stopping is a boolean: left out
        "no_repeat_ngram_size": 3,
        "max_new_tokens": 20,  # genai counts max_length over prompt and output: left out
        "bad_words_ids": [[1]],
        "top_k": True,  # not an integer: left out
    }
    expected = {"num_beams": 4, "num_return_sequences": 2, "length_penalty": 0.5, "no_repeat_ngram_size": 3}
    assert search_defaults(generation) == expected
    search = genai_config(read_manifest(tiny_export), generation)["search"]
    assert {k: search[k] for k in expected} == expected and search["do_sample"] is False
    assert search["max_length"] == read_manifest(tiny_export).dims.n_positions


def test_genai_config_describes_the_decode_graph(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    config = genai_config(manifest)
    model, decoder = config["model"], config["model"]["decoder"]
    dims = manifest.dims
    assert model["type"] == "decoder"
    assert decoder["filename"] == GRAPH_FILES[DECODE]
    assert (tiny_export / decoder["filename"]).is_file()
    assert decoder["num_hidden_layers"] == dims.n_layer
    assert decoder["num_attention_heads"] == decoder["num_key_value_heads"] == dims.n_head
    assert decoder["head_size"] * dims.n_head == decoder["hidden_size"] == dims.n_embd
    assert model["vocab_size"] == dims.vocab_size
    assert model["context_length"] == config["search"]["max_length"] == dims.n_positions
    assert config["search"]["past_present_share_buffer"] is False
    decode_inputs = {spec.name for spec in manifest.graphs[DECODE].inputs}
    decode_outputs = {spec.name for spec in manifest.graphs[DECODE].outputs}
    for layer in range(dims.n_layer):
        assert decoder["inputs"]["past_key_names"] % layer in decode_inputs
        assert decoder["inputs"]["past_value_names"] % layer in decode_inputs
        assert decoder["outputs"]["present_key_names"] % layer in decode_outputs
        assert decoder["outputs"]["present_value_names"] % layer in decode_outputs


def test_missing_pad_and_bos_fall_back_to_end_of_text(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    eos = manifest.tokens["eos_token_id"]
    assert eos is not None
    bare = replace(manifest, tokens={"eos_token_id": eos, "bos_token_id": None, "pad_token_id": None})
    model = genai_config(bare)["model"]
    assert model["bos_token_id"] == model["pad_token_id"] == model["eos_token_id"] == eos


def test_no_end_of_text_is_refused(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    with pytest.raises(ManifestError, match="eos_token_id"):
        genai_config(replace(manifest, tokens={"eos_token_id": None}))


def test_decode_graph_without_kv_names_is_refused(tiny_export: Path) -> None:
    manifest = read_manifest(tiny_export)
    record = manifest.graphs[DECODE]
    renamed = tuple(replace(spec, name=spec.name.replace("past_key_values", "past")) for spec in record.inputs)
    graphs = {**manifest.graphs, DECODE: GraphRecord(record.file, renamed, record.outputs)}
    with pytest.raises(ManifestError, match=r"past_key_values\.0\.key"):
        genai_config(replace(manifest, graphs=graphs))

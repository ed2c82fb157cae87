"""The checkpoint's generation_config.json supplies the defaults, explicit options override them, and both the API
and ``run`` say which values were used; transformers' ``generate`` with the same checkpoint and no options gives
the same tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpt2_onnx_core.errors import InvalidInputError, ManifestError
from gpt2_onnx_runtimes import Gpt2Onnx
from gpt2_onnx_runtimes.generation_defaults import CheckpointDefaults
from tests.conftest import export_checkpoint, save_checkpoint
from tests.generate_reference import assert_equal_results, transformers_generate
from tests.helpers import invoke

CHECKPOINT_DEFAULTS = {
    "num_beams": 3,
    "num_return_sequences": 2,
    "no_repeat_ngram_size": 2,
    "max_new_tokens": 7,
    "length_penalty": 0.8,
    "early_stopping": True,
    "temperature": 0.7,  # read only when sampling: unused here
    "typical_p": 0.9,  # not applied by gpt2-onnx
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = save_checkpoint(tmp_path_factory.mktemp("defaults-checkpoint"), seed=1, initializer_range=0.2)
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, **CHECKPOINT_DEFAULTS}))
    return folder


@pytest.fixture(scope="module")
def export(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # check=True: the export's own greedy parity check must stay plain greedy whatever the checkpoint asks for
    return export_checkpoint(checkpoint, tmp_path_factory.mktemp("defaults-export") / "tiny", share_trace=True)


@pytest.fixture(scope="module")
def model(export: Path) -> Gpt2Onnx:
    return Gpt2Onnx.load(export)


def test_the_export_carries_the_checkpoints_defaults(model: Gpt2Onnx) -> None:
    defaults = model.checkpoint_defaults
    assert {k: defaults.values[k] for k in CHECKPOINT_DEFAULTS if k != "typical_p"} == {
        k: v for k, v in CHECKPOINT_DEFAULTS.items() if k != "typical_p"
    }
    assert defaults.not_applied == {"typical_p": "0.9 is not applied"}


def test_no_options_equal_transformers_generate_with_the_same_checkpoint(model: Gpt2Onnx, checkpoint: Path) -> None:
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel.from_pretrained(checkpoint, attn_implementation="eager").eval()
    prompts = [model.encode(text) for text in ("The quick brown fox", "Hello")]
    found = model.generate_ids(prompts)  # nothing given: the checkpoint's beam search, 2 sequences of 7 tokens
    assert len(found) == 4 and all(len(r.token_ids) <= 7 for r in found)
    assert_equal_results(found, transformers_generate(hf, prompts, 50256))  # transformers reads the same file


def test_given_options_override_and_unused_ones_are_named(model: Gpt2Onnx) -> None:
    resolved = model.resolve_options(num_beams=1, num_return_sequences=1, max_new_tokens=4)
    assert resolved.options.mode == "greedy" and resolved.options.max_new_tokens == 4
    assert resolved.options.no_repeat_ngram_size == 2 and resolved.from_checkpoint() == ["no_repeat_ngram_size"]
    assert resolved.unused == {
        "length_penalty": "read only by beam search",
        "early_stopping": "read only by beam search",
        "temperature": "read only when sampling",
    }
    sampled = model.resolve_options(num_beams=1, num_return_sequences=1, do_sample=True, seed=1)
    assert sampled.options.temperature == 0.7 and "temperature" in sampled.from_checkpoint()


def test_checkpoint_values_that_do_not_fit_are_refused_in_one_line() -> None:
    defaults = CheckpointDefaults.from_dict({"do_sample": True, "num_beams": 4})
    with pytest.raises(InvalidInputError, match=r"beam sampling .*generation_config.json: do_sample True, num_beams 4"):
        defaults.resolve()
    assert defaults.resolve(num_beams=1).options.mode == "sample"
    with pytest.raises(ManifestError, match="num_beams must be an integer, got 'four'"):
        CheckpointDefaults.from_dict({"num_beams": "four"})
    with pytest.raises(InvalidInputError, match="unknown generation option 'beams'"):
        defaults.resolve(beams=2)
    assert CheckpointDefaults.from_dict({"max_length": 64}).not_applied == {
        "max_length": "64 is not applied: give max_new_tokens (new tokens only)"
    }


def test_run_uses_and_states_the_checkpoints_defaults(export: Path) -> None:
    result = invoke("run", str(export), "-p", "Hello", "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["index"], line["sequence"]) for line in lines] == [(0, 0), (0, 1)]
    assert lines[0]["options"]["num_beams"] == 3 and lines[0]["options"]["max_new_tokens"] == 7
    assert set(lines[0]["from_checkpoint"]) == {
        "num_beams",
        "num_return_sequences",
        "no_repeat_ngram_size",
        "max_new_tokens",
        "length_penalty",
        "early_stopping",
    }
    assert lines[0]["checkpoint_unused"] == {"temperature": "read only when sampling"}
    assert lines[0]["checkpoint_not_applied"] == {"typical_p": "0.9 is not applied"}
    assert "Using the checkpoint's generation defaults: --max-new-tokens 7, --num-beams 3" in result.stderr
    assert "typical_p is left out (0.9 is not applied)" in result.stderr


def test_run_flags_override_the_checkpoint(export: Path) -> None:
    result = invoke("run", str(export), "-p", "Hello", "--json", "--num-beams", "1", "--num-return-sequences", "1")
    assert result.exit_code == 0, result.output
    [line] = [json.loads(text) for text in result.stdout.splitlines()]
    assert line["options"]["num_beams"] == 1 and line["from_checkpoint"] == ["max_new_tokens", "no_repeat_ngram_size"]
    assert line["checkpoint_unused"]["length_penalty"] == "read only by beam search"
    # the checkpoint's beams make --length-penalty meaningful; without them it is refused, naming --num-beams
    assert invoke("run", str(export), "-p", "x", "--length-penalty", "2", "-n", "2").exit_code == 0
    refused = invoke("run", str(export), "-p", "x", "--length-penalty", "2", "--num-beams", "1")
    assert refused.exit_code == 2
    assert "--length-penalty applies only to beam search: pass --num-beams > 1 too" in refused.output


@pytest.mark.parametrize("folder_first", [True, False])
def test_run_help_lists_the_folders_defaults(export: Path, folder_first: bool) -> None:
    args: list[Any] = ["run", str(export), "--help"] if folder_first else ["run", "--help", str(export)]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert f"Defaults of {export} (its generation_config.json): --max-new-tokens 7" in text
    assert "--num-beams 3" in text and "not applied: typical_p 0.9 is not applied" in text
    plain = " ".join(invoke("run", "--help").stdout.split())
    assert "[default: the checkpoint's, else 50]" in plain and "Defaults of" not in plain

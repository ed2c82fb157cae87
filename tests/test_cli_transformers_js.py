"""``gpt2-onnx transformers-js``: the folder layout transformers.js loads, made from exports (clients/js/test runs
it in transformers.js itself)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from helpers import invoke

from gpt2_onnx_core.names import TOKENIZER_FILES


@pytest.fixture(scope="module")
def made(shared_export: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tjs") / "model"
    result = invoke("transformers-js", str(shared_export()), str(shared_export(precision="int4")), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"q4: {out / 'onnx/model_q4.onnx'}" in result.output
    return out


def test_the_folder_has_what_transformers_js_reads(made: Path) -> None:
    names = {p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file()}
    expected = {*TOKENIZER_FILES, "config.json", "generation_config.json"}
    expected |= {"onnx/model.onnx", "onnx/model.onnx_data", "onnx/model_q4.onnx", "onnx/model_q4.onnx_data"}
    assert names == expected
    config = json.loads((made / "config.json").read_text())
    assert config["model_type"] == "gpt2"
    assert config["transformers.js_config"] == {
        "dtype": "fp32",
        "use_external_data_format": {"model.onnx": 1, "model_q4.onnx": 1},
    }


@pytest.mark.parametrize("name", ["model.onnx", "model_q4.onnx"])
def test_graphs_name_their_own_data_file_and_batch_size(made: Path, name: str) -> None:
    model = onnx.load(made / "onnx" / name, load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {f"{name}_data"}
    past = [v for v in model.graph.input if v.name.startswith("past_key_values.")]
    assert past and all(v.type.tensor_type.shape.dim[0].dim_param == "batch_size" for v in past)
    # one tied table: the embedding and the head still read the same initializer in the copy
    assert len({t.name for t in model.graph.initializer}) == len(model.graph.initializer)


def test_the_export_itself_is_unchanged(shared_export: Callable[..., Path], made: Path) -> None:
    model = onnx.load(shared_export() / "decode.onnx", load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"model.onnx.data"}


def test_refuses_a_folder_that_is_not_an_export(tmp_path: Path) -> None:
    result = invoke("transformers-js", str(tmp_path), "-o", str(tmp_path / "out"))
    assert result.exit_code != 0
    assert "manifest" in result.output
    assert not (tmp_path / "out").exists()


def test_refuses_two_exports_of_one_precision(shared_export: Callable[..., Path], tmp_path: Path) -> None:
    result = invoke("transformers-js", str(shared_export()), str(shared_export()), "-o", str(tmp_path / "out"))
    assert result.exit_code != 0
    assert "two exports have precision float32" in result.output


def test_refuses_a_changed_file(copy_export: Callable[[], Path], tmp_path: Path) -> None:
    folder = copy_export()
    data = bytearray((folder / "tokenizer.json").read_bytes())
    data[10] ^= 1
    (folder / "tokenizer.json").write_bytes(bytes(data))
    result = invoke("transformers-js", str(folder), "-o", str(tmp_path / "out"))
    assert result.exit_code != 0
    assert "tokenizer.json" in result.output
    shutil.rmtree(folder)

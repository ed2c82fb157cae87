"""runtimes: generation against transformers, batching, sampling, stop conditions, streaming, IO binding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch

from gpt2_onnx_core.errors import InvalidInputError
from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from gpt2_onnx_runtimes.kv_cache import KvCacheRunner
from gpt2_onnx_runtimes.tokenizer import IncrementalDecoder
from tests.conftest import move_eos

PROMPTS = ["The quick brown fox jumps over the lazy", "Hello", "In a shocking finding, scientists"]


def hf_greedy(hf: Any, ids: list[int], steps: int, **kwargs: Any) -> list[int]:
    out = hf.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=steps, pad_token_id=50256, **kwargs)
    return out[0, len(ids) :].tolist()


def test_greedy_equals_transformers_generate(model: Gpt2Onnx, tiny_model: Any) -> None:
    for prompt in PROMPTS:
        result = model.generate(prompt, GenerationOptions(max_new_tokens=12, ignore_eos=True))[0]
        assert result.token_ids == hf_greedy(tiny_model, model.encode(prompt), 12, eos_token_id=None)
        assert result.prompt == prompt and result.finish_reason == "length"


def test_batched_rows_equal_rows_alone(model: Gpt2Onnx) -> None:
    options = GenerationOptions(max_new_tokens=10, ignore_eos=True)
    batch = model.generate(PROMPTS, options)
    for prompt, row in zip(PROMPTS, batch, strict=True):
        alone = model.generate(prompt, options)[0]
        assert row.token_ids == alone.token_ids and row.text == alone.text


def test_batched_greedy_equals_transformers_left_padded_generate(model: Gpt2Onnx, tiny_model: Any) -> None:
    encoded = [model.encode(p) for p in PROMPTS]
    width = max(map(len, encoded))
    ids = torch.tensor([[50256] * (width - len(e)) + e for e in encoded])
    mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded])
    expected = tiny_model.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=8, eos_token_id=None, pad_token_id=50256
    )
    ours = model.generate_ids(encoded, GenerationOptions(max_new_tokens=8, ignore_eos=True))
    assert [r.token_ids for r in ours] == expected[:, width:].tolist()


def test_greedy_with_repetition_penalty_equals_transformers(model: Gpt2Onnx, tiny_model: Any) -> None:
    ids = model.encode(PROMPTS[0])
    ours = model.generate_ids([ids], GenerationOptions(max_new_tokens=12, repetition_penalty=1.5, ignore_eos=True))[0]
    assert ours.token_ids == hf_greedy(tiny_model, ids, 12, eos_token_id=None, repetition_penalty=1.5)


def test_sampling_is_reproducible_by_seed_and_independent_of_the_batch(model: Gpt2Onnx) -> None:
    options = GenerationOptions(
        max_new_tokens=15, do_sample=True, temperature=1.5, top_k=40, top_p=0.95, seed=7, ignore_eos=True
    )
    first, again = model.generate(PROMPTS[0], options)[0], model.generate(PROMPTS[0], options)[0]
    assert first.token_ids == again.token_ids
    other_seed = model.generate(PROMPTS[0], GenerationOptions(**{**options.__dict__, "seed": 8}))[0]
    assert other_seed.token_ids != first.token_ids
    batched = model.generate([PROMPTS[1], PROMPTS[0]], options)[1]
    assert batched.token_ids == first.token_ids


def test_eos_stops_a_row_and_is_returned(model: Gpt2Onnx, tmp_path: Path) -> None:
    first = model.generate(PROMPTS[0], GenerationOptions(max_new_tokens=3, ignore_eos=True))[0].token_ids[0]
    folder = move_eos(model._loaded.folder, first, tmp_path / "moved")  # its first greedy token now ends the text
    result = Gpt2Onnx.load(folder).generate(PROMPTS[0], GenerationOptions(max_new_tokens=10))[0]
    assert result.token_ids == [first] and result.finish_reason == "eos"


def test_stop_string_ends_generation_and_is_left_out(model: Gpt2Onnx) -> None:
    full = model.generate(PROMPTS[2], GenerationOptions(max_new_tokens=12, ignore_eos=True))[0]
    stop = full.text[len(full.text) // 2 :][:4]
    assert stop.strip(), full.text
    result = model.generate(PROMPTS[2], GenerationOptions(max_new_tokens=12, stop=(stop,), ignore_eos=True))[0]
    assert result.finish_reason == "stop"
    assert result.text == full.text[: full.text.index(stop)]
    streamed = model.stream(PROMPTS[2], GenerationOptions(max_new_tokens=12, stop=(stop,), ignore_eos=True))
    assert "".join(streamed) == result.text
    assert streamed.result.finish_reason == "stop"


def test_stream_chunks_join_to_the_generated_text(model: Gpt2Onnx) -> None:
    options = GenerationOptions(max_new_tokens=20, ignore_eos=True)
    stream = model.stream(PROMPTS[0], options)
    chunks = list(stream)
    assert len(chunks) > 1
    assert "".join(chunks) == model.generate(PROMPTS[0], options)[0].text == stream.result.text


def test_incremental_decoding_never_splits_a_character(model: Gpt2Onnx) -> None:
    text = " héllo wörld 日本語のテキスト 🙂👍🏽 done"
    ids = model.encode(text)
    decoder = IncrementalDecoder(model.tokenizer)
    chunks = [decoder.push(i) for i in ids] + [decoder.flush()]
    assert all("\ufffd" not in chunk for chunk in chunks)
    assert "".join(chunks) == text
    assert len(ids) > len(text.split()), "some characters span several tokens"


def test_prompt_plus_new_tokens_beyond_the_positions(model: Gpt2Onnx) -> None:
    with pytest.raises(InvalidInputError, match="exceeds the model's 128 positions"):
        model.generate_ids([[1] * 100], GenerationOptions(max_new_tokens=29))
    assert model.generate_ids([[1] * 100], GenerationOptions(max_new_tokens=28, ignore_eos=True))[0].token_ids


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"do_sample": True, "top_p": 0.0}, "top_p must lie in"),
        ({"do_sample": True, "top_p": 1.5}, "top_p must lie in"),
        ({"do_sample": True, "temperature": 0.0}, "temperature must be a finite number > 0"),
        ({"do_sample": True, "top_k": -1}, "top_k must be >= 0"),
        ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
        ({"repetition_penalty": 0.0}, "repetition_penalty must be a finite number > 0"),
    ],
)
def test_invalid_generation_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        GenerationOptions(**options)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"temperature": 0.5}, "temperature applies"),
        ({"top_k": 5}, "top_k applies"),
        ({"top_p": 0.9}, "top_p applies"),
        ({"seed": 7}, "seed applies"),
        ({"top_k": 5, "seed": 7}, "top_k and seed apply"),
    ],
)
def test_sampling_options_without_do_sample_are_refused(options: dict[str, Any], named: str) -> None:
    """Greedy decoding would ignore them: no option is silently dropped, in the API as on the command line."""
    with pytest.raises(InvalidInputError, match=f"^{named} only when sampling: pass do_sample too"):
        GenerationOptions(**options)
    assert GenerationOptions(do_sample=True, **options).do_sample  # the same values are fine when sampling


def test_token_ids_outside_the_vocabulary(model: Gpt2Onnx) -> None:
    with pytest.raises(InvalidInputError, match="outside \\[0, 50257\\)"):
        model.generate_ids([[5, 50257]])
    with pytest.raises(InvalidInputError, match="empty"):
        model.generate([""])


def test_kv_cache_stays_in_ortvalues_across_steps(model: Gpt2Onnx) -> None:
    runner = KvCacheRunner(model._loaded)
    ids = np.array([[464, 2068, 7586]], dtype=np.int64)
    mask = np.ones_like(ids)
    runner.prefill(ids, mask, np.arange(3)[None])
    first = runner.past
    assert first is not None and all(isinstance(v, ort.OrtValue) and v.device_name().lower() == "cpu" for v in first)
    runner.decode(np.array([[11]]), np.ones((1, 4), dtype=np.int64), np.array([[3]]))
    assert runner.past is not None and runner.past[0].shape() == [1, 4, 4, 16]
    assert runner.past_length == 4


def test_runtimes_never_import_torch(tiny_export: Path) -> None:
    code = (
        "import sys, runtimes\n"
        "from gpt2_onnx_runtimes import Gpt2Onnx, GenerationOptions\n"
        f"m = Gpt2Onnx.load({str(tiny_export)!r})\n"
        "print(m.generate('Hi', GenerationOptions(max_new_tokens=3))[0].token_ids)\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_core_package_import_is_light() -> None:
    code = (
        "import sys, gpt2_onnx, gpt2_onnx.cli; assert not {'torch', 'onnxruntime', 'transformers'} & set(sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

"""onnxruntime-genai runs an export folder unchanged and reproduces transformers' greedy tokens.

Skipped only where onnxruntime_genai cannot be imported (``pip install -e .[dev]`` installs it). The
checkpoint uses a wider weight initialisation than the shared tiny one so that greedy decoding does not repeat
one token, which would let a wrong position or a wrong cache pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import export_checkpoint, save_checkpoint

og = pytest.importorskip("onnxruntime_genai")

NEW_TOKENS = 12
PROMPTS = ("The quick brown fox", "In a shocking finding, scientists discovered a herd", "Hello")


@pytest.fixture(scope="module")
def varied_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("genai-checkpoint"), seed=1, initializer_range=0.2)


@pytest.fixture(scope="module")
def genai_export(varied_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # check=False: these tests compare the export with transformers themselves.
    return export_checkpoint(varied_checkpoint, tmp_path_factory.mktemp("genai-export") / "tiny", check=False)


@pytest.fixture(scope="module")
def reference(varied_checkpoint: Path) -> tuple[Any, Any]:
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(varied_checkpoint, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(varied_checkpoint)
    return model, tokenizer


@pytest.fixture(scope="module")
def genai_model(genai_export: Path) -> Any:
    return og.Model(str(genai_export))


def _until_eos(tokens: Sequence[int], eos: int) -> list[int]:
    """Tokens up to and including the first end-of-text: both sides stop there, then pad differently."""
    out = [int(t) for t in tokens]
    return out[: out.index(eos) + 1] if eos in out else out


def _transformers_greedy(reference: tuple[Any, Any], prompts: Sequence[str]) -> list[list[int]]:
    """transformers' greedy generate over a left-padded batch: the new tokens of each row."""
    import torch

    model, tokenizer = reference
    tokenizer.padding_side = "left"
    tokenizer.pad_token = tokenizer.eos_token
    batch = tokenizer(list(prompts), return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, do_sample=False, max_new_tokens=NEW_TOKENS, pad_token_id=tokenizer.eos_token_id)
    width = batch["input_ids"].shape[1]
    return [_until_eos(row[width:].tolist(), tokenizer.eos_token_id) for row in out]


def _genai_greedy(model: Any, prompts: Sequence[str]) -> list[list[int]]:
    """onnxruntime-genai's greedy search over its own batch encoding: the new tokens of each row."""
    tokenizer = og.Tokenizer(model)
    tokens = tokenizer.encode_batch(list(prompts))  # (B, T), padded by genai as it chooses
    width = tokens.shape()[1]
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=width + NEW_TOKENS, batch_size=len(prompts))
    generator = og.Generator(model, params)
    generator.append_tokens(tokens)
    while not generator.is_done():
        generator.generate_next_token()
    eos = int(tokenizer.eos_token_ids[0])
    return [_until_eos(generator.get_sequence(i)[width:], eos) for i in range(len(prompts))]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_genai_greedy_matches_transformers(genai_model: Any, reference: tuple[Any, Any], prompt: str) -> None:
    expected = _transformers_greedy(reference, [prompt])
    assert len(expected[0]) > 0
    assert _genai_greedy(genai_model, [prompt]) == expected


def test_genai_batch_matches_transformers(genai_model: Any, reference: tuple[Any, Any]) -> None:
    expected = _transformers_greedy(reference, PROMPTS)
    assert _genai_greedy(genai_model, PROMPTS) == expected
    # Padding must not change a row's tokens: each row alone gives the same continuation.
    assert [_transformers_greedy(reference, [p])[0] for p in PROMPTS] == expected


def test_genai_tokenizer_reads_the_exported_tokenizer(genai_model: Any, genai_export: Path) -> None:
    from tokenizers import Tokenizer

    ours = Tokenizer.from_file(str(genai_export / "tokenizer.json"))
    theirs = og.Tokenizer(genai_model)
    for text in (*PROMPTS, " leading space and <|endoftext|> inside", "Ünïcödé ✓"):
        ids = ours.encode(text).ids
        assert [int(i) for i in theirs.encode(text)] == ids
        assert theirs.decode(np.array(ids, dtype=np.int32)) == ours.decode(ids)  # both drop <|endoftext|>

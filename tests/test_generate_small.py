"""GPT-2-small-sized equality: beam search and greedy decoding with processors equal transformers' ``generate``
on a model with GPT-2-small's dimensions (peaked: initializer_range 0.2), alone and in a left-padded batch.

Slow (an export of 124M parameters, about a minute): ``pytest -m slow tests/test_generate_small.py``.

Scores are compared within 2e-3: with these wide weights the logits reach ±24 and ONNX Runtime's differ from
PyTorch's by up to 1.6e-3 (7e-5 of their magnitude; measured on the prompt below), which the log-softmax passes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpt2_onnx_runtimes import GenerationOptions, Gpt2Onnx
from tests.conftest import export_checkpoint, save_checkpoint
from tests.generate_reference import assert_equal_results, transformers_generate

pytestmark = pytest.mark.slow

SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024}
TEXTS = ("The quick brown fox jumps over the lazy dog", "Hello", "In a shocking finding, scientists discovered")
NEW = 16

CASES = [
    {"num_beams": 4},
    {"num_beams": 4, "num_return_sequences": 3, "no_repeat_ngram_size": 3, "length_penalty": 0.6},
    {"num_beams": 3, "early_stopping": True, "repetition_penalty": 1.2, "min_new_tokens": 10},
    {"num_beams": 1, "no_repeat_ngram_size": 2, "bad_words_ids": ((11,), (13, 198))},
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("small-checkpoint"), seed=0, initializer_range=0.2, **SMALL)


@pytest.fixture(scope="module")
def model(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Gpt2Onnx:
    return Gpt2Onnx.load(export_checkpoint(checkpoint, tmp_path_factory.mktemp("small-export") / "e", check=False))


@pytest.fixture(scope="module")
def reference(checkpoint: Path) -> Any:
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(checkpoint, attn_implementation="eager").eval()


@pytest.mark.parametrize("case", CASES, ids=lambda case: ",".join(f"{k}={v}" for k, v in case.items()))
def test_small_model_equals_transformers(case: dict[str, Any], model: Gpt2Onnx, reference: Any) -> None:
    prompts = [model.encode(text) for text in TEXTS]
    hf_case = {k: [list(v) for v in case[k]] if k == "bad_words_ids" else case[k] for k in case}
    for batch in ([prompts[0]], prompts):
        expected = transformers_generate(reference, batch, 50256, max_new_tokens=NEW, **hf_case)
        found = model.generate_ids(batch, GenerationOptions(max_new_tokens=NEW, **case))
        assert_equal_results(found, expected, score_tolerance=2e-3)
